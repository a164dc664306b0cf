"""A user's CUDA C++ kernel as one more config: contract, checks, NVRTC compile, cache, launch.

The contract (docs/external-kernels.md). A source file FILE.cu holds, for every dtype a run
asks for, one kernel named NAME_<dtype>:

    extern "C" __global__ void NAME_fp32(const float* x, float* y, unsigned long long n);
    extern "C" __global__ void NAME_fp16(const __half* x, __half* y, unsigned long long n);
    extern "C" __global__ void NAME_bf16(const __nv_bfloat16* x, __nv_bfloat16* y,
                                         unsigned long long n);
    extern "C" __global__ void NAME_int8(const signed char* x, signed char* y,
                                         unsigned long long n);

(`__restrict__` and `const` on the parameters themselves are allowed: they are not part of the
function type.) It writes y[i] = x[i] > 0 ? x[i] : 0 for every i < n, bit-exactly as
sweeper_kernels.reference defines it, whatever the grid it is launched with.

One name per dtype, not a template, because an extern "C" name is the same in the source, the
PTX and the driver's symbol table: nothing to mangle, and the check below can name the exact
kernel that is missing or wrong.

Checks, all by compiling with NVRTC (no GPU needed): the file is compiled with a few lines
appended (`#line`-tagged as SHIM_FILE) that take `&NAME_<dtype>` and static_assert its type
against the contract's function-pointer type. A compiler error in the user's file is reported
as the compiler's first error with file and line; an error in the appended lines means the
kernel is missing (undefined identifier) or has another type (failed static_assert). Then the
PTX must have `.entry NAME_<dtype>`, which holds only for an extern "C" __global__ function.
Then the PTX is scanned (sweeper_kernels.scan) for what can make the kernel's work depend on
time or on earlier calls (clock and timer reads, stores and atomics to module-scope device
variables, writes to x, reads of y): such a kernel is refused, naming the source line, unless
it was loaded with `allow_stateful` (`--allow-stateful`).
Why not read the PTX parameters instead: `.u64` is what any three 64-bit parameters lower to
(a double, a long, two pointers in another order), so only the C++ type says the
signature matches.

NVRTC is called through cuda.bindings.nvrtc, the library cuda.core's Program wraps:
cuda.core's PTX compile asks the driver for its version first, which fails on a machine with
no NVIDIA driver, where the checks and the PTX tests must run too. It runs in a child process
(_in_child), so this process never loads libnvrtc.

Launch rules (`grid`), with block B threads:
  * onepass, onepassE, onepassKB: one tile per block, a tile being B threads x 1 element, x E
    elements, or x K bytes per thread: ceil(n / (B * per-thread elements)) blocks;
  * strideW: grid-stride over W waves, a wave being every SM full of resident blocks by thread
    count (as sweeper_kernels.launch): W * sm_count * (max_threads_per_sm // B) blocks, or
    ceil(n / B) if that is fewer;
  * fixedG: G blocks whatever n.
The config name is "ext-NAME-bB-GRID", e.g. ext-relu_v2-b256-stride1 (grid configs start with
"v", so the two never collide); a variant id is "<dtype>-<config>-<hash8>", the hash covering
the dtype, the config and the source file's sha256.

Compiled PTX and cubins are cached in <cache>/kernels/external/ (see build.cache_dir), keyed
on the source's sha256, NAME, dtype, compute capability, target, NVRTC options and the NVRTC
version. Headers the file includes are not part of the key: after editing one, edit the .cu
file too (or empty the cache folder).
"""

from __future__ import annotations

import base64
import ctypes
import functools
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from sweeper_kernels.dtypes import DTYPES, ITEMSIZE
from sweeper_kernels.errors import KernelError
from sweeper_kernels.launch import check_io, element_count, wave_blocks
from sweeper_kernels.variants import id_hash

# C++ element type of each dtype in the kernel's signature (int8 is `signed char`: NVRTC has
# no <cstdint> without extra headers, and int8_t is a typedef of it)
CTYPES: dict[str, str] = {
    "fp32": "float",
    "fp16": "__half",
    "bf16": "__nv_bfloat16",
    "int8": "signed char",
}
_HEADER = {"fp16": "cuda_fp16.h", "bf16": "cuda_bf16.h"}
SHIM_FILE = "sweeper-signature-check"
PREFIX = "ext-"
MAX_GRID_X = 2**31 - 1
MAX_BLOCK = 1024

