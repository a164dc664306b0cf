"""A kernel variant is data: a frozen config with a stable id. No numba here (fast to import).

    Variant(dtype="fp16", vec_bytes=16, unroll=2, load_hint="cs", store_hint="cs",
            block=256, grid="onepass")
    .config  "v16-u2-ld.cs-st.cs-b256-onepass"          (dtype-free, readable)
    .id      "fp16-v16-u2-ld.cs-st.cs-b256-onepass-1a2b3c4d"

The 8-hex hash covers the dtype, the config AND the kernel source fingerprint, so numbers
measured with edited kernel code never share an id with old ones. `block` and `grid` are launch
parameters: variants that differ only in them share one compiled kernel (`compile_key`).
"""

from __future__ import annotations

import functools
import hashlib
import random
import re
from dataclasses import dataclass, replace
from itertools import product

from sweeper_kernels import hints
from sweeper_kernels.dtypes import DTYPES
from sweeper_kernels.errors import KernelError
from sweeper_kernels.source import CompileKey, equivalent_fingerprints, source_fingerprint

VEC_BYTES: tuple[int, ...] = (4, 8, 16)
UNROLLS: tuple[int, ...] = (1, 2, 4, 8)
BLOCKS: tuple[int, ...] = (128, 256, 512, 1024)
GRID_SHAPES: tuple[str, ...] = (
    "onepass", "flat", "flat32", "fixed32", "stride1", "stride2", "stride4", "stride8"
)  # fmt: skip
# the grid shapes the climb moves between: "fixed32" is seeded (default_grid) and is the
# baseline's floor, not a move, so a climb step costs no compile per block size and a run
# recorded before it existed replays its climb exactly
CLIMB_GRIDS: tuple[str, ...] = tuple(g for g in GRID_SHAPES if g != "fixed32")
# a config's axes, in the order of its name and of the climb's one-axis moves
AXIS_NAMES: tuple[str, ...] = ("vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid")

# what starts the id of an anti-gaming variant (sweeper_kernels.adversarial): "adv-<kind>-<base>"
ADVERSARIAL_PREFIX = "adv-"


def is_adversarial_id(variant_id: str) -> bool:
    """Whether a variant id names an anti-gaming variant rather than a grid variant."""
    return variant_id.startswith(ADVERSARIAL_PREFIX)


_GRID_RE = re.compile(r"^(onepass|flat|flat32|fixed32|stride([1-9][0-9]?))$")
_CONFIG_RE = (
    r"v(?P<vec>\d+)-u(?P<unroll>\d+)-ld\.(?P<ld>[A-Za-z0-9]+)-st\.(?P<st>[a-z]+)"
    r"-b(?P<block>\d+)-(?P<grid>onepass|flat32|fixed32|flat|stride\d+)"
)
_ID_RE = re.compile(rf"^(?P<dtype>[a-z0-9]+)-{_CONFIG_RE}(?:-(?P<hash>[0-9a-f]{{8}}))?$")


def id_hash(dtype: str, config: str, source: str) -> str:
    """The 8 hex digits that end a variant id: a hash of the dtype, the config and the source it
    runs (the grid's kernel-source fingerprint, a user's file's sha256, a policy header's)."""
    return hashlib.sha256(f"{dtype}|{config}|{source}".encode()).hexdigest()[:8]


