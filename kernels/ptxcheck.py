"""Read a ReLU kernel's PTX back and check it is the code its config asks for. No numba here.

Checks (`check_ptx` returns a list of problems, empty when the PTX is right):
  * every global load/store carries the variant's cache operator (none for "default");
  * main accesses are `.u32` with the variant's vector width (`.v4` / `.v2` / scalar), tail
    accesses are one element (`.b8` / `.b16` / `.b32`), and nothing else touches global memory;
  * the main loop (the loop with the most main loads) has exactly `unroll` main loads and
    `unroll` main stores per iteration; the whole kernel has unroll + 1 of each (main loop plus
    the leftover-vector loop) and one tail element access when a vector holds > 1 element;
    the flat form has no loop around its main accesses: one main load and store for unroll 1,
    else unroll on the check-free path plus 1..unroll on the checked one (the compiler may
    merge the first slot's access of both), and 1..unroll tail element accesses;
  * an L2-policy load hint comes with one `createpolicy` per load, of its priorities and
    fraction (`L2::evict_last.L2::evict_first ... 0.75` for "L2::evict_last:0.75");
  * the flat form's first check (slot < nvec, the first `setp`) is 64-bit, and 32-bit for
    "flat32" and "fixed32", whose slot indices widen to byte offsets with `mul.wide.s32`
    (torch's `int` indexing);
  * "fixed32" carries its block size as launch bounds (`.maxntid B, 1, 1`), the others none;
  * the ReLU's form (CompileKey.relu_form): "max" is `max.f32 d, w, 0f00000000` on every word
    loaded (words per main access x main loads, plus one per tail element load), and no other
    float instruction; "bits" has no float instruction at all (integer maths on the words);
  * no local-memory traffic (`ld.local` / `st.local`: spills or a stack array).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sweeper_kernels import hints
from sweeper_kernels.bitmath import DTYPE_LANES
from sweeper_kernels.source import CompileKey
from sweeper_kernels.variants import Variant

_ACCESS_RE = re.compile(r"^\s*(?:@%p\d+\s+)?((?:ld|st)\.global[.\w:]*)\s")
_LABEL_RE = re.compile(r"^(\$L__\w+):")
_BRANCH_RE = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+);")
_LOCAL_RE = re.compile(r"\b(?:ld|st)\.local\b")
_SETP_RE = re.compile(r"^\s*setp\.\w+\.[su](32|64)\s")
_FLOAT_RE = re.compile(
    r"^\s*(?:@%p\d+\s+)?((?:max|min|setp\.\w+|selp|add|sub|mul|fma|cvt[.\w]*)\.(?:f32|f16|f16x2|bf16|bf16x2))\s+(.*)$"
)
_POLICY_RE = re.compile(r"^\s*createpolicy\.fractional\.(\S+?)\.b64\s+[^,]+,\s*([0-9.]+);")


@dataclass(frozen=True)
class Access:
    line: int
    op: str  # "ld" | "st"
    qualifiers: tuple[str, ...]  # e.g. ("cs",) or ("L2::evict_last",) or ()
    vec: int  # 1, 2, 4
    type: str  # "u32" (main) or "b8"/"b16"/"b32" (tail element)


def global_accesses(ptx: str) -> list[Access]:
    out = []
    for i, text in enumerate(ptx.splitlines()):
        m = _ACCESS_RE.match(text)
        if not m:
            continue
        parts = m.group(1).split(".")
        op, typ, mid = parts[0], parts[-1], parts[2:-1]
        vec = 1
        if mid and re.fullmatch(r"v\d", mid[-1]):
            vec = int(mid[-1][1:])
            mid = mid[:-1]
        out.append(Access(i, op, tuple(mid), vec, typ))
    return out


def loops(ptx: str) -> list[tuple[int, int]]:
    """(first line, last line) of every loop: a label and a later branch back to it."""
    labels: dict[str, int] = {}
    found = []
    for i, text in enumerate(ptx.splitlines()):
        m = _LABEL_RE.match(text)
        if m:
            labels[m.group(1)] = i
        b = _BRANCH_RE.search(text)
        if b and b.group(1) in labels:
            found.append((labels[b.group(1)], i))
    return found


def has_local_traffic(ptx: str) -> bool:
    return bool(_LOCAL_RE.search(ptx))


def _qual(hint: str, kind: str) -> tuple[str, ...]:
    q = hints.get(kind, hint).qualifier
    return tuple(q.lstrip(".").split(".")) if q else ()


def check_ptx(variant: Variant | CompileKey, ptx: str) -> list[str]:
    key = variant.compile_key if isinstance(variant, Variant) else variant
    bits = DTYPE_LANES[key.dtype][0]
    nwords = key.vec_bytes // 4
    elems = key.vec_bytes * 8 // bits
    u = key.unroll
    want = {
        "ld": _qual(key.load_hint, "load"),
        "st": _qual(key.store_hint, "store"),
    }
    problems: list[str] = []
    acc = global_accesses(ptx)
    if not acc:
        return ["no global loads or stores found"]
    for a in acc:
        if a.qualifiers != want[a.op]:
            problems.append(
                f"line {a.line}: {a.op} has cache operator {a.qualifiers or 'none'}, "
                f"want {want[a.op] or 'none'}"
            )
        if a.type == "u32":
            if a.vec != nwords:
                problems.append(f"line {a.line}: {a.op} is .v{a.vec}, want {nwords} word(s)")
        elif a.type != f"b{bits}" or a.vec != 1:
            problems.append(f"line {a.line}: unexpected {a.op} .v{a.vec}.{a.type}")
    for op in ("ld", "st"):
        main = [a for a in acc if a.op == op and a.type == "u32"]
        tail = [a for a in acc if a.op == op and a.type != "u32"]
        if key.flat and u > 1:
            # U on the check-free path + up to U on the checked one (the compiler may merge
            # the first slot's access of both paths)
            if not u + 1 <= len(main) <= 2 * u:
                problems.append(f"{len(main)} main {op}s in the kernel, want {u + 1}..{2 * u}")
            if not (1 <= len(tail) <= u if elems > 1 else not tail):
                problems.append(
                    f"{len(tail)} tail element {op}s, want {'1..' + str(u) if elems > 1 else 0}"
                )
        else:
            want_main = 1 if key.flat else u + 1
            what = "one vector per thread" if key.flat else f"unroll + 1 = {u + 1}"
            if len(main) != want_main:
                problems.append(f"{len(main)} main {op}s in the kernel, want {what}")
            if len(tail) != (1 if elems > 1 else 0):
                problems.append(f"{len(tail)} tail element {op}s, want {1 if elems > 1 else 0}")
        per_loop = [sum(1 for a in main if lo <= a.line <= hi) for lo, hi in loops(ptx)]
        if key.flat:
            if any(per_loop):
                problems.append(f"flat kernel has a loop around its main {op}")
        elif not per_loop or max(per_loop) != u:
            problems.append(
                f"main loop has {max(per_loop, default=0)} {op}s per iteration, want {u}"
            )
    if key.flat:
        width = first_check_bits(ptx)
        want_w = 32 if key.index32 else 64
        if width != want_w:
            problems.append(f"first bounds check is {width}-bit, want {want_w}-bit")
        if key.index32 and "mul.wide.s32" not in ptx:
            problems.append("32-bit slot indices but no mul.wide.s32 to widen them")
    bounds = re.findall(r"^\s*\.maxntid\s+(\d+),\s*1,\s*1\b", ptx, flags=re.M)
    if bounds != ([str(key.block)] if key.block else []):
        want = f".maxntid {key.block}, 1, 1" if key.block else "none"
        problems.append(f"launch bounds {bounds or 'none'}, want {want}")
    floats = [m.groups() for m in map(_FLOAT_RE.match, ptx.splitlines()) if m]
    if key.relu_form == "max":
        loads_words = sum(nwords if a.type == "u32" else 1 for a in acc if a.op == "ld")
        maxes = [f for f in floats if f[0] == "max.f32" and f[1].endswith(", 0f00000000;")]
        if len(maxes) != len(floats) or len(maxes) != loads_words:
            problems.append(
                f"{len(maxes)} max.f32 with 0 and {len(floats) - len(maxes)} other float "
                f"instructions, want one max.f32 per word loaded ({loads_words})"
            )
    elif floats:
        problems.append(
            f"float instructions in a bit-level ReLU ({sorted({f[0] for f in floats})})"
        )
    policies = [m.groups() for m in map(_POLICY_RE.match, ptx.splitlines()) if m]
    loads = [a for a in acc if a.op == "ld"]
    if hints.get("load", key.load_hint).policy is not None:
        want_p = hints.get("load", key.load_hint).policy
        if len(policies) != len(loads) or set(policies) != {want_p}:
            problems.append(
                f"{len(policies)} createpolicy {want_p} for {len(loads)} loads "
                f"(found {sorted(set(policies))})"
            )
    elif policies:
        problems.append(f"unexpected createpolicy ({sorted(set(policies))})")
    if has_local_traffic(ptx):
        problems.append("local memory traffic (ld.local/st.local)")
    return problems


def first_check_bits(ptx: str) -> int | None:
    """Operand width of the kernel's first `setp` (a flat kernel's slot < nvec check)."""
    for line in ptx.splitlines():
        m = _SETP_RE.match(line)
        if m:
            return int(m.group(1))
    return None


_VERSION_RE = re.compile(r"^\.version\s+(\d+)\.(\d+)", re.M)
_MAX_RE = re.compile(r"current version is '(\d+)\.(\d+)'")


def assemble(ptx: str, arch: str = "sm_90", ptxas: str | None = None) -> str | None:
    """Run ptxas on the PTX; None if it assembles, else ptxas's first error line.

    The text check above cannot tell a valid instruction from one ptxas rejects (an L2
    eviction qualifier on a 128-bit load is such a case). If this ptxas is older than the
    PTX ISA version NVVM wrote, the `.version` line is lowered to what ptxas supports and
    the assembly retried: the instructions we emit exist in both versions.
    """
    import subprocess
    import tempfile
    from pathlib import Path

    from sweeper_kernels.toolkit import find_tool, how_to_get

    ptxas = ptxas or find_tool("ptxas")
    if ptxas is None:
        raise FileNotFoundError(how_to_get("ptxas"))
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "k.ptx"
        for _ in range(2):
            src.write_text(ptx)
            r = subprocess.run(
                [ptxas, f"-arch={arch}", str(src), "-o", str(Path(d) / "k.cubin")],
                capture_output=True,
                text=True,
            )
            if r.returncode == 0:
                return None
            m = _MAX_RE.search(r.stderr)
            if not m or not _VERSION_RE.search(ptx):
                break
            ptx = _VERSION_RE.sub(f".version {m.group(1)}.{m.group(2)}", ptx, count=1)
        lines = [ln for ln in r.stderr.splitlines() if "error" in ln or "fatal" in ln]
        return (lines or r.stderr.splitlines() or ["ptxas failed"])[0]
