"""Users' kernels on the CPU: the examples' PTX through NVRTC, every error a user will make
(one line, nothing written), config names, launch maths, the cache key, the cliff and the
CLI up to the point where a GPU is needed."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from sweeper_kernels import external as ex
from sweeper_kernels.errors import KernelError
from sweeper_kernels.variants import Variant
from typer.testing import CliRunner

from sweeper import api
from sweeper.analyze.cliff import cliff, cliff_lines
from sweeper.analyze.store import with_records
from sweeper.cli import app
from sweeper.plan.gpus import lookup
from sweeper.run.replay import ModelExecutor
from sweeper.units import MiB

ROOT = Path(__file__).resolve().parents[2]
V2 = str(ROOT / "examples" / "relu_v2.cu")
VEC = str(ROOT / "examples" / "relu_vec.cu")
DTYPES = ("fp32", "fp16", "bf16", "int8")
L2 = lookup("h200").l2_bytes


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """Every test compiles into its own cache folder."""
    path = tmp_path / "cache"
    monkeypatch.setenv("SWEEPER_CACHE", str(path))
    return path


def _files(*roots: Path) -> dict[str, bytes]:
    out = {}
    for root in roots:
        if root.exists():
            for p in sorted(root.rglob("*")):
                if p.is_file():
                    out[str(p)] = p.read_bytes()
    return out


def _accesses(body: str, op: str) -> set[str]:
    return set(re.findall(rf"{op}\.global[.\w]*", body))


# ---- the examples' PTX -----------------------------------------------------------------------


@pytest.mark.parametrize("cc", [(9, 0), (8, 9)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_v2_streams_from_32_mib_and_loads_by_default_below(dtype, cc):
    k = ex.load_kernel(f"{V2}:relu_v2")
    body = ex.entry_ptx(ex.ptx(k, dtype, cc), f"relu_v2_{dtype}")
    loads = _accesses(body, "ld")
    assert any(re.fullmatch(r"ld\.global\.cs\.v4\.[uf]32", a) for a in loads), loads
    default = {a for a in loads if ".v4" in a and ".cs" not in a and ".L" not in a}
    assert default, loads  # the default-load path of small working sets
    # the rule's threshold: 2 * n * sizeof(T) compared with 32 MiB
    assert re.search(r"setp\.g[te]\.u64\s+%p\d+, %rd\d+, 3355443[12];", body), body
    stores = _accesses(body, "st")
    assert any(re.fullmatch(r"st\.global\.v4\.[uf]32", a) for a in stores), stores
    assert not any(".cs" in a for a in stores)  # the rule is about loads: default stores


@pytest.mark.parametrize("cc", [(9, 0), (8, 9)])
@pytest.mark.parametrize("dtype", DTYPES)
def test_vec_loads_and_stores_16_byte_vectors_without_cache_hints(dtype, cc):
    k = ex.load_kernel(f"{VEC}:relu_vec", grid="onepass16B")
    body = ex.entry_ptx(ex.ptx(k, dtype, cc), f"relu_vec_{dtype}")
    loads, stores = _accesses(body, "ld"), _accesses(body, "st")
    assert any(re.fullmatch(r"ld\.global(\.nc)?\.v4\.[uf]32", a) for a in loads), loads
    assert any(re.fullmatch(r"st\.global\.v4\.[uf]32", a) for a in stores), stores
    assert not any(".cs" in a or ".L2" in a for a in loads | stores)
    assert f".target sm_{cc[0]}{cc[1]}" in ex.ptx(k, dtype, cc)


def test_cubin_compiles_without_a_gpu():
    k = ex.load_kernel(f"{VEC}:relu_vec")
    assert ex.compile_kernel(k, "fp16", (9, 0), "cubin")[:4] == b"\x7fELF"


# ---- errors: one line, nothing written -----------------------------------------------------

BAD = {
    "compile": (
        'extern "C" __global__ void k_fp32(const float* x, float* y, unsigned long long n) {\n'
        "  y[0] = not_declared;\n}\n",
        r"^\S+bad\.cu:2: error: identifier \"not_declared\" is undefined \(NVRTC, sm_90\)$",
    ),
    "missing": (
        'extern "C" __global__ void other_fp32(const float* x, float* y, unsigned long long n) {}\n',
        r"bad\.cu defines no kernel k_fp32 \(the fp32 kernel of k; expected extern \"C\" "
        r"__global__ void k_fp32\(const float\* x, float\* y, unsigned long long n\)\)$",
    ),
    "signature": (
        'extern "C" __global__ void k_fp32(const float* x, float* y, int n) {}\n',
        r"^k_fp32 in \S+bad\.cu does not have the signature sweeper launches: extern \"C\" "
        r"__global__ void k_fp32\(const float\* x, float\* y, unsigned long long n\)$",
    ),
    "swapped": (
        'extern "C" __global__ void k_fp32(float* y, const float* x, unsigned long long n) {}\n',
        r"^k_fp32 in \S+bad\.cu does not have the signature sweeper launches",
    ),
    "mangled": (
        "__global__ void k_fp32(const float* x, float* y, unsigned long long n) {}\n",
        r"^k_fp32 in \S+bad\.cu is not an extern \"C\" __global__ kernel \(its PTX has no "
        r"\.entry k_fp32\)",
    ),
    "device_function": (
        'extern "C" __device__ void k_fp32(const float* x, float* y, unsigned long long n) {}\n',
        r"^k_fp32 in \S+bad\.cu is not an extern \"C\" __global__ kernel",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_kernel_is_refused_in_one_line_and_nothing_is_written(case, tmp_path, cache):
    src, message = BAD[case]
    (tmp_path / "bad.cu").write_text(src)
    before = _files(tmp_path)
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    before = _files(tmp_path)
    res = CliRunner().invoke(
        app,
        [
            "audit",
            f"{tmp_path / 'bad.cu'}:k",
            "--plan",
            str(plan.path),
            "--root",
            str(tmp_path / "res"),
        ],
    )
    assert res.exit_code == 1
    lines = res.output.strip().splitlines()
    assert len(lines) == 1, res.output
    assert re.search(message, lines[0].removeprefix("error: ")), lines[0]
    assert _files(tmp_path) == before  # no run folder, no cache entry, nothing changed
    assert not (tmp_path / "res").exists()


def test_a_compile_error_names_the_users_file_not_the_check(tmp_path):
    (tmp_path / "bad.cu").write_text("#include <cuda_fp16.h>\n\n__global__ void (\n")
    with pytest.raises(KernelError) as e:
        ex.check(ex.load_kernel(f"{tmp_path / 'bad.cu'}:k"), ["fp16"])
    assert re.match(rf"^{re.escape(str(tmp_path / 'bad.cu'))}:3: error: ", str(e.value))
    assert ex.SHIM_FILE not in str(e.value)


def test_a_kernel_for_one_dtype_serves_runs_of_that_dtype_only(tmp_path):
    (tmp_path / "k.cu").write_text(
        'extern "C" __global__ void k_int8(const signed char* __restrict__ x,\n'
        "    signed char* __restrict__ y, unsigned long long n) {}\n"
    )
    k = ex.load_kernel(f"{tmp_path / 'k.cu'}:k")
    ex.check(k, ["int8"])
    with pytest.raises(KernelError, match=r"defines no kernel k_bf16 .*__nv_bfloat16\* x"):
        ex.check(k, ["bf16"])


SHAPES = [
    (["--kernel-block", "100"], "--kernel-block 100: a multiple of 32 (whole warps)"),
    (["--kernel-block", "2048"], "--kernel-block 2048: a multiple of 32 from 32 to 1024"),
    (["--kernel-block", "0"], "--kernel-block 0: a multiple of 32 from 32 to 1024"),
    (["--kernel-grid", "stride0"], "--kernel-grid 'stride0': W (waves) must be at least 1"),
    (["--kernel-grid", "fixed0"], "--kernel-grid 'fixed0': G (blocks) must be at least 1"),
    (["--kernel-grid", "onepass0"], "--kernel-grid 'onepass0': the per-thread count must be"),
    (["--kernel-grid", "onepassB"], "--kernel-grid 'onepassB': onepassKB needs K"),
    (["--kernel-grid", "waves2"], "--kernel-grid 'waves2': use onepass (1 element per thread)"),
]


@pytest.mark.parametrize("args,message", SHAPES)
def test_an_invalid_launch_shape_is_refused_in_one_line(args, message, tmp_path, cache):
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    before = _files(tmp_path)
    res = CliRunner().invoke(
        app,
        ["audit", f"{VEC}:relu_vec", "--plan", str(plan.path), "--root", str(tmp_path / "res"),
         *args],
    )  # fmt: skip
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [f"error: {res.output.strip()[7:]}"]
    assert res.output.strip().startswith(f"error: {message}")
    assert _files(tmp_path) == before


def test_a_missing_file_and_a_spec_without_a_name_are_refused(tmp_path):
    with pytest.raises(KernelError, match=r"nope\.cu: no such file"):
        ex.load_kernel(f"{tmp_path}/nope.cu:k")
    with pytest.raises(KernelError, match="give the kernel as FILE.cu:NAME"):
        ex.load_kernel(V2)
    with pytest.raises(KernelError, match="a C identifier"):
        ex.load_kernel(f"{V2}:relu-v2")


def test_the_same_kernel_as_candidate_and_baseline_is_refused(tmp_path):
    with pytest.raises(api_errors(), match="a kernel timed against itself"):
        api.run(
            str(api.plan("h200", out=str(tmp_path / "p.json"), dtypes="fp32").path),
            kernel=f"{VEC}:relu_vec",
            baseline=f"{VEC}:relu_vec",
            executor=object(),
            out_root=str(tmp_path / "res"),
        )
    assert not (tmp_path / "res").exists()


def api_errors():
    from sweeper.errors import SweeperError

    return SweeperError


# ---- names, launch maths, cache -----------------------------------------------------------


def test_config_names_and_ids():
    k = ex.load_kernel(f"{V2}:relu_v2", 128, "onepass1")
    assert k.grid == "onepass" and k.config == "ext-relu_v2-b128-onepass"
    assert ex.load_kernel(f"{V2}:relu_v2", 256, "onepass16B").config == (
        "ext-relu_v2-b256-onepass16B"
    )
    v = k.variant("fp16")
    assert re.fullmatch(r"fp16-ext-relu_v2-b128-onepass-[0-9a-f]{8}", v.id)
    assert v.symbol == "relu_v2_fp16" and v.neighbours() == []
    # another source, another id; a grid config never has the ext- prefix
    other = ex.ExternalKernel(k.path, k.name, k.block, k.grid, "0" * 64).variant("fp16")
    assert other.config == v.config and other.id != v.id
    assert Variant.current_id(v.id) == v.id  # not a grid id: kept as it is on resume
    with pytest.raises(KernelError):
        Variant.parse(v.id)
    assert not any(g.config.startswith(ex.PREFIX) for g in __import__(
        "sweeper_kernels").default_grid(["fp32"]))  # fmt: skip


def test_is_kernel_spec_tells_a_kernel_from_a_config():
    assert ex.is_kernel_spec("examples/relu_v2.cu:relu_v2")
    assert ex.is_kernel_spec(f"{V2}:relu_v2")
    for text in ("torch", "auto", "v16-u1-ld.def-st.def-b256-onepass", "x:y"):
        assert not ex.is_kernel_spec(text)


def test_launch_blocks_for_each_rule():
    sms, threads = 132, 2048
    # onepass: one element per thread, E elements, K bytes (fp16: 16 bytes = 8 elements)
    assert ex.launch_blocks("onepass", 256, 1000, 4, sms, threads) == 4
    assert ex.launch_blocks("onepass4", 256, 1025, 4, sms, threads) == 2
    assert ex.launch_blocks("onepass16B", 256, 2048, 2, sms, threads) == 1
    assert ex.launch_blocks("onepass16B", 256, 2049, 2, sms, threads) == 2
    assert ex.launch_blocks("onepass", 256, 1, 4, sms, threads) == 1
    # strideW: W waves of 8 blocks of 256 per SM, fewer where n needs fewer
    assert ex.launch_blocks("stride1", 256, 10**9, 4, sms, threads) == 132 * 8
    assert ex.launch_blocks("stride2", 512, 10**9, 4, sms, threads) == 2 * 132 * 4
    assert ex.launch_blocks("stride1", 256, 300, 4, sms, threads) == 2
    assert ex.launch_blocks("fixed7", 256, 10**9, 4, sms, threads) == 7
    assert ex.launch_blocks("fixed7", 256, 1, 4, sms, threads) == 7


def test_launch_edges():
    (ws, what), = ex.launch_edges("stride1", 256, 4, 132, 2048)  # fmt: skip
    assert ws == 2 * 4 * 132 * 8 * 256 and "1056 blocks" in what
    edges = ex.launch_edges("onepass16B", 256, 2, 132, 2048)
    assert [e[0] for e in edges] == [2 * 2 * k * 1056 * 256 * 8 for k in (1, 2, 3, 4)]
    assert ex.launch_edges("fixed10", 128, 1, 132, 2048) == [
        (2 * 10 * 128, "10 blocks: threads start to loop")
    ]


def test_cache_key_covers_source_name_dtype_cc_and_target(tmp_path):
    k = ex.load_kernel(f"{VEC}:relu_vec")
    base = ex.cache_key(k, "fp32", (9, 0), "ptx")
    assert base == ex.cache_key(k, "fp32", (9, 0), "ptx")
    other_source = ex.ExternalKernel(k.path, k.name, k.block, k.grid, "1" * 64)
    keys = {
        ex.cache_key(other_source, "fp32", (9, 0), "ptx"),
        ex.cache_key(k, "fp16", (9, 0), "ptx"),
        ex.cache_key(k, "fp32", (8, 9), "ptx"),
        ex.cache_key(k, "fp32", (9, 0), "cubin"),
        ex.cache_key(ex.ExternalKernel(k.path, "relu_v", 256, "stride1", k.source_sha256),
                     "fp32", (9, 0), "ptx"),
    }  # fmt: skip
    assert base not in keys and len(keys) == 5
    # launch shape is not compiled in: same key
    assert ex.cache_key(ex.load_kernel(f"{VEC}:relu_vec", 512, "fixed9"), "fp32", (9, 0),
                        "ptx") == base  # fmt: skip


def test_compiled_code_is_read_back_from_the_cache(cache):
    k = ex.load_kernel(f"{VEC}:relu_vec")
    text = ex.ptx(k, "fp32")
    path = ex.cache_path(k, "fp32", (9, 0), "ptx")
    assert path.read_text() == text and path.parent == cache / "kernels" / "external"
    path.write_text(text + "// read from the cache\n")
    assert ex.ptx(k, "fp32").endswith("// read from the cache\n")


def test_a_source_edited_after_it_was_read_is_refused(tmp_path):
    src = tmp_path / "k.cu"
    src.write_text(Path(VEC).read_text())
    k = ex.load_kernel(f"{src}:relu_vec")
    src.write_text(Path(VEC).read_text() + "\n// edited\n")
    with pytest.raises(KernelError, match=r"changed since this run read it"):
        ex.ptx(k, "fp32")


# ---- CLI: up to the GPU ---------------------------------------------------------------------


def test_kernels_check_compiles_for_a_cc_without_a_gpu():
    res = CliRunner().invoke(app, ["kernels", "check", f"{V2}:relu_v2", "--cc", "89"])
    assert res.exit_code == 0, res.output
    assert res.output.strip() == (
        "ext-relu_v2-b256-stride1: relu_v2_fp32, relu_v2_fp16, relu_v2_bf16, relu_v2_int8 "
        "compile for sm_89"
    )


@pytest.mark.no_gpu
@pytest.mark.parametrize(
    "args",
    [
        ["audit", f"{V2}:relu_v2", "--kernel-grid", "stride1"],
        ["run", "--kernel", f"{VEC}:relu_vec", "--kernel-grid", "onepass16B"],
        ["run", "--baseline", f"{V2}:relu_v2"],
    ],
)
def test_a_valid_kernel_gets_to_the_gpu_and_stops_there_in_one_line(args, tmp_path):
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    before = _files(tmp_path)
    where = ["--plan", str(plan.path)] if args[0] == "audit" else [str(plan.path)]
    res = CliRunner().invoke(app, [*args, *where, "--dtypes", "fp32", "--root",
                                   str(tmp_path / "res")])  # fmt: skip
    assert res.exit_code == 1
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no usable CUDA driver"), res.output
    assert {p for p in _files(tmp_path) if "cache" not in p} == {
        p for p in before if "cache" not in p
    }
    assert not (tmp_path / "res").exists()


# ---- the audit's plumbing and the cliff, with a model GPU -----------------------------------


class ModelWithKernel(ModelExecutor):
    """A model GPU that describes the users' kernels as GpuExecutor does."""

    def __init__(self, kernel, **kw):
        super().__init__({kernel.config: kw.pop("curve")}, **kw)
        self.kernel = kernel

    def describe(self) -> dict:
        doc = super().describe()
        doc["device"]["sm_count"] = 132
        doc["device"]["max_threads_per_sm"] = 2048
        return {**doc, "external": [self.kernel.describe()], "kernel_source": "f" * 64}


