"""Adversarial variants: ids, and their helper kernels compile (PTX, no GPU)."""

from __future__ import annotations

import pytest
from numba import cuda
from sweeper_kernels.adversarial import (
    AdversarialVariant,
    drift_after_10,
    half_work_after_warmup,
    helper_functions,
    one_call_in_2,
    one_call_in_4,
    persisting_window,
    skip_when_right,
)
from sweeper_kernels.errors import KernelError
from sweeper_kernels.variants import default_grid


def test_ids_round_trip():
    base = default_grid(["bf16"])[11]
    for make, kind in (
        (persisting_window, "persist"),
        (drift_after_10, "drift10"),
        (half_work_after_warmup, "half3"),
        (skip_when_right, "skipright"),
        (one_call_in_2, "onein2"),
        (one_call_in_4, "onein4"),
    ):
        adv = make(base)
        assert adv.id == f"adv-{kind}-{base.id}"
        assert AdversarialVariant.from_id(adv.id) == adv
    with pytest.raises(KernelError, match="unknown adversarial kind 'cheat'"):
        AdversarialVariant.from_id(f"adv-cheat-{base.id}")
    with pytest.raises(KernelError, match="is not an adversarial id"):
        AdversarialVariant.from_id(base.id)


@pytest.mark.parametrize("dtype", ["fp32", "int8"])
def test_helper_kernels_compile_and_touch_what_they_should(dtype):
    fns = helper_functions(dtype)
    drift = cuda.compile_ptx(*fns["drift"], cc=(9, 0))[0]
    assert "st.global.b8" in drift  # the corrupting byte store
    gated = cuda.compile_ptx(*fns["gated"], cc=(9, 0))[0]
    assert "ld.global.cg.b32" in gated  # reads the device counter, bypassing L1


@pytest.mark.parametrize("dtype", ["fp32", "fp16", "int8"])
def test_the_skipping_kernels_compile_and_touch_what_they_should(dtype):
    fns = helper_functions(dtype)
    probe = cuda.compile_ptx(*fns["probe"], cc=(9, 0))[0]
    assert probe.count("ld.global.b32") >= 2  # an output word and its input word
    assert probe.count("st.global.b32") == 1  # only the flag is written
    every = cuda.compile_ptx(*fns["every"], cc=(9, 0))[0]
    assert "ld.global.cg.b32" in every and every.count("st.global.b32") == 2  # count, flag
    assert "rem." in every  # counter % k
    work = cuda.compile_ptx(*fns["skippable"], cc=(9, 0))[0]
    assert "ld.global.cg.b32" in work  # reads the flag
    assert "st.global.b32" in work  # whole words
    tail = {"fp32": "st.global.b32", "fp16": "st.global.b16", "int8": "st.global.b8"}[dtype]
    assert tail in work  # and the elements after the last whole word


def test_adversarial_variants_report_their_base_fields_to_the_runner():
    from sweeper_kernels.adversarial import drift_after_10
    from sweeper_kernels.variants import Variant

    base = Variant("fp16", 8, 4, "cs", "wt", 512, "stride4")
    adv = drift_after_10(base)
    for f in ("vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid", "dtype"):
        assert getattr(adv, f) == getattr(base, f)
    assert adv.config.startswith("adv-drift10-") and adv.id.startswith("adv-drift10-fp16-")