_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_GRID_RE = re.compile(r"^(?:onepass(?P<per>\d+)?(?P<bytes>B)?|stride(?P<w>\d+)|fixed(?P<g>\d+))$")
_LOG_RE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.*)$")


def signature(name: str, dtype: str) -> str:
    t = CTYPES[dtype]
    return f'extern "C" __global__ void {name}_{dtype}(const {t}* x, {t}* y, unsigned long long n)'


# ---- launch rules (pure integer maths) -----------------------------------------------------


@dataclass(frozen=True)
class GridRule:
    kind: str  # onepass | stride | fixed
    value: int  # per-thread elements or bytes (onepass), W (stride), G (fixed)
    in_bytes: bool = False  # onepass: value counts bytes per thread, not elements

    def per_thread(self, itemsize: int) -> int:
        """Elements per thread of a onepass tile (at least 1)."""
        return max(1, self.value // itemsize) if self.in_bytes else self.value


def parse_grid(grid: str) -> GridRule:
    m = _GRID_RE.match(grid)
    if not m:
        raise KernelError(
            f"--kernel-grid {grid!r}: use onepass (1 element per thread), onepassE (E elements "
            "per thread), onepassKB (K bytes per thread), strideW (grid-stride over W waves) "
            "or fixedG (G blocks)"
        )
    if m["w"] is not None:
        rule = GridRule("stride", int(m["w"]))
    elif m["g"] is not None:
        rule = GridRule("fixed", int(m["g"]))
    else:
        if m["bytes"] and m["per"] is None:
            raise KernelError(f"--kernel-grid {grid!r}: onepassKB needs K, e.g. onepass16B")
        rule = GridRule("onepass", int(m["per"] or 1), bool(m["bytes"]))
    if rule.value < 1:
        what = {"stride": "W (waves)", "fixed": "G (blocks)", "onepass": "the per-thread count"}
        raise KernelError(f"--kernel-grid {grid!r}: {what[rule.kind]} must be at least 1")
    if rule.kind == "fixed" and rule.value > MAX_GRID_X:
        raise KernelError(f"--kernel-grid {grid!r}: at most {MAX_GRID_X} blocks")
    return rule


def canonical_grid(grid: str) -> str:
    rule = parse_grid(grid)
    if rule.kind == "onepass":
        if rule.in_bytes:
            return f"onepass{rule.value}B"
        return "onepass" if rule.value == 1 else f"onepass{rule.value}"
    return f"{rule.kind}{rule.value}"


def check_block(block: int) -> None:
    if isinstance(block, bool) or not isinstance(block, int) or not 32 <= block <= MAX_BLOCK:
        raise KernelError(f"--kernel-block {block}: a multiple of 32 from 32 to {MAX_BLOCK}")
    if block % 32:
        raise KernelError(f"--kernel-block {block}: a multiple of 32 (whole warps)")


def launch_blocks(
    grid: str, block: int, n: int, itemsize: int, sm_count: int, max_threads_per_sm: int
) -> int:
    """Blocks of the launch for `n` elements (n >= 1)."""
    rule = parse_grid(grid)
    if rule.kind == "fixed":
        return rule.value
    if rule.kind == "stride":
        return max(1, min(-(-n // block), wave_blocks(rule.value, block, sm_count,
                                                       max_threads_per_sm)))  # fmt: skip
    return max(1, -(-n // (block * rule.per_thread(itemsize))))


def launch_edges(
    grid: str, block: int, itemsize: int, sm_count: int, max_threads_per_sm: int, waves: int = 4
) -> list[tuple[int, str]]:
    """Working sets (bytes) where the launch rule changes character, with what happens there:
    a stride grid stops growing (each thread starts to loop), a fixed grid's threads start to
    loop, a onepass grid fills its first `waves` whole waves."""
    rule = parse_grid(grid)
    ws = 2 * itemsize
    if rule.kind == "stride":
        cap = wave_blocks(rule.value, block, sm_count, max_threads_per_sm)
        return [(ws * cap * block, f"the grid stops growing at {cap} blocks ({rule.value} waves)")]
    if rule.kind == "fixed":
        return [(ws * rule.value * block, f"{rule.value} blocks: threads start to loop")]
    one = wave_blocks(1, block, sm_count, max_threads_per_sm)
    per = rule.per_thread(itemsize)
    return [(ws * k * one * block * per, f"{k} whole wave(s), {k * one} blocks")
            for k in range(1, waves + 1)]  # fmt: skip


# ---- the kernel and its variants -------------------------------------------------------------


@dataclass(frozen=True)
class ExternalKernel:
    """FILE.cu:NAME with its launch shape. `source_sha256` is the file's content hash."""

    path: str
    name: str
    block: int = 256
    grid: str = "stride1"
    source_sha256: str = ""
    allow_stateful: bool = False  # time it even if the scan finds state (sweeper_kernels.scan)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise KernelError(
                f"kernel name {self.name!r}: a C identifier (letters, digits, '_'); the file "
                "defines NAME_fp32, NAME_fp16, ... for it"
            )
        check_block(self.block)
        object.__setattr__(self, "grid", canonical_grid(self.grid))

    @property
    def spec(self) -> str:
        return f"{self.path}:{self.name}"

    @property
    def config(self) -> str:
        return f"{PREFIX}{self.name}-b{self.block}-{self.grid}"

    def source(self) -> str:
        return read_source(self.path)[0]

    def variant(self, dtype: str) -> ExternalVariant:
        return ExternalVariant(self, dtype)

    def describe(self) -> dict:
        """What a manifest records of it."""
        return {
            "kernel": self.spec,
            "config": self.config,
            "block": self.block,
            "grid": self.grid,
            "source_sha256": self.source_sha256,
            "allow_stateful": self.allow_stateful,
            "scan": scan_record(self),
        }


def read_source(path: str) -> tuple[str, str]:
    """(text, sha256) of a kernel source file."""
    p = Path(path)
    if not p.is_file():
        raise KernelError(f"{path}: no such file (give the kernel as FILE.cu:NAME)")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise KernelError(f"{path}: cannot read it as text ({e})") from None
    return text, hashlib.sha256(text.encode()).hexdigest()


def is_kernel_spec(text: str) -> bool:
    """True for FILE.cu:NAME (a --baseline value naming a user's kernel, not a config)."""
    path, sep, name = text.rpartition(":")
    return bool(sep and path and name) and (
        path.endswith((".cu", ".cuh", ".cuda")) or Path(path).is_file()
    )


def load_kernel(
    spec: str, block: int = 256, grid: str = "stride1", allow_stateful: bool = False
) -> ExternalKernel:
    """FILE.cu:NAME -> ExternalKernel (file read and hashed; launch shape checked).
    `allow_stateful`: time it even where the scan finds state (see `check`)."""
    path, sep, name = spec.rpartition(":")
    if not sep or not path or not name:
        raise KernelError(f"{spec!r}: give the kernel as FILE.cu:NAME")
    check_block(block)
    grid = canonical_grid(grid)
    _, sha = read_source(path)
    return ExternalKernel(path, name, block, grid, sha, allow_stateful)


@dataclass(frozen=True)
class ExternalVariant:
    """One dtype of an external kernel: the fields the runner and executor read."""

    kernel: ExternalKernel
    dtype: str

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise KernelError(f"unknown dtype {self.dtype!r}; use one of {list(DTYPES)}")

    @property
    def config(self) -> str:
        return self.kernel.config

    @property
    def id(self) -> str:
        return f"{self.dtype}-{self.config}-{id_hash(self.dtype, self.config, self.kernel.source_sha256)}"

    @property
    def symbol(self) -> str:
        return f"{self.kernel.name}_{self.dtype}"

    # the runner records a candidate's fields; an external kernel has no vector or hint axes
    vec_bytes = None
    unroll = None
    load_hint = "external"
    store_hint = "external"
    block = property(lambda self: self.kernel.block)
    grid = property(lambda self: self.kernel.grid)

    def neighbours(self) -> list:
        """The search does not climb from a user's kernel: it has no axes."""
        return []


# ---- NVRTC ---------------------------------------------------------------------------------


def include_dirs() -> list[str]:
    """Where cuda_fp16.h / cuda_bf16.h are: the CUDA runtime headers (NVIDIA's wheel or a
    toolkit, found by cuda.pathfinder), else the copies numba-cuda ships for its own NVRTC
    compiles."""
    out = []
    try:
        from cuda.pathfinder import find_nvidia_header_directory

        d = find_nvidia_header_directory("cudart")
        if d:
            out.append(str(d))
    except Exception:  # noqa: BLE001 (any failure to locate: fall back below)
        pass
    if not out:
        try:
            import numba_cuda  # type: ignore[import-not-found]

            base = Path(numba_cuda.__file__).parent / "numba" / "cuda" / "include"
            found = sorted(base.glob("*/cuda_fp16.h"), key=lambda p: int(p.parent.name))
            out.extend(str(p.parent) for p in found[-1:])
        except (ImportError, ValueError):
            pass
    return out


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:
        raise KernelError(
            f"NVRTC is not available ({e}): pip install cuda-bindings nvidia-cuda-nvrtc"
        ) from None
    return nvrtc


def _nvrtc_version_here() -> tuple[int, int]:
    nvrtc = _nvrtc()
    try:
        err, major, minor = nvrtc.nvrtcVersion()
    except Exception as e:  # noqa: BLE001 (the library itself failed to load)
        raise KernelError(
            f"NVRTC could not be loaded ({e}): pip install nvidia-cuda-nvrtc"
        ) from None
    return int(major), int(minor)


@functools.cache
def nvrtc_version() -> tuple[int, int]:
    """NVRTC's version, asked in a child process (see _in_child)."""
    major, minor = _in_child({"op": "version"})["version"]
    return int(major), int(minor)


def options(kernel: ExternalKernel, cc: tuple[int, int], target: str) -> list[str]:
    arch = f"{'compute' if target == 'ptx' else 'sm'}_{cc[0]}{cc[1]}"
    opts = [f"--gpu-architecture={arch}", "-std=c++17"]
    if target == "ptx":  # .loc lines: the scan names the source line of what it finds
        opts.append("--generate-line-info")
    opts += [f"--include-path={d}" for d in include_dirs()]
    opts.append(f"--include-path={Path(kernel.path).resolve().parent}")
    return opts


def shim(name: str, dtype: str) -> str:
    """Lines appended to the source: the kernel's type must be the contract's."""
    t = CTYPES[dtype]
    sym = f"{name}_{dtype}"
    include = f"#include <{_HEADER[dtype]}>\n" if dtype in _HEADER else ""
    return (
        f'\n#line 1 "{SHIM_FILE}"\n{include}'
        "namespace sweeper_signature {\n"
        "template <class A, class B> struct same { static const bool value = false; };\n"
        "template <class A> struct same<A, A> { static const bool value = true; };\n"
        "}\n"
        f"static_assert(sweeper_signature::same<decltype(&{sym}), "
        f'void (*)(const {t}*, {t}*, unsigned long long)>::value, "signature of {sym}");\n'
    )


def _compile_here(
    source: str, filename: str, opts: list[str], target: str
) -> tuple[bytes | None, str]:
    """(PTX or cubin bytes, log); None where NVRTC reports a compile error. In the child."""
    nvrtc = _nvrtc()
    _nvrtc_version_here()
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise KernelError(f"NVRTC could not create a program: {err.name}")
    try:
        raw = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(raw), raw)
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\x00").decode(errors="replace")
        if err == nvrtc.nvrtcResult.NVRTC_ERROR_COMPILATION:
            return None, log
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            first = log.strip().splitlines()[:1]
            raise KernelError(f"NVRTC failed on {filename}: {err.name} {' '.join(first)}".strip())
        if target == "ptx":
            _, size = nvrtc.nvrtcGetPTXSize(prog)
            out = b" " * size
            nvrtc.nvrtcGetPTX(prog, out)
        else:
            _, size = nvrtc.nvrtcGetCUBINSize(prog)
            out = b" " * size
            nvrtc.nvrtcGetCUBIN(prog, out)
        return out.rstrip(b"\x00") if target == "ptx" else out, log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile(source: str, filename: str, opts: list[str], target: str) -> tuple[bytes | None, str]:
    """(PTX or cubin bytes, log); None where NVRTC reports a compile error. NVRTC runs in a
    child process, like nvcc: a process that loaded libnvrtc could no longer import torch on
    the H200 machine (torch's schema parser failed on its own ops), and sweeper's baseline is
    torch."""
    out = _in_child(
        {"op": "compile", "source": source, "filename": filename, "opts": opts, "target": target}
    )
    code = out["code"]
    return (None if code is None else base64.b64decode(code)), out["log"]


def _in_child(request: dict) -> dict:
    """Run one NVRTC request in a child Python (this interpreter, this import path): the
    request as JSON on stdin, the answer as JSON on stdout; a KernelError there is raised
    here with its one line."""
    import os
    import subprocess
    import sys

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    proc = subprocess.run(
        [sys.executable, "-c", "from sweeper_kernels.external import _child; _child()"],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=env,
    )
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise KernelError(
            f"the NVRTC child process failed (exit {proc.returncode}): {last}"
        ) from None
    if "error" in answer:
        raise KernelError(answer["error"])
    return answer


def _child() -> None:
    """The child's side of _in_child."""
    import sys

    request = json.loads(sys.stdin.read())
    try:
        if request["op"] == "version":
            answer: dict = {"version": list(_nvrtc_version_here())}
        else:
            code, log = _compile_here(
                request["source"], request["filename"], request["opts"], request["target"]
            )
            answer = {
                "code": None if code is None else base64.b64encode(code).decode(),
                "log": log,
            }
    except KernelError as e:
        answer = {"error": str(e)}
    sys.stdout.write(json.dumps(answer))


def _diagnose(kernel: ExternalKernel, dtype: str, cc: tuple[int, int], log: str) -> KernelError:
    """The one-line error for a failed compile (see the module docstring)."""
    errors = [m for m in (_LOG_RE.match(line.strip()) for line in log.splitlines()) if m]
    sym = f"{kernel.name}_{dtype}"
    arch = f"sm_{cc[0]}{cc[1]}"
    own = [m for m in errors if m["file"] != SHIM_FILE]
    if own:
        m = own[0]
        return KernelError(f"{m['file']}:{m['line']}: error: {m['msg']} (NVRTC, {arch})")
    if any("is undefined" in m["msg"] for m in errors):
        return KernelError(
            f"{kernel.path} defines no kernel {sym} (the {dtype} kernel of {kernel.name}; "
            f"expected {signature(kernel.name, dtype)})"
        )
    if errors:
        return KernelError(
            f"{sym} in {kernel.path} does not have the signature sweeper launches: "
            f"{signature(kernel.name, dtype)}"
        )
    first = next((line for line in log.splitlines() if line.strip()), "no log")
    return KernelError(f"{kernel.path}: NVRTC failed for {arch}: {first}")


def cache_key(kernel: ExternalKernel, dtype: str, cc: tuple[int, int], target: str) -> str:
    """sha256 of everything that changes the compiled code."""
    doc = {
        "source_sha256": kernel.source_sha256 or read_source(kernel.path)[1],
        "name": kernel.name,
        "dtype": dtype,
        "cc": list(cc),
        "target": target,
        "options": [o for o in options(kernel, cc, target) if not o.startswith("--include-path")],
        "nvrtc": list(nvrtc_version()),
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def cache_path(kernel: ExternalKernel, dtype: str, cc: tuple[int, int], target: str) -> Path:
    from sweeper_kernels.build import cache_dir

    key = cache_key(kernel, dtype, cc, target)[:16]
    ext = "ptx" if target == "ptx" else "cubin"
    return cache_dir() / "external" / f"{kernel.name}_{dtype}_cc{cc[0]}{cc[1]}_{key}.{ext}"


def compile_kernel(
    kernel: ExternalKernel, dtype: str, cc: tuple[int, int] = (9, 0), target: str = "ptx"
) -> bytes:
    """PTX (text as bytes) or cubin of NAME_<dtype> for compute capability `cc`, checked
    against the contract; cached on disk. Needs no GPU. KernelError with one line otherwise."""
    if target not in ("ptx", "cubin"):
        raise KernelError(f"target {target!r}: ptx or cubin")
    if dtype not in CTYPES:
        raise KernelError(f"unknown dtype {dtype!r}; use one of {list(DTYPES)}")
    text, sha = read_source(kernel.path)
    if kernel.source_sha256 and sha != kernel.source_sha256:
        raise KernelError(
            f"{kernel.path} changed since this run read it (sha256 {sha[:12]}, was "
            f"{kernel.source_sha256[:12]}): its results would mix two kernels"
        )
    path = cache_path(kernel, dtype, cc, target)
    if path.exists():
        return path.read_bytes()
    src = text if text.endswith("\n") else text + "\n"
    code, log = _compile(
        src + shim(kernel.name, dtype), kernel.path, options(kernel, cc, target), target
    )
    if code is None:
        raise _diagnose(kernel, dtype, cc, log)
    if target == "ptx":
        sym = f"{kernel.name}_{dtype}"
        if not re.search(rf"\.entry\s+{re.escape(sym)}\s*\(", code.decode()):
            raise KernelError(
                f'{sym} in {kernel.path} is not an extern "C" __global__ kernel (its PTX has '
                f"no .entry {sym}); declare it as {signature(kernel.name, dtype)}"
            )
        _scan(kernel, dtype, code.decode())  # a refused kernel leaves no cache entry
    from sweeper_kernels.build import _atomic_write_bytes

    _atomic_write_bytes(path, code)
    return code


def ptx(kernel: ExternalKernel, dtype: str, cc: tuple[int, int] = (9, 0)) -> str:
    """The checked PTX of NAME_<dtype> for `cc` (no GPU needed)."""
    return compile_kernel(kernel, dtype, cc, "ptx").decode()


def entry_ptx(ptx_text: str, symbol: str) -> str:
    """The PTX of one `.entry` (its header to the next .entry or the end), for checks."""
    m = re.search(rf"\.entry\s+{re.escape(symbol)}\s*\(", ptx_text)
    if not m:
        raise KernelError(f"no .entry {symbol} in the PTX")
    nxt = ptx_text.find(".entry", m.end())
    return ptx_text[m.start() : nxt if nxt >= 0 else len(ptx_text)]


STATEFUL_HINT = (
    "a kernel whose work can depend on time or on earlier calls is not timed "
    "(--allow-stateful times it anyway; docs/external-kernels.md)"
)

# kernel -> {"dtypes": set, "findings": list of lines}: what `check` scanned in this process
_SCANNED: dict[ExternalKernel, dict] = {}


def check(kernel: ExternalKernel, dtypes, cc: tuple[int, int] = (9, 0)) -> None:
    """Compile and check every dtype's kernel for `cc`, and scan its PTX for what can make its
    work depend on time or on earlier calls (sweeper_kernels.scan): KernelError with one line
    on the first problem, a finding included unless the kernel has `allow_stateful`. Needs no
    GPU."""
    for d in dtypes:
        _scan(kernel, d, ptx(kernel, d, cc))  # PTX read back from the cache is scanned again


def _scan(kernel: ExternalKernel, dtype: str, ptx_text: str) -> None:
    """Scan NAME_<dtype>'s PTX, record what it found, and refuse the kernel in one line if it
    found anything and the kernel does not have `allow_stateful`."""
    from sweeper_kernels.scan import scan

    found = scan(ptx_text, f"{kernel.name}_{dtype}", kernel.path)
    record = _SCANNED.setdefault(kernel, {"dtypes": set(), "findings": []})
    record["dtypes"].add(dtype)
    record["findings"] += [f.line() for f in found if f.line() not in record["findings"]]
    if found and not kernel.allow_stateful:
        more = f" and {len(found) - 1} more" if len(found) > 1 else ""
        raise KernelError(f"{found[0].line()}{more}: {STATEFUL_HINT}")


def scan_record(kernel: ExternalKernel) -> dict:
    """What a manifest records of the scan: the dtypes whose PTX was scanned and what it found
    (empty for a kernel timed without `allow_stateful`: one with findings is refused)."""
    record = _SCANNED.get(kernel, {"dtypes": set(), "findings": []})
    return {
        "scanned": [d for d in DTYPES if d in record["dtypes"]],
        "findings": list(record["findings"]),
    }


# ---- the launcher (GPU) ----------------------------------------------------------------------


def _drv(result, what: str):
    from cuda.bindings import driver as cu

    err = result[0]
    if err != cu.CUresult.CUDA_SUCCESS:
        raise KernelError(f"{what} failed: {getattr(err, 'name', err)}")
    return result[1] if len(result) == 2 else None


@functools.cache
def _function(kernel: ExternalKernel, dtype: str, cc: tuple[int, int], ctx: int):
    """(module, function) of NAME_<dtype>, loaded once per context (modules stay loaded)."""
    from cuda.bindings import driver as cu

    # ptx first: it runs the checks that name the problem and the scan (the cubin compile does
    # not repeat them)
    check(kernel, [dtype], cc)
    cubin = compile_kernel(kernel, dtype, cc, "cubin")
    module = _drv(cu.cuModuleLoadData(cubin), f"loading {kernel.name}_{dtype} (cuModuleLoadData)")
    func = _drv(
        cu.cuModuleGetFunction(module, f"{kernel.name}_{dtype}".encode()),
        f"finding {kernel.name}_{dtype} (cuModuleGetFunction)",
    )
    return module, func


class ExternalLauncher:
    """`launcher(x, y, n, stream)` for an ExternalVariant: the same interface as the Numba
    variants' Launcher. After the first call a launch does host-side integer maths and one
    cuLaunchKernel: no allocation, no synchronisation, so it can be captured in a CUDA graph
    (the parameter values are copied at launch and at capture). `sm_count` /
    `max_threads_per_sm` override the device's (tests)."""

    def __init__(
        self,
        variant: ExternalVariant,
        sm_count: int | None = None,
        max_threads_per_sm: int | None = None,
    ):
        self.variant = variant
        self._sm_count = sm_count
        self._max_threads = max_threads_per_sm
        self._func = None
        self._itemsize = ITEMSIZE[variant.dtype]
        self._args = (ctypes.c_uint64 * 3)()
        base = ctypes.addressof(self._args)
        self._argv = (ctypes.c_void_p * 3)(base, base + 8, base + 16)
        self._argv_ptr = ctypes.addressof(self._argv)

    def _first_call(self) -> None:
        from cuda.bindings import driver as cu
        from numba import cuda

        cuda.current_context()  # Numba's primary context: current from here on
        dev = cuda.get_current_device()
        cc = tuple(dev.compute_capability)
        k = self.variant.kernel
        if k.block > dev.MAX_THREADS_PER_BLOCK:
            raise KernelError(
                f"{k.config}: block {k.block} is more than this device's "
                f"{dev.MAX_THREADS_PER_BLOCK} threads per block"
            )
        current = _drv(cu.cuCtxGetCurrent(), "cuCtxGetCurrent")
        _, func = _function(k, self.variant.dtype, cc, int(current))
        limit = _drv(
            cu.cuFuncGetAttribute(
                cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, func
            ),
            "cuFuncGetAttribute(MAX_THREADS_PER_BLOCK)",
        )
        if k.block > int(limit):
            raise KernelError(
                f"{k.config}: {self.variant.symbol} can be launched with at most {limit} threads "
                f"per block on this device (its registers or __launch_bounds__), not {k.block}"
            )
        if self._sm_count is None:
            self._sm_count = dev.MULTIPROCESSOR_COUNT
        if self._max_threads is None:
            self._max_threads = dev.MAX_THREADS_PER_MULTIPROCESSOR
        self._func = func

    def prepare(self) -> None:
        """Compile (or load from the cache) and load the kernel now, checking the launch shape
        against the device."""
        if self._func is None:
            self._first_call()

    def blocks(self, n: int) -> int:
        self.prepare()
        k = self.variant.kernel
        return launch_blocks(k.grid, k.block, n, self._itemsize, self._sm_count, self._max_threads)

    def __call__(self, x, y, n: int, stream=0) -> None:
        from cuda.bindings import driver as cu

        n = element_count(n)
        if n == 0:
            return
        if self._func is None:
            self._first_call()
        check_io(x, y, self.variant.dtype, n)
        k = self.variant.kernel
        blocks = launch_blocks(
            k.grid, k.block, n, self._itemsize, self._sm_count, self._max_threads
        )
        if blocks > MAX_GRID_X:
            raise KernelError(
                f"{k.config}: n={n} needs {blocks} blocks, more than a grid holds ({MAX_GRID_X})"
            )
        self._args[0] = x.__cuda_array_interface__["data"][0]
        self._args[1] = y.__cuda_array_interface__["data"][0]
        self._args[2] = n
        handle = int(stream.handle) if hasattr(stream, "handle") else int(stream or 0)
        _drv(
            cu.cuLaunchKernel(
                self._func, blocks, 1, 1, k.block, 1, 1, 0, cu.CUstream(handle), self._argv_ptr, 0
            ),
            f"launching {self.variant.symbol}",
        )
