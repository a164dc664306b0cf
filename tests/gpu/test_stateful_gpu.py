"""A kernel that skips work only inside back-to-back calls: refused by the PTX scan, and, timed
anyway (--allow-stateful), caught by measurement twice over: by the canary call in its hot
cells' untimed replays (sweeper.run.batched), and as a hot-only gain (sweeper.analyze.modegain)
where hot and after-write time the same traffic (from 2 x L2 on)."""

from __future__ import annotations

import pytest

from sweeper import api
from sweeper.analyze.modegain import mode_gains
from sweeper.analyze.store import load_manifest, load_run
from sweeper.errors import USER_ERRORS

# One call in four skips its work when it starts within 2 us of the previous call's end (read
# on the GPU's global timer): inside a back-to-back graph replay, never after a producer
# kernel or a flush. SKIP 0 is the same kernel, honest.
SOURCE = r"""
__device__ unsigned long long last_end;
__device__ unsigned int calls;
__device__ unsigned int blocks_done;

__device__ __forceinline__ unsigned long long now_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

extern "C" __global__ void skip_fp32(const float* x, float* y, unsigned long long n) {
  __shared__ int skip;
  if (threadIdx.x == 0) {
    unsigned long long start = now_ns();
    unsigned long long prev = *(volatile unsigned long long*)&last_end;
    unsigned int call = *(volatile unsigned int*)&calls;
    skip = SKIP && start - prev < 2000ull && call % 4u == 3u;
  }
  __syncthreads();
  if (!skip)
    for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
         i < n; i += (unsigned long long)gridDim.x * blockDim.x)
      y[i] = x[i] > 0.f ? x[i] : 0.f;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    if (atomicAdd(&blocks_done, 1u) == gridDim.x - 1) {  // the call's last block
      blocks_done = 0;
      calls = calls + 1;
      __threadfence();
      last_end = now_ns();
    }
  }
}
"""


def _kernel(tmp_path, skip: int) -> str:
    path = tmp_path / f"skip{skip}.cu"
    path.write_text(SOURCE.replace("SKIP", str(skip)))
    return f"{path}:skip"


@pytest.fixture(scope="module")
def plan_path(tmp_path_factory):
    """This GPU's plan (sweeps/ holds the shipped GPUs' only)."""
    out = tmp_path_factory.mktemp("plan") / "plan.json"
    return str(api.plan("auto", out=str(out), dtypes="fp32").path)


def _audit(tmp_path, plan_path: str, kernel: str, run_id: str):
    run_dir, _ = api.audit(
        kernel,
        plan_path=plan_path,
        kernel_grid="stride1",
        modes=["hot", "after-write"],
        dtypes=["fp32"],
        quick=True,
        sizes="120:600",  # 2 x L2 and up on the H200 (L2 60 MiB)
        policy="none",
        allow_stateful=True,
        out_root=str(tmp_path / "runs"),
        run_id=run_id,
    )
    data = load_run(run_dir)
    l2 = load_manifest(run_dir)["device"]["l2_bytes"]
    return data.results[data.results["config"].str.startswith("ext-skip")], l2


@pytest.fixture(scope="module")
def audits(tmp_path_factory, plan_path):
    """The skipping kernel and its honest twin, each audited once (hot and after-write)."""
    tmp = tmp_path_factory.mktemp("stateful")
    return {skip: _audit(tmp, plan_path, _kernel(tmp, skip), f"skip{skip}") for skip in (1, 0)}


def test_the_scan_refuses_it(tmp_path, plan_path):
    with pytest.raises(USER_ERRORS, match="globaltimer"):
        api.audit(_kernel(tmp_path, 1), plan_path=plan_path, modes=["hot"], dtypes=["fp32"], quick=True,
                  sizes="120:130", policy="none", out_root=str(tmp_path / "runs"))  # fmt: skip


def test_timed_anyway_the_canary_catches_it_and_passes_the_honest_twin(audits):
    """One call at a random position of each untimed back-to-back replay writes a poisoned
    buffer: the kernel skips it as often as any call (one in four), so over the hot cells'
    replays some canary comes back stale; the honest twin's never does."""
    counts = {}
    for skip, (rows, _) in audits.items():
        hot = rows[rows["mode"] == "hot"]
        caught = hot["status_detail"].fillna("").str.startswith("canary:")
        counts[skip] = (int(caught.sum()), len(hot), int(hot["canaries"].sum()))
    print(f"\n  canary: skipping kernel caught in {counts[1][0]} of {counts[1][1]} hot cells "
          f"({counts[1][2]} canary calls); honest twin in {counts[0][0]} of {counts[0][1]} "
          f"({counts[0][2]} calls)")  # fmt: skip
    assert counts[1][2] > 0 and counts[0][2] > 0  # the canary ran
    assert counts[1][0] >= 1
    assert counts[0][0] == 0


def test_timed_anyway_its_hot_only_gain_is_flagged_and_the_honest_twin_is_not(audits):
    """The measurement the canary does not make: its timing, with the canary's verdict set
    aside (the canary runs untimed, so a caught cell's timing is what it measured)."""
    gains = {}
    for skip, (rows, l2) in audits.items():
        canary = rows["status_detail"].fillna("").str.startswith("canary:")
        rows = rows.assign(status=rows["status"].mask(canary, "ok"))
        (gains[skip],) = [g for g in mode_gains(rows, l2) if g["range"] == ">= 2 L2"]
    cheat, honest = gains[1], gains[0]
    print(f"\n  hot / after-write from 2 x L2: skipping {cheat['excess']:+.1%} "
          f"(hot {cheat['hot']:.3f}, aw {cheat['other']:.3f}, {cheat['sizes']} sizes); "
          f"honest {honest['excess']:+.1%} (hot {honest['hot']:.3f}, aw {honest['other']:.3f})")  # fmt: skip
    assert cheat["flagged"], cheat
    assert not honest["flagged"], honest