def _v2_curve(ws, l2):
    """A streaming-from-32-MiB kernel: 0.6 of torch in (32 MiB, L2], 1.05 elsewhere."""
    return 3000.0 if 32 * MiB <= ws <= l2 else 5250.0


def test_audit_with_a_model_gpu_writes_a_report_that_leads_with_the_cliff(tmp_path):
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    k = ex.load_kernel(f"{V2}:relu_v2")
    model = ModelWithKernel(
        k, curve=_v2_curve, l2_bytes=L2, baseline=lambda ws, l2: 5000.0,
        copy=lambda ws, l2: 5500.0, noise=0.0,
    )  # fmt: skip
    run_dir, lines = api.audit(
        f"{V2}:relu_v2", str(plan.path), executor=model, out_root=str(tmp_path / "res"),
        run_id="audit", modes=["hot"],
    )  # fmt: skip
    assert {c[3] for c in model.calls} == {"ext-relu_v2-b256-stride1"}  # only the kernel
    assert lines[0].startswith("ext-relu_v2-b256-stride1 fp32 hot vs torch: worst 0.600x at ")
    assert "in (32 MiB, 60 MiB]" in lines[0] and "worst overall 0.600x" in lines[0]
    assert re.match(r"  below torch at 32 MiB-60 MiB \(down to 0\.600x\)$", lines[1])
    report = (run_dir / "REPORT.md").read_text()
    assert report.index("### The cliff") < report.index("## Environment")
    assert lines[0] in report
    sel = pd.read_csv(run_dir / "selection.csv")
    assert set(sel["config"]) == {"ext-relu_v2-b256-stride1"}