@dataclass(frozen=True, order=True)
class Variant:
    dtype: str
    vec_bytes: int
    unroll: int
    load_hint: str = "default"
    store_hint: str = "default"
    block: int = 256
    grid: str = "onepass"

    def __post_init__(self) -> None:
        checks = [
            ("dtype", self.dtype, DTYPES),
            ("vec_bytes", self.vec_bytes, VEC_BYTES),
            ("unroll", self.unroll, UNROLLS),
            ("load_hint", self.load_hint, hints.names("load")),
            ("store_hint", self.store_hint, hints.names("store")),
            ("block", self.block, BLOCKS),
        ]
        for name, value, allowed in checks:
            if value not in allowed:
                raise KernelError(f"variant {name}={value!r} is not one of {list(allowed)}")
        if not _GRID_RE.match(self.grid):
            raise KernelError(
                f"variant grid={self.grid!r}: use 'onepass', 'flat', 'flat32', 'fixed32' or "
                "'strideW' (W=1..99)"
            )

    # ---- names ------------------------------------------------------------------------------

    @property
    def config(self) -> str:
        return (
            f"v{self.vec_bytes}-u{self.unroll}-ld.{hints.get('load', self.load_hint).token}"
            f"-st.{hints.get('store', self.store_hint).token}-b{self.block}-{self.grid}"
        )

    @property
    def hash8(self) -> str:
        return self._hash8(source_fingerprint())

    def _hash8(self, fingerprint: str) -> str:
        return id_hash(self.dtype, self.config, fingerprint)

    @property
    def id(self) -> str:
        return f"{self.dtype}-{self.config}-{self.hash8}"

    def __str__(self) -> str:
        return self.id

    # ---- what the launch needs ----------------------------------------------------------------

    @property
    def compile_key(self) -> CompileKey:
        return CompileKey(
            self.dtype,
            self.vec_bytes,
            self.unroll,
            self.load_hint,
            self.store_hint,
            self.flat,
            self.grid in ("flat32", "fixed32"),
            self.block if self.grid == "fixed32" else 0,
        )

    @property
    def flat(self) -> bool:
        """The loop-free form: "flat" (64-bit index maths), "flat32" (32-bit) or "fixed32"
        (32-bit, the block size compiled in)."""
        return self.grid in ("flat", "flat32", "fixed32")

    @property
    def waves(self) -> int | None:
        """W of a "strideW" grid (grid-stride over W waves per SM); None for onepass/flat."""
        return int(self.grid[len("stride") :]) if self.grid.startswith("stride") else None

    # ---- parsing ------------------------------------------------------------------------------

    @classmethod
    def parse(cls, text: str) -> Variant:
        """An id ("fp32-v16-u2-ld.cs-st.cs-b256-onepass-1a2b3c4d") or the same without hash.

        A hash that matches neither the current kernel source nor code recorded as equivalent
        for its compile key (source.EQUIVALENT_FINGERPRINTS) is an error: that id names code that
        no longer exists.
        An id made under equivalent code parses to the Variant whose `.id` is the current one.
        """
        return _parsed(cls, text, source_fingerprint())

    @classmethod
    def _parse(cls, text: str) -> Variant:
        m = _ID_RE.match(text.strip())
        if not m:
            raise KernelError(
                f"'{text}' is not a variant id (like fp32-v16-u2-ld.cs-st.cs-b256-onepass-"
                "<hash>); `sweeper kernels list` prints the valid ids"
            )
        ld, st = hints.from_token("load", m["ld"]), hints.from_token("store", m["st"])
        if ld is None or st is None:
            raise KernelError(
                f"'{text}': unknown hint token (loads: {hints.tokens('load')}, "
                f"stores: {hints.tokens('store')})"
            )
        v = cls(
            dtype=m["dtype"],
            vec_bytes=int(m["vec"]),
            unroll=int(m["unroll"]),
            load_hint=ld.name,
            store_hint=st.name,
            block=int(m["block"]),
            grid=m["grid"],
        )
        if m["hash"] and m["hash"] not in (
            v.hash8,
            *(v._hash8(fp) for fp in equivalent_fingerprints(v.compile_key)),
        ):
            raise KernelError(
                f"'{text}' was made from different kernel source (hash {m['hash']}, this "
                f"checkout gives {v.hash8}); its results are not comparable with this code"
            )
        return v

    @classmethod
    def current_id(cls, text: str) -> str | None:
        """The id this checkout gives the kernel a recorded id names: `text` itself, or the
        current id where `text` was made under equivalent kernel code; None where it names
        kernel code this checkout does not have. Text that is no variant id comes back as is
        (configs of other executors)."""
        return _current_id(cls, text, source_fingerprint())

    @classmethod
    def from_id(cls, variant_id: str) -> Variant:
        return cls.parse(variant_id)

    def neighbours(self) -> list[Variant]:
        """The moves of the search's climb, in this order: every variant of the extended grid
        that differs from this one in exactly one axis (vector width, unroll, load hint, store
        hint, block size or grid shape, "fixed32" aside: CLIMB_GRIDS), then every one that trades two of vector width,
        unroll and block size against each other at the same bytes in flight per block
        (vec_bytes x unroll x block): 16 B x 2 <-> 8 B x 4, unroll 2 x 128 <-> 1 x 256. A
        trade's one-axis halves change the bytes in flight and can both be slower than
        either end, so a climb over one-axis moves alone stops short of it."""
        values = (VEC_BYTES, UNROLLS, hints.names("load"), hints.names("store"), BLOCKS,
                  CLIMB_GRIDS)  # fmt: skip
        out = [
            replace(self, **{name: value})
            for name, axis in zip(AXIS_NAMES, values, strict=True)
            for value in axis
            if value != getattr(self, name)
        ]
        sized = (("vec_bytes", VEC_BYTES), ("unroll", UNROLLS), ("block", BLOCKS))
        for i, (a, a_values) in enumerate(sized):
            for b, b_values in sized[i + 1 :]:
                here = getattr(self, a) * getattr(self, b)
                out += [
                    replace(self, **{a: x, b: y})
                    for x in a_values
                    for y in b_values
                    if x != getattr(self, a) and y != getattr(self, b) and x * y == here
                ]
        return out


