"""Users' kernels on the GPU: the examples bit-exact on every dtype (tails included) under
each launch rule, inside a CUDA graph, as a candidate of a small run, and as the baseline."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sweeper_kernels import external as ex
from sweeper_kernels import get_launcher, random_bits, reference_relu, special_values

from sweeper import api
from sweeper.analyze.store import load_manifest, load_run

ROOT = Path(__file__).resolve().parents[2]
V2 = f"{ROOT / 'examples' / 'relu_v2.cu'}:relu_v2"
VEC = f"{ROOT / 'examples' / 'relu_vec.cu'}:relu_vec"
DTYPES = ("fp32", "fp16", "bf16", "int8")
# tails of every vector width, one tile, and both sides of v2's 32 MiB switch for fp32
SIZES = (1, 7, 4097, 65_535, 1_000_003, 4 * 2**20 - 3, 4 * 2**20 + 5)


def _run(launcher, x_host, stream=0):
    from numba import cuda

    x = cuda.to_device(x_host)
    y = cuda.device_array_like(x_host)
    launcher(x, y, x_host.size, stream)
    cuda.synchronize()
    return y.copy_to_host()


@pytest.mark.parametrize("spec,grid", [(V2, "stride1"), (V2, "fixed3"), (VEC, "onepass16B"),
                                       (VEC, "onepass"), (VEC, "stride2")])  # fmt: skip
@pytest.mark.parametrize("dtype", DTYPES)
def test_external_kernels_are_bit_exact(spec, grid, dtype):
    launcher = get_launcher(ex.load_kernel(spec, 256, grid).variant(dtype))
    for n in SIZES:
        x = random_bits(n, dtype, seed=n)
        x[: min(n, special_values(dtype).size)] = special_values(dtype)[:n]
        got = _run(launcher, x)
        assert np.array_equal(got.view(np.uint8), reference_relu(x, dtype).view(np.uint8)), (
            f"{spec} {grid} {dtype} n={n}"
        )


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_external_kernel_replays_in_a_cuda_graph(dtype):
    from numba import cuda

    from sweeper.run.timers import Graph

    n = 1_000_003
    x_host = random_bits(n, dtype, seed=3)
    x = cuda.to_device(x_host)
    y = cuda.device_array_like(x_host)
    launcher = get_launcher(ex.load_kernel(V2, 256, "stride1").variant(dtype))
    stream = cuda.stream()
    launcher(x, y, n, stream)  # first call loads the module outside the capture
    stream.synchronize()
    y[:] = np.zeros_like(x_host)
    g = Graph(lambda s: launcher(x, y, n, s), 4, stream)
    g.launch()
    stream.synchronize()
    assert np.array_equal(y.copy_to_host().view(np.uint8),
                          reference_relu(x_host, dtype).view(np.uint8))  # fmt: skip
    g.close()


def test_a_block_above_the_kernels_limit_is_refused_before_the_run(tmp_path):
    src = tmp_path / "bounded.cu"
    src.write_text(
        'extern "C" __global__ void __launch_bounds__(128) b_fp32(const float* x, float* y,\n'
        "    unsigned long long n) {\n"
        "  for (unsigned long long i = blockIdx.x * 128ull + threadIdx.x; i < n;\n"
        "       i += 128ull * gridDim.x) y[i] = x[i] > 0.f ? x[i] : 0.f;\n}\n"
    )
    launcher = get_launcher(ex.load_kernel(f"{src}:b", 256, "stride1").variant("fp32"))
    with pytest.raises(ex.KernelError, match=r"at most 128 threads per block"):
        launcher.prepare()


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    return str(api.plan("auto", out=str(out), dtypes="fp32").path)


def test_run_with_a_kernel_lands_in_the_selection(plan_path, tmp_path):
    run_dir = api.run(
        plan_path,
        dtypes=["fp32"],
        quick=True,
        kernel=VEC,
        kernel_grid="onepass16B",
        configs=["ext-*", "v16-u1-ld.def-st.def-b256-onepass"],
        sizes="4:12",
        out_root=str(tmp_path),
        run_id="ext",
    )
    data = load_run(run_dir)
    cand = data.results[data.results.role == "candidate"]
    ext_rows = cand[cand.config == "ext-relu_vec-b256-onepass16B"]
    assert ext_rows.n.nunique() >= 2 and (ext_rows.status == "ok").all(), ext_rows
    sel = api.select(str(run_dir))
    picked = set(sel["config"]) | set(sel["fastest"]) | set(sel["runner_up"])
    assert "ext-relu_vec-b256-onepass16B" in picked
    m = load_manifest(run_dir)
    assert m["external"][0]["config"] == "ext-relu_vec-b256-onepass16B"


def test_a_kernel_as_the_baseline_is_named_in_the_manifest_and_results(plan_path, tmp_path):
    run_dir = api.run(
        plan_path,
        dtypes=["fp32"],
        quick=True,
        baseline=V2,
        configs=["v16-u1-ld.def-st.def-b256-onepass"],
        sizes="4:12",
        out_root=str(tmp_path),
        run_id="base",
    )
    m = load_manifest(run_dir)
    assert m["baseline"] == "ext-relu_v2-b256-stride1"
    assert m["baseline_kernel"]["kernel"] == V2
    res = pd.read_csv(run_dir / "results.csv")
    assert set(res[res.role == "baseline"].config) == {"ext-relu_v2-b256-stride1"}


def test_a_wrong_kernel_gets_a_mismatch_status_not_a_crash(plan_path, tmp_path):
    src = tmp_path / "wrong.cu"
    src.write_text(
        'extern "C" __global__ void w_fp32(const float* x, float* y, unsigned long long n) {\n'
        "  for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;\n"
        "       i < n; i += (unsigned long long)gridDim.x * blockDim.x) y[i] = x[i];\n}\n"
    )
    run_dir = api.run(
        plan_path, dtypes=["fp32"], quick=True, kernel=f"{src}:w", configs=["ext-*"],
        sizes="4:6", out_root=str(tmp_path), run_id="wrong",
    )  # fmt: skip
    res = load_run(run_dir).results
    cand = res[res.role == "candidate"]
    assert len(cand) and (cand.status == "mismatch").all()
