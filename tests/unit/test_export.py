"""Export: header contents, nvcc compiles it for sm_89 and sm_90 (all launchers, every cache
hint), the header's ReLU word function is bit-exact on the host, and the Python/JSON forms
select what the policy says."""

from __future__ import annotations

import copy
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweeper_kernels.toolkit import find_tool

from sweeper.analyze.columns import COLUMNS
from sweeper.analyze.policy import build_policy, config_at, merge_docs, write_policy
from sweeper.errors import SweeperError
from sweeper.export import export, render

MiB = 1 << 20
NVCC = find_tool("nvcc")
needs_nvcc = pytest.mark.needs_tool("nvcc")
ITEM = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}

# Every vector width, unroll, grid shape and cache operator the exporter knows, one config each.
CONFIGS = {
    "v16-u1-ld.default-st.default-b256-onepass": (16, 1, "default", "default", 256, "onepass"),
    "v16-u2-ld.cs-st.cs-b256-onepass": (16, 2, "cs", "cs", 256, "onepass"),
    "v8-u4-ld.cg-st.cg-b128-stride4": (8, 4, "cg", "cg", 128, "stride4"),
    "v4-u1-ld.lu-st.wt-b512-stride2": (4, 1, "lu", "wt", 512, "stride2"),
    "v16-u1-ld.nc-st.default-b1024-onepass": (16, 1, "nc", "default", 1024, "onepass"),
    "v8-u2-ld.L1::no_allocate-st.cs-b256-stride8": (8, 2, "L1::no_allocate", "cs", 256, "stride8"),
    "v4-u2-ld.cs-st.cs-b64-stride1": (4, 2, "cs", "cs", 64, "stride1"),
    "v8-u1-ld.default-st.cs-b128-onepass": (8, 1, "default", "cs", 128, "onepass"),
    "v16-u4-ld.L2::evict_last-st.cs-b256-stride4": (16, 4, "L2::evict_last", "cs", 256, "stride4"),
    "v4-u1-ld.L2::evict_first-st.default-b128-onepass": (4, 1, "L2::evict_first", "default", 128, "onepass"),
    "v16-u8-ld.L2::evict_last:0.75-st.cs-b512-stride4": (16, 8, "L2::evict_last:0.75", "cs", 512, "stride4"),
    "v16-u1-ld.L2::evict_last-st.cs-b128-flat": (16, 1, "L2::evict_last", "cs", 128, "flat"),
    "v8-u1-ld.default-st.default-b256-flat": (8, 1, "default", "default", 256, "flat"),
    "v16-u2-ld.default-st.cs-b128-flat": (16, 2, "default", "cs", 128, "flat"),
    "v4-u4-ld.L2::evict_last-st.cs-b256-flat": (4, 4, "L2::evict_last", "cs", 256, "flat"),
    "v16-u2-ld.default-st.cs-b128-flat32": (16, 2, "default", "cs", 128, "flat32"),
    "v8-u1-ld.default-st.default-b256-flat32": (8, 1, "default", "default", 256, "flat32"),
    "v16-u2-ld.default-st.default-b128-fixed32": (16, 2, "default", "default", 128, "fixed32"),
    "v8-u1-ld.default-st.cs-b256-fixed32": (8, 1, "default", "cs", 256, "fixed32"),
}  # fmt: skip
NAMES = list(CONFIGS)


