"""The public functions the CLI, notebooks and tests share. Each returns plain objects.

Heavy modules (numba, pandas, matplotlib) are imported inside the functions that need them,
so `import sweeper.api` stays fast and GPU-free.
"""

from __future__ import annotations
