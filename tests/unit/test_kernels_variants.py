"""Variants are data: ids, parsing, grids and launch shapes (no numba, no GPU)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sweeper_kernels import hints
from sweeper_kernels import source as source_mod
from sweeper_kernels.errors import KernelError
from sweeper_kernels.launch import INDEX32_MAX, elems_per_vector, launch_shape
from sweeper_kernels.variants import (
    BLOCKS,
    DTYPES,
    GRID_SHAPES,
    UNROLLS,
    VEC_BYTES,
    Variant,
    compile_keys,
    default_grid,
    extended_grid,
    get_grid,
)


def test_config_and_id_format():
    v = Variant("fp16", 16, 2, "cs", "cs", 256, "onepass")
    assert v.config == "v16-u2-ld.cs-st.cs-b256-onepass"
    assert v.id.startswith("fp16-v16-u2-ld.cs-st.cs-b256-onepass-")
    assert len(v.id.rsplit("-", 1)[1]) == 8
    assert hash(v) == hash(Variant("fp16", 16, 2, "cs", "cs", 256, "onepass"))


def test_ids_unique_and_round_trip_over_extended_grid():
    grid = extended_grid()
    ids = [v.id for v in grid]
    assert len(set(ids)) == len(ids)
    for v in grid[::97]:
        assert Variant.from_id(v.id) == v
        assert Variant.parse(f"{v.dtype}-{v.config}") == v  # hash optional


def test_id_hash_covers_kernel_source(monkeypatch):
    v = Variant("fp32", 16, 4, "L2::evict_last", "cs", 128, "stride4")
    old = v.id
    monkeypatch.setattr(source_mod, "source_fingerprint", lambda: "edited kernel")
    import sweeper_kernels.variants as variants_mod

    monkeypatch.setattr(variants_mod, "source_fingerprint", lambda: "edited kernel")
    assert v.id != old
    with pytest.raises(KernelError, match="different kernel source"):
        Variant.from_id(old)


def test_the_source_fingerprint_reads_code_the_same_on_every_python():
    """The kernel-source fingerprint is taken from source._dump, not ast.dump (whose text
    differs by version: 3.12 adds an empty `type_params` to every function, 3.13 leaves empty
    fields out): a field that holds nothing is left out, so both forms read the same, while
    code that does something else reads differently."""
    import ast

    fn = ast.parse("def f(x):\n    return x + 1\n").body[0]
    bare = ast.FunctionDef(name="f", args=fn.args, body=fn.body, decorator_list=[])
    with_empty = ast.FunctionDef(
        name="f", args=fn.args, body=fn.body, decorator_list=[], returns=None
    )
    with_empty.type_params = []  # as 3.12 and later parse it
    assert source_mod._dump(bare) == source_mod._dump(with_empty) == source_mod._dump(fn)
    other = ast.parse("def f(x):\n    return x + 2\n").body[0]
    assert source_mod._dump(other) != source_mod._dump(fn)
    assert "value=1" in source_mod._dump(fn) and "kind" not in source_mod._dump(fn)


@pytest.mark.parametrize(
    "bad, why",
    [("", "is not a variant id"), ("fp32", "is not a variant id"),
     ("fp64-v16-u2-ld.cs-st.cs-b256-onepass", "dtype='fp64' is not one of"),
     ("fp32-v32-u2-ld.cs-st.cs-b256-onepass", "vec_bytes=32 is not one of"),
     ("fp32-v16-u3-ld.cs-st.cs-b256-onepass", "unroll=3 is not one of"),
     ("fp32-v16-u2-ld.zz-st.cs-b256-onepass", "unknown hint token"),
     ("fp32-v16-u2-ld.cs-st.cs-b100-onepass", "block=100 is not one of"),
     ("fp32-v16-u2-ld.cs-st.cs-b256-stride0", "grid='stride0': use")],
)  # fmt: skip
def test_bad_ids_are_one_clear_error(bad, why):
    with pytest.raises(KernelError, match=why):
        Variant.parse(bad)


def test_default_grid_contents():
    grid = default_grid()
    keys = compile_keys(grid)
    # default_grid's docstring: tiled keys = core 36 + L2 band 4 + DRAM 3 + upper band 7;
    # 16-byte keys (50 - 24 narrow) at 3 blocks x 3 grids, 4- and 8-byte keys (24) at one
    # shape; 9 small-size flat keys and the band's flat peak, each at 3 blocks, once as
    # flat, once as flat32, once as fixed32 (whose block is compiled in: a key per block)
    tiled, narrow, flat = 36 + 4 + 3 + 7, 24, 9 + 1
    # block and grid are launch parameters, but for fixed32
    assert len(keys) == 4 * (tiled + 2 * flat + 3 * flat)
    assert len(grid) == 4 * ((tiled - narrow) * 3 * 3 + narrow + flat * 3 * 3)
    for d in DTYPES:
        for vec in (4, 8, 16):
            for u in (1, 2, 4):
                for ld in ("default", "cs"):
                    for st_ in ("default", "cs"):
                        assert Variant(d, vec, u, ld, st_, 256, "onepass") in grid
                        for b in (128, 256, 512):
                            for g in ("onepass", "stride1", "stride4"):
                                want = vec == 16 or (b, g) == (256, "onepass")
                                assert (Variant(d, vec, u, ld, st_, b, g) in grid) == want
        assert Variant(d, 16, 4, "L2::evict_last", "cs", 256, "onepass") in grid
        assert Variant(d, 16, 8, "default", "default", 512, "stride4") in grid
        assert Variant(d, 16, 8, "L2::evict_last:0.75", "cs", 512, "stride4") in grid
        assert Variant(d, 16, 1, "L2::evict_last", "cs", 128, "flat") in grid
    assert Variant(d, 16, 2, "default", "cs", 128, "stride1") in grid
    assert {v.grid for v in grid} == {
        "onepass", "stride1", "stride4", "flat", "flat32", "fixed32"
    }  # fmt: skip
    assert {v.unroll for v in grid if v.grid == "flat"} == {1, 2, 4, 8}
    assert {v.load_hint for v in grid if v.flat and v.unroll == 8} == {"nc"}
    for d in DTYPES:
        for b in (128, 256, 512):
            assert Variant(d, 16, 8, "nc", "cs", b, "flat") in grid
    assert Variant(d, 16, 2, "default", "cs", 128, "flat") in grid
    # every flat config three times: 64-bit and 32-bit index maths, 32-bit with the block
    # compiled in, separate compiles
    flat = {(v.vec_bytes, v.unroll, v.load_hint, v.store_hint, v.block) for v in grid if v.flat}
    for grid_name in ("flat", "flat32", "fixed32"):
        assert {
            (v.vec_bytes, v.unroll, v.load_hint, v.store_hint, v.block)
            for v in grid
            if v.grid == grid_name
        } == flat
    assert {k.index32 for k in keys if k.flat} == {True, False}
    assert not any(k.index32 for k in keys if not k.flat)
    fixed = {v.compile_key for v in grid if v.grid == "fixed32"}
    assert {k.block for k in fixed} == {128, 256, 512} and all(k.index32 for k in fixed)
    assert not any(k.block for k in set(keys) - fixed)
    both = {
        k.flat for k in keys if (k.vec_bytes, k.unroll, k.load_hint) == (16, 1, "L2::evict_last")
    }
    assert both == {True, False}  # the flat form is its own compile next to the tiled one


def test_extended_grid_has_every_axis_value():
    grid = extended_grid(["int8"])
    tiled = len(VEC_BYTES) * len(UNROLLS) * len(hints.names("load")) * 4 * len(BLOCKS) * 5
    flat = len(VEC_BYTES) * len(UNROLLS) * len(hints.names("load")) * 4 * len(BLOCKS)
    assert len(grid) == tiled + 3 * flat  # flat, flat32 and fixed32
    assert len(compile_keys(grid)) == tiled // 5 // len(BLOCKS) * 3 + flat  # fixed32: per block
    assert {v.grid for v in grid} == set(GRID_SHAPES)
    assert get_grid("extended", "int8") == grid
    with pytest.raises(KernelError, match="unknown grid 'nope'"):
        get_grid("nope")
    with pytest.raises(KernelError, match=r"unknown dtype\(s\) \['fp64'\]"):
        default_grid(["fp64"])


def test_import_is_numba_free():
    code = (
        "import sys\n"
        "from sweeper_kernels import build, launch, ptxcheck, reference, variants\n"
        "variants.default_grid(); variants.Variant.parse('fp32-v4-u1-ld.def-st.def-b128-onepass')\n"
        "sys.exit('numba' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@given(
    n=st.integers(1, 1 << 34),
    dtype=st.sampled_from(DTYPES),
    vec=st.sampled_from(VEC_BYTES),
    u=st.sampled_from(UNROLLS),
    block=st.sampled_from(BLOCKS),
    grid=st.sampled_from(GRID_SHAPES),
    sms=st.integers(1, 200),
)
def test_launch_shape_covers_everything(n, dtype, vec, u, block, grid, sms):
    v = Variant(dtype, vec, u, "default", "default", block, grid)
    if grid in ("flat32", "fixed32"):  # flat's shape, refused past 2**31 - 1 slot indices
        flat = launch_shape(replace(v, grid="flat"), n, sms, 2048)
        if flat.blocks * block * u > INDEX32_MAX:
            with pytest.raises(KernelError, match="32-bit index"):
                launch_shape(v, n, sms, 2048)
        else:
            assert launch_shape(v, n, sms, 2048) == flat
        return
    s = launch_shape(v, n, sms, 2048)
    e = elems_per_vector(v)
    assert s.threads == block and s.blocks >= 1
    if grid == "flat":  # u slots per thread, one per vector and per tail element, no spare block
        assert s.nvec == n // e and (s.ntiles, s.shift) == (0, 0)
        assert s.blocks * block * u >= s.nvec + n % e > (s.blocks - 1) * block * u
        return
    assert s.nvec == n // e and s.ntiles == s.nvec // (u * block) and s.shift == s.ntiles % s.blocks
    assert n % e < s.blocks * block  # every tail element has a thread
    tile = u * block
    units = (n + e - 1) // e
    onepass = (units + tile - 1) // tile
    if grid == "onepass":
        assert s.blocks == onepass
        assert s.blocks * tile * e >= n
    else:
        assert s.blocks == min(onepass, v.waves * sms * (2048 // block))


def test_fractional_hints_and_the_flat_form_round_trip_through_ids():
    v = Variant("fp16", 16, 4, "L2::evict_last:0.75", "cs", 512, "stride4")
    assert v.config == "v16-u4-ld.L2el75-st.cs-b512-stride4"
    assert Variant.parse(v.id) == v
    f = Variant("int8", 16, 1, "L2::evict_last:0.5", "cs", 128, "flat")
    assert f.config == "v16-u1-ld.L2el50-st.cs-b128-flat" and f.waves is None
    assert Variant.parse(f.id) == f and f.compile_key.flat
    assert not Variant("int8", 16, 1, "default", "default", 128, "onepass").compile_key.flat


def test_flat32_is_the_flat_form_with_32_bit_indices_as_its_own_compile():
    f = Variant("fp32", 16, 2, "default", "cs", 128, "flat32")
    assert f.config == "v16-u2-ld.def-st.cs-b128-flat32" and Variant.parse(f.id) == f
    assert f.flat and f.waves is None and f.compile_key.flat and f.compile_key.index32
    g = replace(f, grid="flat")
    assert g.flat and not g.compile_key.index32 and g.compile_key != f.compile_key
    assert f.compile_key.slug == g.compile_key.slug + "_i32"
    # the largest fp32 launch that fits: 2**31 - 1 slots round down to whole 256-slot tiles
    n_max = (INDEX32_MAX // 256) * 256 * 4
    assert launch_shape(f, n_max, 132, 2048).blocks == INDEX32_MAX // 256
    with pytest.raises(KernelError, match="use the same config with grid 'flat'"):
        launch_shape(f, n_max + 256 * 4, 132, 2048)


def test_flat_takes_any_unroll_as_its_own_compile():
    f2 = Variant("fp32", 16, 2, "default", "default", 128, "flat")
    assert f2.config == "v16-u2-ld.def-st.def-b128-flat" and Variant.parse(f2.id) == f2
    assert f2.compile_key.flat and f2.compile_key.unroll == 2
    assert (
        f2.compile_key != Variant("fp32", 16, 2, "default", "default", 128, "onepass").compile_key
    )


@pytest.mark.parametrize("config", ["v16-u2-ld.nc-st.cs-b128-flat", "v4-u1-ld.def-st.def-b1024-stride1",
                                    "v8-u8-ld.L2el-st.cs-b512-onepass"])  # fmt: skip
def test_the_climbs_moves_are_one_axis_changes_then_bytes_in_flight_trades(config):
    from sweeper_kernels.variants import BLOCKS, UNROLLS, VEC_BYTES

    v = Variant.parse(f"fp32-{config}")
    moves = v.neighbours()
    axes = ("vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid")
    changed = [tuple(a for a in axes if getattr(m, a) != getattr(v, a)) for m in moves]
    one = [m for m, c in zip(moves, changed, strict=True) if len(c) == 1]
    assert moves[: len(one)] == one and len(one) == 26 and len(set(moves)) == len(moves)
    assert not any(m.grid == "fixed32" for m in moves)  # seeded, not a move
    trades = moves[len(one) :]
    for m in trades:  # two of vector width, unroll and block, at the same bytes per block
        c = tuple(a for a in axes if getattr(m, a) != getattr(v, a))
        assert len(c) == 2 and set(c) <= {"vec_bytes", "unroll", "block"}
        assert m.vec_bytes * m.unroll * m.block == v.vec_bytes * v.unroll * v.block
    every = {  # each trade the grid's values allow, computed another way
        (x, y, z)
        for x in VEC_BYTES for y in UNROLLS for z in BLOCKS
        if x * y * z == v.vec_bytes * v.unroll * v.block
        and sum((x != v.vec_bytes, y != v.unroll, z != v.block)) == 2
    }  # fmt: skip
    assert {(m.vec_bytes, m.unroll, m.block) for m in trades} == every