def _results(ws_ratios, config="ext-k-b256-stride1", status=None):
    rows = []
    for i, (ws, ratio) in enumerate(ws_ratios):
        rows.append({"mode": "hot", "dtype": "fp32", "role": "candidate", "config": config,
                     "ws_bytes": ws, "ratio": ratio, "status": (status or {}).get(i, "ok")})  # fmt: skip
    return pd.DataFrame(rows)


def _manifest(grid="stride1", block=256):
    return {
        "baseline": "torch",
        "device": {"sm_count": 132, "max_threads_per_sm": 2048, "l2_bytes": L2},
        "plan": {"l2_bytes": L2, "resolution": 32},
        "external": [
            {
                "config": "ext-k-b256-stride1",
                "kernel": "k.cu:k",
                "block": block,
                "grid": grid,
                "source_sha256": "",
            }
        ],  # fmt: skip
    }


def test_cliff_finds_runs_below_the_baseline_and_the_band_worst():
    ws = [16 * MiB, 30 * MiB, 33 * MiB, 40 * MiB, 50 * MiB, 70 * MiB, 200 * MiB]
    ratios = [1.1, 0.98, 0.7, 0.5, 0.9, 1.2, 0.95]
    (c,) = cliff(_results(list(zip(ws, ratios, strict=True))), _manifest())
    assert c["below"] == [(30 * MiB, 50 * MiB, 0.5), (200 * MiB, 200 * MiB, 0.95)]
    assert c["worst_band"] == {"ws_bytes": 40 * MiB, "ratio": 0.5}
    assert c["worst"] == {"ws_bytes": 40 * MiB, "ratio": 0.5}
    ws2 = [16 * MiB, 20 * MiB, 70 * MiB, 200 * MiB]
    (c2,) = cliff(_results(list(zip(ws2, [0.4, 1.0, 1.1, 1.0], strict=True))), _manifest())
    assert c2["worst_band"] is None and c2["worst"]["ratio"] == 0.4
    assert "no size measured in (32 MiB, L2]" in cliff_lines(_results(
        list(zip(ws2, [0.4, 1.0, 1.1, 1.0], strict=True))), _manifest())[0]  # fmt: skip


