"""PTX of every default-grid compile (4 dtypes) and a seeded extended sample for sm_90, and a
stratified sample of them for sm_89 (SM89_SAMPLE), compiled on the CPU (no GPU) and read back: vector width, cache operators, unroll in
the main loop, no local memory. See sweeper_kernels.ptxcheck for exactly what is checked.

Block and grid are launch parameters, so every default-grid *config* of a dtype maps onto one
of its 43 compile keys; checking each key checks every config. The whole set is compiled once,
in a process pool, into the PTX disk cache ($SWEEPER_CACHE or ~/.cache/sweeper).
"""

from __future__ import annotations

import os
import random
import re
from itertools import product

import pytest
from sweeper_kernels import hints
from sweeper_kernels.build import ptx, ptx_many
from sweeper_kernels.ptxcheck import check_ptx, global_accesses, loops
from sweeper_kernels.source import CompileKey
from sweeper_kernels.variants import (
    DTYPES,
    UNROLLS,
    VEC_BYTES,
    Variant,
    compile_keys,
    default_grid,
)

CCS = ((8, 9), (9, 0))
DEFAULT_KEYS = compile_keys(default_grid())
_RNG = random.Random(20261129)
# Seeded extended sample, stratified so every (load hint, store hint) pair appears once with a
# random dtype / vector width / unroll.
EXTENDED_SAMPLE = [
    k
    for ld, st in product(hints.names("load"), hints.names("store"))
    if (k := CompileKey(_RNG.choice(DTYPES), _RNG.choice(VEC_BYTES), _RNG.choice(UNROLLS), ld, st))
    not in DEFAULT_KEYS
]
ALL_KEYS = DEFAULT_KEYS + EXTENDED_SAMPLE
# sm_89 for a stratified sample: one key of each (dtype, vector width, unroll, kernel form) of
# the default grid (its plain-hint key where it has one), and the extended sample (every hint
# pair). NVVM writes the
# same PTX for sm_89 as for sm_90 but for the target line and the mangled names, which
# test_sm89_ptx_is_sm90s_but_for_the_target checks on the sample; every key is checked at sm_90.
_STRATA: dict[tuple, CompileKey] = {}
for _k in sorted(DEFAULT_KEYS, key=lambda k: (k.load_hint, k.store_hint) != ("default", "default")):
    _STRATA.setdefault((_k.dtype, _k.vec_bytes, _k.unroll, _k.flat, _k.index32, bool(_k.block)), _k)
SM89_SAMPLE = list(_STRATA.values()) + EXTENDED_SAMPLE
JOBS = [(k, (9, 0)) for k in ALL_KEYS] + [(k, (8, 9)) for k in SM89_SAMPLE]


@pytest.fixture(scope="module")
def all_ptx():
    """Every job's PTX, compiled in parallel on a cold cache (2 cores in CI)."""
    out = {}
    for cc in CCS:
        keys = [k for k, c in JOBS if c == cc]
        out.update(ptx_many(keys, [cc], workers=os.cpu_count()))
    return out


@pytest.mark.parametrize("key, cc", JOBS, ids=[f"{k.slug}-sm{c[0]}{c[1]}" for k, c in JOBS])
def test_ptx_is_what_the_config_asks_for(all_ptx, key, cc):
    text = all_ptx[(key, cc)]
    assert f".target sm_{cc[0]}{cc[1]}" in text
    assert check_ptx(key, text) == []


def _unnamed(text: str) -> list[str]:
    """PTX lines without the target, version and comment lines, mangled names replaced."""
    return [
        re.sub(r"_ZN\w+", "NAME", line)
        for line in text.splitlines()
        if not line.startswith((".target", ".version", "//"))
    ]


def test_sm89_ptx_is_sm90s_but_for_the_target(all_ptx):
    assert len(SM89_SAMPLE) >= 100 and len({k.slug for k in SM89_SAMPLE}) == len(SM89_SAMPLE)
    for key in SM89_SAMPLE:
        assert _unnamed(all_ptx[(key, (8, 9))]) == _unnamed(all_ptx[(key, (9, 0))]), key.slug


def test_sample_covers_every_axis_value():
    assert {k.load_hint for k in ALL_KEYS} == set(hints.names("load"))
    assert {k.store_hint for k in ALL_KEYS} == set(hints.names("store"))
    assert {k.unroll for k in ALL_KEYS} == set(UNROLLS)
    assert {k.vec_bytes for k in ALL_KEYS} == set(VEC_BYTES)


