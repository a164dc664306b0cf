"""`sweeper ARGS` with the batched executor timing each hot size's reference cell on its own,
through GpuExecutor.reference (what it did before a size's first batch carried it): the other
side of a same-machine A/B against `sweeper ARGS`. Run from the repository root on a GPU
machine:

    python3 lab/tools/reference_ab.py run --run-id ref-apart --dtypes fp32
"""

from sweeper.cli import main
from sweeper.run.batched import BatchedExecutor

BatchedExecutor.reference_in_batch = lambda self, mode: False

if __name__ == "__main__":
    main()