def test_cliff_flags_a_launch_edge_in_an_unsampled_gap():
    edge = 2 * 4 * 132 * 8 * 256  # stride1 on fp32: the grid stops growing at 8.25 MiB
    step = L2 / 32
    sampled = [edge - step / 2, edge + step / 2, 60 * MiB]
    (c,) = cliff(_results([(int(w), 1.0) for w in sampled]), _manifest())
    assert c["edges"][0]["unsampled"] is False
    gap = [edge - 2 * step, edge + 2 * step, 60 * MiB]
    results = _results([(int(w), 1.0) for w in gap])
    (c,) = cliff(results, _manifest())
    assert c["edges"][0]["unsampled"] is True
    assert any("in an UNSAMPLED gap" in line for line in cliff_lines(results, _manifest()))
    assert any("never below torch" in line for line in cliff_lines(results, _manifest()))


def test_cliff_counts_cells_that_are_not_ok_and_ignores_runs_without_users_kernels():
    results = _results([(16 * MiB, 0.2), (40 * MiB, 1.0)], status={0: "mismatch"})
    (c,) = cliff(results, _manifest())
    assert c["not_ok"] == 1 and c["worst"]["ratio"] == 1.0
    assert cliff(results, {**_manifest(), "external": []}) == []
    all_bad = _results([(16 * MiB, 0.2)], status={0: "mismatch"})
    assert cliff_lines(all_bad, _manifest()) == [
        "ext-k-b256-stride1 fp32 hot vs torch: no ok cell (1 cells not ok; see Guards)"
    ]


