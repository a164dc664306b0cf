"""Ratio to torch (clamp_min, fp32, hot) of the fixed32 floor and the flat32 config of torch's
launch, with the buffers arranged two ways, at the sizes of forms.py:

  shared     torch and the kernel read and write the same x and y (forms.py's harness)
  separate   two buffer sets; in a round torch works on one and the kernel on the other, the
             sets swapped from round to round (the sweep's and verify's arrangement)

Each is a CUDA graph of CALLS calls; every round times torch, kernel, kernel, torch (ABBA) and
keeps base/kernel; the ratio is the median over ROUNDS rounds. Two passes, fresh buffers.
Usage (GPU): python3 lab/h200/floor-form/buffers.py > buffers.txt
"""

import statistics

import pandas as pd
import torch
from forms import CALLS, ROUNDS, SIZES
from numba import cuda
from sweeper_kernels.build import get_kernel
from sweeper_kernels.launch import launch_shape
from sweeper_kernels.variants import Variant

KERNELS = {
    "fixed32": "fp32-v16-u2-ld.def-st.def-b128-fixed32",
    "flat32": "fp32-v16-u2-ld.def-st.def-b128-flat32",
}


def graph(go):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        cs = torch.cuda.current_stream()
        for _ in range(CALLS):
            go(cs)
    return g


def main():
    dev = torch.device("cuda")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    kernels = {k: (Variant.parse(v), get_kernel(Variant.parse(v))) for k, v in KERNELS.items()}
    rows = []
    for p in (1, 2):
        for ws in SIZES:
            n = ws // 8
            sets = [(torch.randn(n, device=dev), torch.empty(n, device=dev)) for _ in range(2)]
            base = [graph(lambda s, x=x, y=y: torch.clamp_min(x, 0, out=y)) for x, y in sets]
            for name, (v, kern) in kernels.items():
                shape = launch_shape(v, n, sms, 2048)

                def go_of(x, y, kern=kern, shape=shape, n=n):
                    args = (x.data_ptr(), y.data_ptr(), n, shape.nvec, shape.ntiles, shape.shift)
                    return lambda s: kern[shape.blocks, shape.threads,
                                          cuda.external_stream(s.cuda_stream)](*args)  # fmt: skip

                cand = [graph(go_of(x, y)) for x, y in sets]
                torch.cuda.synchronize()
                for x, y in sets:
                    assert torch.equal(y, torch.relu(x)), f"{name} at n={n}"
                ev = [torch.cuda.Event(enable_timing=True) for _ in range(8)]
                for arrangement in ("shared", "separate"):
                    ratios = []
                    for r in range(ROUNDS):
                        tb = r % 2
                        tk = tb if arrangement == "shared" else 1 - tb
                        for i, g in enumerate((base[tb], cand[tk], cand[tk], base[tb])):
                            ev[2 * i].record()
                            g.replay()
                            ev[2 * i + 1].record()
                        torch.cuda.synchronize()
                        t = [ev[2 * i].elapsed_time(ev[2 * i + 1]) for i in range(4)]
                        ratios.append((t[0] + t[3]) / (t[1] + t[2]))
                    rows.append((p, ws, name, arrangement, statistics.median(ratios)))
    df = pd.DataFrame(rows, columns=["p", "ws_bytes", "kernel", "buffers", "ratio"])
    pd.set_option("display.width", 200)
    table = df.pivot_table(index="ws_bytes", columns=["kernel", "buffers", "p"], values="ratio")
    print(table.round(3).to_string())
    print(df.groupby(["kernel", "buffers", "p"]).ratio.median().round(4).unstack().to_string())


if __name__ == "__main__":
    main()