def _rows(l2, gpu, winner_at):
    """Synthetic run: sizes k * l2/64 up to 5 x L2; at each size the config winner_at(ws) is 20% faster."""
    rows = []
    for dt in ITEM:
        for k in range(1, 320, 3):
            ws = k * (l2 // 64)
            for name, (vec, u, ld, st, block, grid) in CONFIGS.items():
                gbps = 1200.0 if name == winner_at(ws) else 1000.0
                t = ws / gbps / 1e3
                r = {c: None for c in COLUMNS}
                r.update(
                    run_id=f"run-{gpu}", gpu=gpu, mode="hot", pattern="preallocated", dtype=dt,
                    n=ws // (2 * ITEM[dt]), ws_bytes=ws, role="candidate", config=name,
                    status="ok", time_us=t, time_lo_us=t * 0.999, time_hi_us=t * 1.001,
                    gbps=gbps, ratio=1.0, ratio_lo=1.0, ratio_hi=1.0, vec_bytes=vec, unroll=u,
                    load_hint=ld, store_hint=st, block=block, grid=grid,
                )  # fmt: skip
                rows.append(r)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _manifest(l2, cc, gpu, sms=132):
    return {
        "run_id": f"run-{gpu}", "gpu": gpu, "modes": ["hot"], "baseline": "torch",
        "device": {"name": gpu, "cc": list(cc), "sm_count": sms, "l2_bytes": l2},
        "plan": {"plan_hash": "p-" + gpu, "resolution": 16, "l2_bytes": l2},
    }  # fmt: skip


def all_hints_policy(l2=50 * MiB, cc=(9, 0), gpu="h100-sxm", sms=132):
    """Bands at L2/4 steps, each a different config: every config ends up in the policy."""

    def winner(ws):
        return NAMES[min(int(ws / (l2 / 4)), len(NAMES) - 1)]

    return build_policy(_rows(l2, gpu, winner), _manifest(l2, cc, gpu, sms))


@pytest.fixture(scope="module")
def merged():
    a = all_hints_policy()
    b = all_hints_policy(72 * MiB, (8, 9), "4090", sms=128)
    return merge_docs([a, b], ["h200/policy.json", "4090/policy.json"])


def test_policy_uses_every_config(merged):
    used = {
        b["config"] for e in merged["entries"] for d in e["dtypes"].values() for b in d["bands"]
    }
    assert used == set(NAMES)


def test_export_does_not_import_numba():
    import subprocess
    import sys

    code = "import sys, sweeper.export; print(any(m.startswith('numba') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_header_contents(merged):
    h = render(merged, "cuda")
    for dt, ct in (
        ("fp32", "float"),
        ("fp16", "__half"),
        ("bf16", "__nv_bfloat16"),
        ("int8", "int8_t"),
    ):
        assert f"cudaError_t launch_relu(const {ct}* in, {ct}* out, size_t n, cudaStream_t s" in h
        assert f'extern "C" cudaError_t sweeper_launch_relu_{dt}(const void* in, void* out' in h
    assert "ld.global.cs.v4.u32" in h and "st.global.cs.v4.u32" in h
    assert "cudaDevAttrL2CacheSize" in h and "std::call_once" in h
    assert "#ifndef __CUDACC_RTC__" in h
    # each band says where it came from
    assert "lower edge: between measured" in h and "(run run-h100-sxm)" in h
    assert "entry 0: 4090" in h and "entry 1: h100-sxm" in h
    # no floating-point instruction on the data: the ReLU is integer math on words
    assert "0x7F800000u" in h and "fmaxf" not in h


def test_export_refuses_what_the_kernels_cannot_do(merged):
    bad = json.loads(json.dumps(merged))
    bad["configs"][NAMES[0]]["vec_bytes"] = 2
    with pytest.raises(SweeperError, match="vec_bytes"):
        render(bad, "cuda")
    bad = json.loads(json.dumps(merged))
    bad["configs"][NAMES[0]]["load_hint"] = "bogus"
    with pytest.raises(SweeperError, match="load hint"):
        render(bad, "python")
    with pytest.raises(SweeperError, match="format"):
        render(merged, "rust")


def _load_module(path: Path):
    spec = importlib.util.spec_from_file_location("relu_policy_export", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_python_and_json_export(tmp_path, merged):
    pol = all_hints_policy()
    ppath = write_policy(tmp_path / "policy.json", pol)
    py = export(ppath, "python")
    assert py.name == "relu_policy.py"
    mod = _load_module(py)
    bands = pol["dtypes"]["fp16"]["bands"]
    l2 = pol["l2_bytes"]
    for n in [1, 1000, l2 // 8, l2 // 4 - 1, l2 // 4, l2 // 4 + 1, l2, 10 * l2]:
        name, fields = mod.select_config("fp16", n, (9, 0), l2, 132)
        assert name == config_at(bands, 2 * n * 2 / l2)
        assert fields == pol["configs"][name]
    rt = json.loads(export(ppath, "json", tmp_path / "rt.json").read_text())
    assert rt["entries"][0]["dtypes"]["fp32"][-1]["below"] is None

    # tuned bands only where cc, L2 and SM count all match; anywhere else the generic config
    mpath = tmp_path / "m.py"
    mpath.write_text(render(merged, "python"))
    mm = _load_module(mpath)
    assert mm.pick_entry("fp32", (8, 9), 72 * MiB, 128) == 0  # the 4090 entry
    assert mm.pick_entry("fp32", (9, 0), 50 * MiB, 132) == 1  # the H100-SXM entry
    for cc, l2, sms in (((9, 7), 72 * MiB, 132), ((9, 0), 50 * MiB, 66), ((9, 0), 60 * MiB, 132),
                        ((8, 9), 72 * MiB, 76), ((10, 0), 50 * MiB, 132)):  # fmt: skip
        assert mm.pick_entry("fp32", cc, l2, sms) is None
        name, _ = mm.select_config("fp32", 1 << 20, cc, l2, sms)
        assert name == merged["generic"]["fp32"]


def test_the_generic_config_has_the_highest_worst_case_ratio():
    import pandas as pd

    from sweeper.analyze.policy import generic_config

    def r(config, ws, ratio, status="ok"):
        return {"role": "candidate", "status": status, "dtype": "fp32", "config": config,
                "ws_bytes": ws, "ratio": ratio}  # fmt: skip

    rows = [r("fast-but-cliff", 1, 1.5), r("fast-but-cliff", 2, 0.8),
            r("steady", 1, 1.1), r("steady", 2, 1.05),
            r("one-size-only", 1, 1.9),  # not measured everywhere: never generic
            r("failed-once", 1, 1.3), r("failed-once", 2, 1.2, "mismatch")]  # fmt: skip
    g = generic_config(pd.DataFrame(rows), "fp32", simpler=lambda c: (c,))
    assert g == {"config": "steady", "worst_ratio": 1.05}
    tie = pd.DataFrame([r("b", 1, 1.0), r("b", 2, 1.1), r("a", 1, 1.0), r("a", 2, 1.2)])
    assert generic_config(tie, "fp32", simpler=lambda c: (c,))["config"] == "a"  # simpler


def _nvcc(*args, cwd):
    r = subprocess.run([NVCC, *args], cwd=cwd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-4000:]
    return r


@needs_nvcc
def test_header_compiles_for_sm89_and_sm90(tmp_path, merged):
    (tmp_path / "relu_policy.cuh").write_text(render(merged, "cuda"))
    (tmp_path / "use.cu").write_text(
        '#define SWEEPER_RELU_DEFINE_C_API\n#include "relu_policy.cuh"\n'
        "// every public launcher, instantiated\n"
        "cudaError_t all(void* p, void* q, size_t n, cudaStream_t s) {\n"
        "  cudaError_t e = sweeper_relu::launch_relu((const float*)p, (float*)q, n, s);\n"
        "  e = sweeper_relu::launch_relu((const __half*)p, (__half*)q, n, s);\n"
        "  e = sweeper_relu::launch_relu((const __nv_bfloat16*)p, (__nv_bfloat16*)q, n, s);\n"
        "  return sweeper_relu::launch_relu((const int8_t*)p, (int8_t*)q, n, s);\n}\n"
    )
    gencode = ["-gencode", "arch=compute_89,code=sm_89", "-gencode", "arch=compute_90,code=sm_90"]
    _nvcc(
        "-std=c++17",
        "-O3",
        "-Werror",
        "all-warnings",
        *gencode,
        "-c",
        "use.cu",
        "-o",
        "use.o",
        cwd=tmp_path,
    )
    # the PTX carries the cache operators and vector widths the configs ask for
    _nvcc("-std=c++17", "-arch=sm_90", "-ptx", "use.cu", "-o", "use.ptx", cwd=tmp_path)
    ptx = (tmp_path / "use.ptx").read_text()
    for want in [
        "ld.global.cs.v4.u32", "st.global.cs.v4.u32", "ld.global.cg.v2.u32", "st.global.cg.v2.u32",
        "ld.global.lu.u32", "st.global.wt.u32", "ld.global.nc.v4.u32",
        "ld.global.L1::no_allocate.v2.u32", "ld.global.cs.b16", "st.global.cs.b8",
        "createpolicy.fractional.L2::evict_last.b64", "ld.global.L2::cache_hint.v4.u32",
        "createpolicy.fractional.L2::evict_first.b64", "ld.global.L2::cache_hint.u32",
    ]:  # fmt: skip
        assert want in ptx, want
    # float instructions touch the data only in fp32 fixed32 kernels, and only as max.f32 with 0
    # (bit-identical to the integer ReLU); every other kernel's ReLU is bit-level
    entries = re.split(r"\.(?:visible|weak) \.entry ", ptx)[1:]
    floats = {e.split("(")[0]: re.findall(r"\b(?:max|min|setp\.[a-z]+)\.(?:f32|f16|bf16)\b.*", e)
              for e in entries}  # fmt: skip
    fixed = [name for name in floats if "relu_fixed32_kernel" in name]
    assert fixed and entries
    for name, ops in floats.items():
        fp32_fixed = name in fixed and "DtE0E" in name  # Dt::F32, the enum's first value
        assert bool(ops) == fp32_fixed, (name, ops[:2])
        assert all(re.fullmatch(r"max\.f32\s+%f\d+, %f\d+, 0f00000000;", op) for op in ops), ops


REF = r"""
#include "relu_policy.cuh"
#include <cstdio>
#include <cstring>
#include <vector>
using namespace sweeper_relu;
int main(int argc, char** argv) {
  FILE* f = std::fopen(argv[2], "rb"); std::vector<uint32_t> w;
  uint32_t v; while (std::fread(&v, 4, 1, f) == 1) w.push_back(v); std::fclose(f);
  for (auto& x : w) {
    if (!std::strcmp(argv[1], "fp32")) x = detail::relu_word<Dt::F32>(x);
    else if (!std::strcmp(argv[1], "fp16")) x = detail::relu_word<Dt::F16>(x);
    else if (!std::strcmp(argv[1], "bf16")) x = detail::relu_word<Dt::BF16>(x);
    else x = detail::relu_word<Dt::I8>(x);
  }
  f = std::fopen(argv[3], "wb"); std::fwrite(w.data(), 4, w.size(), f); std::fclose(f);
}
"""


def _float_relu(dtype: str, words: np.ndarray) -> np.ndarray:
    """Independent reference: x > 0 ? x : +0 on the decoded values (NaN -> +0, -0 -> +0)."""
    if dtype == "int8":
        x = words.view(np.int8)
        return np.where(x > 0, x, 0).astype(np.int8).view(np.uint32)
    if dtype == "fp32":
        x = words.view(np.float32)
        return np.where(x > 0, words, 0).astype(np.uint32)
    h = words.view(np.uint16)
    if dtype == "fp16":
        pos = h.view(np.float16) > 0
    else:  # bf16 = the top half of an fp32
        pos = (h.astype(np.uint32) << 16).view(np.float32) > 0
    return np.where(pos, h, 0).astype(np.uint16).view(np.uint32)


@needs_nvcc
@pytest.mark.xdist_group("relu-host")  # one worker builds the host program once
@pytest.mark.parametrize("dtype", ["fp32", "fp16", "bf16", "int8"])
def test_header_relu_word_is_bit_exact_on_host(tmp_path_factory, merged, dtype):
    d = tmp_path_factory.getbasetemp() / "relu_host"
    exe = d / "ref"
    if not exe.exists():
        d.mkdir(exist_ok=True)
        (d / "relu_policy.cuh").write_text(render(merged, "cuda"))
        (d / "ref.cu").write_text(REF)
        _nvcc("-std=c++17", "-O2", "ref.cu", "-o", "ref", cwd=d)
    rng = np.random.default_rng(0)
    if dtype in ("fp16", "bf16"):
        words = np.arange(1 << 16, dtype=np.uint16).repeat(2).view(np.uint32)  # every pattern
        words = np.concatenate([words, rng.integers(0, 2**32, 1 << 16, dtype=np.uint32)])
    elif dtype == "int8":
        words = np.arange(1 << 8, dtype=np.uint8).repeat(4).view(np.uint32)
        words = np.concatenate([words, rng.integers(0, 2**32, 1 << 16, dtype=np.uint32)])
    else:
        special = np.array([0, 0x80000000, 1, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
                            0x7F800000, 0xFF800000, 0x7F800001, 0x7FC00000, 0xFFC00000,
                            0x3F800000, 0xBF800000, 0xFFFFFFFF], dtype=np.uint32)  # fmt: skip
        words = np.concatenate([special, rng.integers(0, 2**32, 1 << 18, dtype=np.uint32)])
    inp, out = d / f"in_{dtype}.bin", d / f"out_{dtype}.bin"
    words.tofile(inp)
    subprocess.run([str(exe), dtype, str(inp), str(out)], check=True, timeout=60)
    got = np.fromfile(out, dtype=np.uint32)
    np.testing.assert_array_equal(got, _float_relu(dtype, words))
    bitmath = pytest.importorskip("sweeper_kernels.bitmath")
    np.testing.assert_array_equal(got, bitmath.relu_words(dtype, words))


def test_cli_module_runs_without_gpu():
    # exporting never imports numba (it must work on a laptop from a results folder)
    code = "import sys, sweeper.export, sweeper.analyze.policy, sweeper.analyze.select; print('numba' in sys.modules)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False"


@pytest.fixture(scope="module")
def library_cache(tmp_path_factory) -> str:
    """One SWEEPER_CACHE for the module's library builds: a header built before (the same
    bytes) is read from it, as sweeper.export.native caches by content hash."""
    return str(tmp_path_factory.mktemp("cache"))


@pytest.mark.xdist_group("library")  # one worker, one build of the shared header
@needs_nvcc
def test_shared_library_builds_and_loads_without_gpu(tmp_path, merged, monkeypatch, library_cache):
    from sweeper.export.native import build_exported_launchers, build_library

    monkeypatch.setenv("SWEEPER_CACHE", library_cache)
    header = tmp_path / "relu_policy.cuh"
    header.write_text(render(merged, "cuda"))
    lib = build_library(header, arch="90")
    assert build_library(header, arch="90") == lib  # cached by content hash
    launchers = build_exported_launchers(header, arch="90")
    assert sorted(launchers) == sorted(ITEM) and all(callable(f) for f in launchers.values())


@pytest.mark.xdist_group("library")  # one worker, one build of the shared header
@needs_nvcc
def test_two_policies_libraries_share_no_symbol_but_the_c_api(
    tmp_path, merged, monkeypatch, library_cache
):
    """Two policies' headers built into two libraries of one process (verify's library beside
    a torch op) share no defined dynamic symbol but the extern "C" entry points, which each
    library's handle resolves to its own: in particular no unique ("u") symbol such as the
    device cache, which the dynamic linker binds once per process whatever the load mode (it
    made the second library dispatch with the first policy's entry)."""
    from sweeper.export.native import build_library

    monkeypatch.setenv("SWEEPER_CACHE", library_cache)
    nm = shutil.which("nm")
    if nm is None:
        pytest.skip("nm not found (binutils)")
    syms = []
    one = merge_docs([all_hints_policy()], ["h200/policy.json"])
    for k, doc in enumerate((merged, one)):
        header = tmp_path / f"policy{k}.cuh"
        header.write_text(render(doc, "cuda"))
        out = subprocess.run([nm, "-D", "--defined-only", str(build_library(header, arch="90"))],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        syms.append({tuple(ln.split()[1:3]) for ln in out.splitlines() if len(ln.split()) == 3})
    c_api = {f"sweeper_{f}_{dt}" for f in ("launch_relu", "relu_choice") for dt in ITEM}
    shared = {name for kind, name in syms[0] & syms[1] if "cuda" not in name.lower()}
    assert shared == c_api
    assert any(kind == "u" for kind, _ in syms[0])  # the device cache is one, and per policy


@needs_nvcc
def test_the_shipped_h200_header_dispatches_tuned_bands_only_on_the_h200(tmp_path):
    """Compiled and run on the host (no GPU calls): the entry the header picks for device
    descriptions of an RTX 4090, an H100 SXM, an H200 MIG slice and the H200."""
    from sweeper.analyze.policy import load_any
    from sweeper.export.cuda import _ident

    root = Path(__file__).resolve().parents[2]
    doc = load_any(root / "results/h200/hot-7/policy.json")
    (tmp_path / "relu_policy.cuh").write_text(render(doc, "cuda"))
    devices = {  # cc major, minor, l2CacheSize, SMs
        "RTX 4090": (8, 9, 72 * MiB, 128),
        "H100 SXM": (9, 0, 50 * MiB, 132),
        "H200 MIG 3g.71gb": (9, 0, 30 * MiB, 60),
        "H200": (9, 0, 62914560, 132),
    }
    rows = ",".join(f"{{{ma}, {mi}, {l2}LL, {sms}}}" for ma, mi, l2, sms in devices.values())
    (tmp_path / "host.cu").write_text(
        '#include "relu_policy.cuh"\n#include <cstdio>\n'
        "int main() {\n"
        "  int count = 0;\n"
        "  const sweeper_relu::detail::EntryKey* keys = sweeper_relu::detail::entry_keys(&count);\n"
        f"  struct D {{ int ma, mi; long long l2; int sms; }} ds[] = {{{rows}}};\n"
        "  for (const D& d : ds)\n"
        '    std::printf("%d\\n", sweeper_relu::detail::pick_entry(keys, count, 0, d.ma, d.mi,\n'
        "                                                          d.l2, d.sms));\n"
        "  return 0;\n}\n"
    )
    _nvcc("-std=c++17", "host.cu", "-o", "host", cwd=tmp_path)
    out = subprocess.run([str(tmp_path / "host")], capture_output=True, text=True, check=True)
    picked = dict(zip(devices, (int(x) for x in out.stdout.split()), strict=True))
    assert picked == {"RTX 4090": -1, "H100 SXM": -1, "H200 MIG 3g.71gb": -1, "H200": 0}
    header = (tmp_path / "relu_policy.cuh").read_text()
    generic = doc["generic"]["fp32"]
    assert f'default: return "{generic}";' in header  # relu_choice names it off the H200
    assert f"default: return detail::V_{_ident(generic)}::launch" in header


def test_export_keeps_a_different_file_unless_forced_and_never_overwrites_the_policy(tmp_path):
    from typer.testing import CliRunner

    from sweeper.cli import app

    ppath = write_policy(tmp_path / "policy.json", all_hints_policy())
    header = tmp_path / "relu_policy.cuh"
    cli = CliRunner()
    assert cli.invoke(app, ["export", str(ppath)]).exit_code == 0
    first = header.read_bytes()
    assert cli.invoke(app, ["export", str(ppath)]).exit_code == 0  # same contents: fine
    header.write_text("// my edits\n")
    r = cli.invoke(app, ["export", str(ppath)])
    assert r.exit_code == 1 and "--force" in r.output and r.output.count("\n") == 1
    assert header.read_text() == "// my edits\n"
    assert cli.invoke(app, ["export", str(ppath), "--force"]).exit_code == 0
    assert header.read_bytes() == first
    policy = ppath.read_bytes()
    r = cli.invoke(app, ["export", str(ppath), "--format", "json", "-o", str(ppath), "--force"])
    assert r.exit_code == 1 and ppath.read_bytes() == policy


def test_the_exported_launch_takes_its_buffer_sets_addresses_and_the_streams_handle():
    from types import SimpleNamespace

    from sweeper.run.verify import exported_on

    def arr(addr):
        return SimpleNamespace(__cuda_array_interface__={"data": (addr, False)})

    sets = {"A": (arr(0x1000), arr(0x2000), None), "B": (arr(0x3000), arr(0x4000), None)}
    calls = []
    on = exported_on(lambda *a: calls.append(a), SimpleNamespace(side=sets.__getitem__), 77)
    on("B")(SimpleNamespace(handle=9))
    on("A")(SimpleNamespace(handle=5))
    assert calls == [(0x3000, 0x4000, 77, 9), (0x1000, 0x2000, 77, 5)]


def test_the_sass_check_and_verify_build_the_header_with_the_same_flags():
    from sweeper.export.native import nvcc_flags

    assert nvcc_flags("90", "-shared", "-Xcompiler", "-fPIC") == [
        "-std=c++17", "-O3", "-shared", "-Xcompiler", "-fPIC",
        "-gencode", "arch=compute_90,code=sm_90",
    ]  # fmt: skip
    assert nvcc_flags("90", "-cubin") == nvcc_flags("90")[:2] + ["-cubin"] + nvcc_flags("90")[2:]


def test_the_python_export_writes_json_words_as_python_outside_strings_only():
    import ast

    from sweeper.export.python import python_literal

    value = {"gpu": 'null-true "false"', "run_ids": ["true-1", "a\\null"], "on": True,
             "off": False, "sm_count": None, "cc": [9, 0], "rel": 0.125}  # fmt: skip
    text = python_literal(value)
    assert ast.literal_eval(text) == value
    assert text == json.dumps(value, indent=1, sort_keys=True).replace(
        ": true", ": True").replace(": false", ": False").replace(": null", ": None")  # fmt: skip


def test_a_python_export_keeps_names_that_spell_json_words(tmp_path):
    ppath = write_policy(tmp_path / "policy.json", all_hints_policy(gpu="null-true-false"))
    mod = _load_module(export(ppath, "python"))
    (entry,) = mod.POLICY["entries"]
    assert entry["gpu"] == "null-true-false"


def test_the_runtime_doc_of_a_policy_without_generic_configs_or_run_ids(merged):
    from sweeper.export.python import runtime_doc

    doc = copy.deepcopy(merged)
    del doc["generic"]
    for e in doc["entries"]:
        e["source"].pop("run_ids", None)
    rt = runtime_doc(doc)
    assert rt["generic"] == {}
    assert [e["run_ids"] for e in rt["entries"]] == [[], []]
    assert runtime_doc(merged)["generic"] == merged["generic"]


def test_the_templates_are_ascii_so_any_locale_reads_them_alike():
    root = Path(__file__).parents[2] / "sweeper" / "export" / "templates"
    for p in root.iterdir():
        assert p.read_bytes().isascii(), p.name