# ---- grids ------------------------------------------------------------------------------------


def _check_dtypes(dtypes) -> tuple[str, ...]:
    if dtypes is None:
        return DTYPES
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    dtypes = tuple(dtypes)
    bad = [d for d in dtypes if d not in DTYPES]
    if bad:
        raise KernelError(f"unknown dtype(s) {bad}; use some of {list(DTYPES)}")
    return dtypes


# Compile-relevant part of the default grid, per dtype (see default_grid for the why).
_CORE = tuple(product((4, 8, 16), (1, 2, 4), ("default", "cs"), ("default", "cs")))
_DEFAULT_KEYS: tuple[tuple[int, int, str, str], ...] = (
    # the required core: 4/8/16 B x unroll 1/2/4 x loads default/cs x stores default/cs
    *_CORE,
    # L2 band: evict_last loads keep the re-read input resident, cs stores stream the output
    *[(16, u, "L2::evict_last", "cs") for u in (1, 2, 4, 8)],
    # DRAM roofline: more bytes in flight per thread (16 B x 8 = 128 B)
    *[(16, 8, ld, st) for ld, st in (("default", "default"), ("default", "cs"), ("cs", "cs"))],
    # upper L2 band: only a fraction of the input evict_last (the rest evict_first)
    *[(16, u, "L2::evict_last:0.75", "cs") for u in (1, 2, 4, 8)],
    *[(16, u, "L2::evict_last:0.5", "cs") for u in (2, 4, 8)],
)
_DEFAULT_BLOCKS = (128, 256, 512)
_DEFAULT_GRIDS = ("onepass", "stride1", "stride4")
_NARROW = 256, "onepass"  # the one launch shape of 4- and 8-byte vectors
# small sizes: the flat form (16-byte vectors, 1, 2 or 4 per thread, no loop), own compiles
_FLAT_KEYS: tuple[tuple[int, int, str, str], ...] = (
    *(
        (16, u, ld, st)
        for ld, st in (("default", "default"), ("default", "cs"), ("L2::evict_last", "cs"))
        for u in (1, 2, 4)
    ),
    # L2 band: eight non-coherent 16-byte loads per thread, a peak no neighbour leads to
    (16, 8, "nc", "cs"),
)