def test_literal_instructions_for_one_config(all_ptx):
    """The exact PTX spellings, independent of the checker's parser."""
    text = all_ptx[(CompileKey("fp16", 16, 4, "L2::evict_last", "cs"), (9, 0))]
    # sm_90 takes an L2 eviction priority on a 128-bit load only through a cache policy.
    assert len(re.findall(r"ld\.global\.L2::cache_hint\.v4\.u32\s.*\], pol;", text)) == 5
    assert len(re.findall(r"createpolicy\.fractional\.L2::evict_last\.b64 pol, 1\.0;", text)) == 6
    assert len(re.findall(r"st\.global\.cs\.v4\.u32\s", text)) == 5
    assert len(re.findall(r"ld\.global\.L2::cache_hint\.b16\s", text)) == 1
    plain = all_ptx[(CompileKey("int8", 8, 2, "default", "default"), (8, 9))]
    assert re.search(r"ld\.global\.v2\.u32\s", plain) and re.search(r"st\.global\.v2\.u32\s", plain)
    assert not re.search(r"(ld|st)\.global\.(cs|cg|lu|nc|wt|L1|L2)", plain)
    scalar = all_ptx[(CompileKey("fp32", 4, 1, "cs", "cs"), (9, 0))]
    assert re.search(r"ld\.global\.cs\.u32\s", scalar) and ".v2." not in scalar


def test_variant_ptx_is_its_compile_key_ptx():
    v = Variant("bf16", 8, 2, "cs", "default", 512, "stride4")
    w = Variant("bf16", 8, 2, "cs", "default", 128, "onepass")
    assert ptx(v) == ptx(w) == ptx(v.compile_key, (9, 0))


# ---- the checker can fail: feed it PTX that is not what the config asks for --------------------


def test_checker_catches_wrong_unroll_hint_width_and_local_memory(all_ptx):
    u2 = all_ptx[(CompileKey("fp32", 16, 2, "cs", "cs"), (9, 0))]
    assert any("per iteration" in p for p in check_ptx(CompileKey("fp32", 16, 4, "cs", "cs"), u2))
    assert any("cache operator" in p for p in check_ptx(CompileKey("fp32", 16, 2, "cg", "cs"), u2))
    assert any("cache operator" in p for p in check_ptx(CompileKey("fp32", 16, 2, "cs", "wt"), u2))
    assert any("word(s)" in p for p in check_ptx(CompileKey("fp32", 8, 2, "cs", "cs"), u2))
    spilled = u2.replace("ret;", "st.local.u32 [%rd1], %r1;\n\tret;")
    assert check_ptx(CompileKey("fp32", 16, 2, "cs", "cs"), spilled) == [
        "local memory traffic (ld.local/st.local)"
    ]


def test_checker_catches_a_relu_of_the_wrong_form(all_ptx):
    fixed = CompileKey("fp32", 16, 2, "default", "default", True, True, 128)
    flat32 = CompileKey("fp32", 16, 2, "default", "default", True, True)
    assert fixed.relu_form == "max" and flat32.relu_form == "bits"
    assert CompileKey("fp16", 16, 2, "default", "default", True, True, 128).relu_form == "bits"
    maxed, bits = all_ptx[(fixed, (9, 0))], all_ptx[(flat32, (9, 0))]
    # one word left to the integer formula, or a float compare beside the max
    assert any("max.f32" in p for p in check_ptx(fixed, maxed.replace("max.f32", "max.u32", 1)))
    compare = maxed.replace("ret;", "setp.gt.f32 %p9, %f1, 0f00000000;\n\tret;", 1)
    assert any("other float" in p for p in check_ptx(fixed, compare))
    # the integer form where max is wanted, and max where the integer form is
    assert any("max.f32" in p for p in check_ptx(fixed, bits))
    assert any("bit-level ReLU" in p for p in check_ptx(flat32, maxed))


def test_parser_reads_accesses_and_loops():
    text = "\n".join(
        [
            "$L__BB0_1:",
            "\tld.global.L2::evict_last.v4.u32 {%r1, %r2, %r3, %r4}, [%rd1];",
            "\t@%p1 st.global.cs.v2.u32 [%rd2], {%r1, %r2};",
            "\t@%p2 bra $L__BB0_1;",
            "\tld.global.nc.b8 %r9, [%rd3];",
        ]
    )
    acc = global_accesses(text)
    assert [(a.op, a.qualifiers, a.vec, a.type) for a in acc] == [
        ("ld", ("L2::evict_last",), 4, "u32"),
        ("st", ("cs",), 2, "u32"),
        ("ld", ("nc",), 1, "b8"),
    ]
    assert loops(text) == [(0, 3)]
