"""Render a (merged) policy for production code: a CUDA header, a runtime JSON, or Python.

The CUDA header mirrors the Numba variants of sweeper_kernels exactly:

* the same index layout (kernels/source.py): `nvec = n / E` whole vectors; tiles of
  `U * blockDim` vectors, block b doing tiles b, b + gridDim, ...; in a tile thread t touches
  vectors t, t + blockDim, ... (coalesced); all U loads issued before any store; the partial
  last tile one vector per thread, started by the "rotated" blocks; the `n % E` tail
  elements one per thread by the same rotated threads;
* the same PTX: `ld.global{hint}{.v2|.v4}.u32` / `st.global{hint}...` main accesses and
  `.b8/.b16/.b32` element accesses, all as volatile asm, on `cvta.to.global` addresses;
* the same bit-level ReLU on 32-bit words (kernels/bitmath.py: SWAR for 16/8-bit lanes;
  NaN -> +0, -0 -> +0, denormals kept, no float instruction touches the data);
* the same launch shape (kernels/launch.py): `block` threads; "onepass" one block per tile
  (the tail elements counted as one more vector); "strideW" caps the grid at W waves of
  sm_count * (max_threads_per_sm / block) blocks (grid-stride); "flat" is the loop-free form
  (its own kernel, relu_flat_kernel): one slot per vector and per tail element, U slots per
  thread (t, t + blockDim, ... within the block's tile), ceil(slots / (U * block)) blocks.

Added for production (no Numba counterpart): if either pointer is not aligned to the vector
width, a scalar grid-stride kernel with the same cache operators runs instead.
"""

from __future__ import annotations

import hashlib
import re
from functools import cache
from importlib.resources import files
from string import Template

from sweeper_kernels import hints
from sweeper_kernels.hints import createpolicy

from sweeper.analyze.policy import describe_tolerance
from sweeper.dtypes import DTYPES
from sweeper.errors import SweeperError
from sweeper.ops import get_op
from sweeper.units import fmt_bytes

EXPORT_VEC_BYTES = (4, 8, 16)

CTYPE = {"fp32": "float", "fp16": "__half", "bf16": "__nv_bfloat16", "int8": "int8_t"}
DT_ENUM = {"fp32": "Dt::F32", "fp16": "Dt::F16", "bf16": "Dt::BF16", "int8": "Dt::I8"}
BITS = {"fp32": 32, "fp16": 16, "bf16": 16, "int8": 8}