class ModelRunningKernel(ModelWithKernel):
    """Its candidates are the kernel's variants, whose rows carry no vector or hint fields."""

    def variants(self, grid, dtype):
        return [self.kernel.variant(dtype)]


def _audited_v2(tmp_path):
    """An audit of the v2 example on a model GPU that runs it; the run folder."""
    plan = api.plan("h200", out=str(tmp_path / "plan.json"), dtypes="fp32")
    k = ex.load_kernel(f"{V2}:relu_v2")
    model = ModelRunningKernel(
        k, curve=_v2_curve, l2_bytes=L2, baseline=lambda ws, l2: 5000.0,
        copy=lambda ws, l2: 5500.0, noise=0.0,
    )  # fmt: skip
    run_dir, _ = api.audit(f"{V2}:relu_v2", str(plan.path), executor=model,
                           out_root=str(tmp_path / "res"), run_id="a")  # fmt: skip
    return run_dir


def test_a_users_kernel_is_checked_against_its_own_source_hash_not_the_grids(tmp_path):
    """Its variant id hashes the file's sha256 the manifest lists under `external`; the grid's
    fingerprint (`kernel_source`, recorded by every GPU run) does not apply to it."""
    run_dir = _audited_v2(tmp_path)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["kernel_source"] == "f" * 64 and manifest["external"][0]["source_sha256"]
    (run_dir / "selection.csv").unlink()
    assert CliRunner().invoke(app, ["select", str(run_dir)]).exit_code == 0
    manifest["external"][0]["source_sha256"] = "0" * 64
    del manifest["records"]  # and its records made again for the edited fields
    (run_dir / "manifest.json").write_text(json.dumps(with_records(run_dir, manifest)))
    before = (run_dir / "selection.csv").read_bytes()
    res = CliRunner().invoke(app, ["select", str(run_dir)])
    assert res.exit_code == 1
    assert res.output.startswith(
        f"error: {run_dir / 'manifest.json'}: field 'external': 000000000000... is not the "
        "kernel source fp32-ext-relu_v2-b256-stride1-"
    )
    assert (run_dir / "selection.csv").read_bytes() == before