def default_grid(dtypes=None) -> list[Variant]:
    """The grid a normal run screens first (the search's seed): 100 compiles and 348 variants
    per dtype. The search then climbs from it over the extended grid's axes
    (sweeper.run.search), so this list is where the search starts, not its limit.

    * the core (36 compiles): vec 4/8/16 B x unroll 1/2/4 x loads default/cs x stores
      default/cs, the space the 4090 study swept. 4- and 8-byte vectors at one launch shape
      (256 threads, onepass); the climb reaches their other shapes: in a 4-dtype hot search on
      the H200 a 4- or 8-byte config came within 1.5% of the best at 343 of the 568 (dtype,
      size) points measured (at 50 of them at 256 threads onepass), a 16-byte one at 541;
    * L2 band (4): `L2::evict_last` loads + `.cs` stores, vec 16, unroll 1/2/4/8: keeps the
      input resident across repeated calls while the write-once output streams (the fix for the
      (32 MiB, L2] cliff that evict-first loads caused);
    * DRAM roofline (3): vec 16 x unroll 8 (128 B in flight per thread) with default, default/cs
      and cs/cs hints: a plain grid-stride vec4 Numba ReLU was 3-7% behind torch at DRAM sizes
      on the H200, and bytes in flight are the usual lever.
    * launch shapes of 16-byte vectors (free: no recompile): block 128/256/512 x grid onepass
      (torch's shape: one tile per block, many small blocks), stride1 (grid-stride over one
      wave of resident blocks: the shape of the L2 band on the H200, chosen at 43.1 and
      50.6 MiB for every dtype by the search, 1.42x and 1.49x torch in fp32, where a grid
      without it reached 1.28x and 1.27x) and stride4;
    * upper L2 band (7): `L2::evict_last:0.75` (unroll 1/2/4/8) and `:0.5` (2/4/8) loads with
      `.cs` stores: only that fraction of the input lines is kept evict_last, the rest is
      evict_first. On the H200 at 45-52.5 MiB a 0.75 fraction measured 1.25-1.40x torch where
      the full evict_last was 1.18-1.32x (docs/methodology.md);
    * small sizes (9 compiles, 27 variants): the flat form, 1, 2 or 4 16-byte vectors per
      thread and no loop, blocks 128/256/512, loads default / evict_last, stores default / cs.
      Below ~5 MiB (1-2 us calls) the tiled kernel's loop and leftover bookkeeping cost 3-5%
      against torch; a flat kernel measured 1.01-1.08x torch there (same probe). With one
      vector per thread, fp32 lost 2-4% to torch at 8.5-13 MiB, sizes just past a
      whole number of waves (8.25 MiB of fp32 fills the H200 once at one vector per thread);
      2 or 4 vectors per thread halve or quarter the grid, as torch's kernel does.
    * the L2 band's flat peak (1 key, 3 variants): 8 non-coherent (`ld.global.nc`) 16-byte
      loads per thread, streaming stores, no loop. On the H200 it is the fastest config of
      the whole extended grid at 43.1 and 50.6 MiB (fp32 and bf16;
      lab/h200/pruning-proof), 15-19% ahead of the same shape with any other load hint
      and, at bf16 50.6 MiB, 24% ahead of it with 4 loads per thread, so no climb from the
      rest of the seed reaches it. Seeded, the climb replayed on the exhaustive run's ratios
      finds the exhaustive best at all eight size-dtype pairs, where it fell 0.1-1.6% short
      at four (`python lab/tools/pruning_proof.py replay
      lab/h200/pruning-proof/exhaustive/cells.csv.xz`);
    * the same flat form with 32-bit index maths ("flat32", 10 compiles, 30 variants): torch's
      fp32 kernel is the 2-vector, 128-thread flat layout with `int` indices; in CUDA C that
      layout with 32-bit indices tied torch at 8.47, 10.59 and 13.23 MiB (1.000, 1.025,
      0.999x) where 64-bit indices lost 3-4%, the sizes where a policy without flat32 lost
      to torch (docs/methodology.md);
    * flat32 with the block size compiled in ("fixed32", 30 compiles, 30 variants: one
      compile per block size), as torch's vectorized elementwise kernel has it, with launch
      bounds: the slot offsets become constants. The baseline's closest config (the floor,
      sweeper.analyze.select) is a fixed32 config on the H200 for every dtype.
    """
    out = []
    for dtype in _check_dtypes(dtypes):
        for vec, u, ld, st in _DEFAULT_KEYS:
            shapes = product(_DEFAULT_BLOCKS, _DEFAULT_GRIDS) if vec == 16 else [_NARROW]
            out.extend(Variant(dtype, vec, u, ld, st, block, grid) for block, grid in shapes)
        for (vec, u, ld, st), block, grid in product(
            _FLAT_KEYS, _DEFAULT_BLOCKS, ("flat", "flat32", "fixed32")
        ):
            out.append(Variant(dtype, vec, u, ld, st, block, grid))
    return out


def extended_grid(dtypes=None) -> list[Variant]:
    """Every value of every axis: 480 + 480 + 480 + 1920 compiles (tiled, flat, flat32,
    fixed32: a compile per block size) and 9600 + 1920 + 1920 + 1920 variants per dtype."""
    axes = (VEC_BYTES, UNROLLS, hints.names("load"), hints.names("store"), BLOCKS, GRID_SHAPES)
    return [Variant(d, *combo) for d in _check_dtypes(dtypes) for combo in product(*axes)]


GRIDS = {"default": default_grid, "extended": extended_grid}


def get_grid(name: str, dtypes=None) -> list[Variant]:
    if name not in GRIDS:
        raise KernelError(f"unknown grid '{name}'; use one of {sorted(GRIDS)}")
    return GRIDS[name](dtypes)


def compile_keys(variants) -> list[CompileKey]:
    """The distinct compiles behind `variants`, in first-seen order."""
    return list(dict.fromkeys(v.compile_key for v in variants))


def sample(variants, k: int, seed: int = 0) -> list[Variant]:
    """A seeded sample (stable for a given grid and seed)."""
    variants = list(variants)
    return random.Random(seed).sample(variants, min(k, len(variants)))


# A run's trial log names each variant thousands of times (every resume and every read checks
# them): parsed once per id and kernel source, for as long as the process runs.
@functools.lru_cache(maxsize=1 << 16)
def _parsed(cls: type[Variant], text: str, fingerprint: str) -> Variant:
    return cls._parse(text)


@functools.lru_cache(maxsize=1 << 16)
def _current_id(cls: type[Variant], text: str, fingerprint: str) -> str | None:
    if not _ID_RE.match(text.strip()):
        return text
    try:
        return cls.parse(text).id
    except KernelError:
        return None