def _ident(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", s)


def check_configs(doc: dict) -> None:
    for name, c in doc["configs"].items():
        if c["vec_bytes"] not in EXPORT_VEC_BYTES:
            raise SweeperError(
                f"config {name!r}: vec_bytes {c['vec_bytes']} cannot be exported "
                f"(the kernels use {EXPORT_VEC_BYTES})"
            )
        for kind in hints.KINDS:
            if c[f"{kind}_hint"] not in hints.names(kind):
                raise SweeperError(f"config {name!r}: unknown {kind} hint {c[f'{kind}_hint']!r}")


def _hint_struct(kind: str, hint: str) -> str:
    return f"{'Ld' if kind == 'load' else 'St'}_{_ident(hint)}"


def _waves(grid: str) -> int:
    """The header's WAVES: 0 = onepass, -1 = flat, -2 = flat32, -3 = fixed32, W = strideW."""
    loop_free = {"onepass": 0, "flat": -1, "flat32": -2, "fixed32": -3}
    if grid in loop_free:
        return loop_free[grid]
    return int(grid[len("stride") :])


def _num(x: float) -> str:
    """A double literal that round-trips exactly."""
    return repr(float(x))


# ---- CUDA ---------------------------------------------------------------------------------
# The fixed C++ is in templates/ (string.Template, `$name` placeholders): relu_policy.cuh is
# the whole header, launch_relu.cuh and c_api.cuh the public functions of one dtype. The
# functions here generate the per-policy pieces that fill the placeholders.


@cache
def template(name: str) -> Template:
    """templates/<name>, read once (every export reads its templates here)."""
    return Template((files("sweeper.export") / "templates" / name).read_text(encoding="utf-8"))


def _load_struct(h: str, q: str, policy: bool) -> str:
    """The load struct for hint h: `ld.global{q}`, with its L2 cache-policy operand (the
    `createpolicy` of its entry in kernels/hints.py) when `policy`."""
    if policy:
        pol = f'    uint64_t pol; asm volatile("{createpolicy(h, "%0")}" : "=l"(pol));\n'
        p1, p2, p4, pin = ", %2", ", %3", ", %5", ', "l"(pol)'
    else:
        pol, p1, p2, p4, pin = "", "", "", "", ""
    return (
        template("load_struct.cuh")
        .substitute(
            name=_hint_struct("load", h), hint=h, q=q, pol=pol, p1=p1, p2=p2, p4=p4, pin=pin
        )
        .rstrip("\n")
    )


def _hint_structs(doc: dict) -> str:
    loads = sorted({c["load_hint"] for c in doc["configs"].values()})
    stores = sorted({c["store_hint"] for c in doc["configs"].values()})
    out = ["// ---- cache operators: one struct per hint used by the policy ---------------------"]
    for h in loads:
        if hints.get("load", h).policy is not None:
            # sm_80+: the priority rides on a cache policy; older targets get a plain load.
            out.append("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800")
            out.append(_load_struct(h, "", False))
            out.append("#else")
            out.append(_load_struct(h, hints.get("load", h).qualifier, True))
            out.append("#endif")
        else:
            out.append(_load_struct(h, hints.get("load", h).qualifier, False))
    for h in stores:
        q = hints.get("store", h).qualifier
        out.append(
            template("store_struct.cuh")
            .substitute(name=_hint_struct("store", h), hint=h, q=q)
            .rstrip("\n")
        )
    return "\n".join(out) + "\n"


def _variant_aliases(doc: dict) -> str:
    """One `using V_<name> = Variant<...>` per config, with its fields as a comment."""
    out = []
    for name, c in doc["configs"].items():
        out.append(
            f"// {name}: vec_bytes={c['vec_bytes']} unroll={c['unroll']} load={c['load_hint']} "
            f"store={c['store_hint']} block={c['block']} grid={c['grid']}"
        )
        out.append(
            f"using V_{_ident(name)} = Variant<{c['vec_bytes']}, {c['unroll']}, "
            f"{_hint_struct('load', c['load_hint'])}, {_hint_struct('store', c['store_hint'])}, "
            f"{c['block']}, {_waves(c['grid'])}>;"
        )
    return "\n".join(out)


def _band_comment(b: dict, l2: int, runs: str) -> str:
    hi = "inf" if b["hi_rel"] is None else f"{b['hi_rel']:.6f}"
    text = (
        f"  // [{b['lo_rel']:.6f}, {hi}) x L2 = [{fmt_bytes(b['lo_bytes'])}, {fmt_bytes(b['hi_bytes'], none='inf')}) "
        f"on the source GPU: {b['config']}"
    )
    if b.get("first_measured") is not None:
        text += (
            f"; measured {fmt_bytes(b['first_measured'])}..{fmt_bytes(b['last_measured'])}, "
            f"worst {b['worst_frac_of_best']:.3f} of the fastest"
        )
    if b.get("bracket_below"):
        lo, hi_b = b["bracket_below"]
        text += f"\n  //   lower edge: between measured {lo} and {hi_b} bytes (run {runs})"
    return text


def _dispatchers(doc: dict) -> str:
    """dispatch_e{k}_{dt} and choice_e{k}_{dt}: the bands of each (entry, dtype)."""
    out = []
    for k, e in enumerate(doc["entries"]):
        src = e["source"]
        runs = ", ".join(src.get("run_ids", []))
        out.append(
            f"// entry {k}: {e['gpu']} {e.get('device_name', '')} (cc {e['cc'][0]}.{e['cc'][1]}, "
            f"L2 {e['l2_bytes']} bytes) from run(s) {runs}, plan {src.get('plan_hash', '')}, "
            f"mode {src.get('mode', '')}, tolerance {describe_tolerance(src)}, file {src.get('file')}"
        )
        for dt, d in e["dtypes"].items():
            out.append(
                f"inline cudaError_t dispatch_e{k}_{dt}(const void* in, void* out, size_t n, "
                "const DeviceInfo& d, cudaStream_t s) {"
            )
            out.append(f"  const double rel = ws_over_l2(n, {BITS[dt] // 8}, d.l2);")
            for b in d["bands"]:
                out.append(_band_comment(b, e["l2_bytes"], runs))
                call = f"V_{_ident(b['config'])}::launch<{DT_ENUM[dt]}>(in, out, n, d, s)"
                if b["hi_rel"] is None:
                    out.append(f"  return {call};")
                else:
                    out.append(f"  if (rel < {_num(b['hi_rel'])}) return {call};")
            out.append("}")
            out.append(
                f"inline const char* choice_e{k}_{dt}(size_t n, const DeviceInfo& d) {{\n"
                f"  const double rel = ws_over_l2(n, {BITS[dt] // 8}, d.l2);"
            )
            for b in d["bands"]:
                if b["hi_rel"] is None:
                    out.append(f'  return "{b["config"]}";')
                else:
                    out.append(f'  if (rel < {_num(b["hi_rel"])}) return "{b["config"]}";')
            out.append("}")
    return "\n".join(out)


def _entry_keys(doc: dict) -> str:
    """The rows of entry_keys(): (cc major, cc minor, L2 bytes, SM count or 0 where unknown,
    has a band set per Dt)."""
    rows = []
    for e in doc["entries"]:
        has = ", ".join("true" if dt in e["dtypes"] else "false" for dt in DTYPES)
        sms = e.get("sm_count") or 0
        rows.append(
            f"    {{{e['cc'][0]}, {e['cc'][1]}, {e['l2_bytes']}LL, {sms}, {{{has}}}}},"
            f"  // {e['gpu']}"
        )
    return "\n".join(rows)


def _entries_with(doc: dict, dt: str) -> list[int]:
    return [k for k, e in enumerate(doc["entries"]) if dt in e["dtypes"]]


def _launch_relu(doc: dict) -> str:
    """The public launch_relu overload and relu_choice_{dt} of every dtype."""
    parts = []
    for i, dt in enumerate(DTYPES):
        ks = _entries_with(doc, dt)
        g = doc.get("generic", {}).get(dt)
        parts.append(
            template("launch_relu.cuh").substitute(
                ctype=CTYPE[dt],
                dtype=dt,
                dt_index=str(i),
                dispatch_cases="\n".join(
                    f"    case {k}: return detail::dispatch_e{k}_{dt}(in, out, n, d, s);"
                    for k in ks
                ),
                choice_cases="\n".join(
                    f"    case {k}: return detail::choice_e{k}_{dt}(n, d);" for k in ks
                ),
                generic_launch=(
                    f"return detail::V_{_ident(g)}::launch<{DT_ENUM[dt]}>(in, out, n, d, s);"
                    "  // the generic config: no entry was measured on this device"
                    if g
                    else "return cudaErrorNotSupported;  // the policy has no bands for this dtype"
                ),
                generic_name=f'"{g}"' if g else '""',
            )
        )
    return "".join(parts).removesuffix("\n")


def _c_api() -> str:
    """The extern "C" launcher and choice function of every dtype."""
    parts = [template("c_api.cuh").substitute(ctype=CTYPE[dt], dtype=dt) for dt in DTYPES]
    return "".join(parts).removesuffix("\n")


def c_api_declaration(dtype: str) -> str:
    """The prototype of `dtype`'s extern "C" launcher (sweeper_launch_relu_<dtype>), taken
    from its definition in templates/c_api.cuh, for code that links against the header."""
    first = template("c_api.cuh").substitute(ctype=CTYPE[dtype], dtype=dtype).splitlines()[0]
    return first.removeprefix('extern "C" ').split(" {")[0] + ";"


def provenance(doc: dict) -> tuple[list[str], list[str]]:
    """Where a (merged) policy came from, as the exports state it: one line per entry (GPU,
    cc, L2 size, runs, plan hash) and one per band the GPUs disagree on."""
    entries = []
    for e in doc["entries"]:
        s = e["source"]
        entries.append(
            f"{e['gpu']}: cc {e['cc'][0]}.{e['cc'][1]}, L2 {e['l2_bytes']} bytes; "
            f"runs {', '.join(s.get('run_ids', []))}; plan {s.get('plan_hash', '')}"
        )
    disagreements = []
    for d in doc.get("disagreements", []):
        hi = "inf" if d["rel"][1] is None else f"{d['rel'][1]:.4f}"
        disagreements.append(
            f"GPUs disagree: {d['dtype']} [{d['rel'][0]:.4f}, {hi}) x L2: "
            f"{d['gpus'][0]} uses {d['configs'][0]}, {d['gpus'][1]} uses {d['configs'][1]}"
        )
    return entries, disagreements


def render_cuda(doc: dict) -> str:
    """The header text for a merged policy (see sweeper.analyze.policy.load_any)."""
    check_configs(doc)
    entries, disagreements = provenance(doc)
    code = {
        "hint_structs": _hint_structs(doc).removesuffix("\n"),
        "variant_aliases": _variant_aliases(doc),
        "dispatchers": _dispatchers(doc),
        "entry_keys": _entry_keys(doc),
        "entry_count": str(len(doc["entries"])),
        "launch_relu": _launch_relu(doc),
    }
    return template("relu_policy.cuh").substitute(
        fallback=" > ".join(doc["fallback"]),
        differs=get_op("relu").differs,
        provenance="\n".join(
            [*(f"//   {e}" for e in entries), *(f"// {d}" for d in disagreements)]
        ),
        policy_ns=policy_namespace(code),
        c_api=_c_api(),
        **code,
    )


def policy_namespace(code: dict) -> str:
    """The inline namespace of a header's host code: `policy_` and 12 hex digits of the
    sha256 of the code rendered from the policy, comments left out (they name the policy
    file as its path was spelled); the template's own text is the same in every header of
    one sweeper version."""
    text = "\0".join(f"{k}={re.sub(r'//.*$', '', code[k], flags=re.M)}" for k in sorted(code))
    return "policy_" + hashlib.sha256(text.encode()).hexdigest()[:12]