def test_a_policy_never_serves_a_users_kernel(tmp_path):
    run_dir = _audited_v2(tmp_path)
    res = CliRunner().invoke(app, ["policy", "build", str(run_dir)])
    assert res.exit_code == 1
    assert res.output.strip() == (
        "error: the run has no ok candidate rows: nothing to build a policy from"
    )
    assert not (run_dir / "policy.json").exists()


def test_nvrtc_runs_in_a_child_process_and_never_loads_here(tmp_path):
    """Compiling a user's kernel leaves libnvrtc out of sweeper's own process (a process that
    had loaded it could not import torch, the baseline, on the H200 machine)."""
    import os
    import subprocess
    import sys

    code = (
        "import sys; from sweeper_kernels import external as ex; "
        f"k = ex.load_kernel({str(VEC) + ':relu_vec'!r}); "
        "ptx = ex.ptx(k, 'fp32', (9, 0)); "
        "maps = open('/proc/self/maps').read(); "
        "print('.entry relu_vec_fp32' in ptx, 'cuda.bindings.nvrtc' in sys.modules, "
        "'libnvrtc' in maps)"
    )
    env = {**os.environ, "SWEEPER_CACHE": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.stdout.split() == ["True", "False", "False"], out.stderr


def test_a_run_against_a_users_kernel_names_it_as_the_baseline_everywhere(tmp_path):
    """lab/h200/baseline-v2: every candidate timed against examples/relu_v2.cu on the H200."""
    import shutil

    run = tmp_path / "baseline-v2"
    shutil.copytree(ROOT / "lab" / "h200" / "baseline-v2", run,
                    ignore=shutil.ignore_patterns("plots", "REPORT.md"))  # fmt: skip
    assert CliRunner().invoke(app, ["report", str(run)]).exit_code == 0
    text = (run / "REPORT.md").read_text()
    assert (
        "**The baseline is your kernel `examples/relu_v2.cu:relu_v2`** (ext-relu_v2-b256-stride1, "
        "asked for with `--baseline`), not torch" in text
    )
    assert "torch was not importable" not in text
    sel = pd.read_csv(run / "selection.csv")
    assert set(sel["baseline"]) == {"ext-relu_v2-b256-stride1"}
    from sweeper.analyze.store import load_run

    res = load_run(run).results
    assert set(res[res["role"] == "baseline"]["config"]) == {"ext-relu_v2-b256-stride1"}
