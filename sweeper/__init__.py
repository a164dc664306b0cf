"""sweeper: byte-gap-free sweeps and launch-policy selection for memory-bound GPU kernels.

`import sweeper` never imports numba.cuda or touches a driver: only the kernels package,
sweeper.run.timers and the GPU side of sweeper.run.runner do, and they are imported lazily.
"""

import os

# Small grids are what sweeper measures on purpose (tiny sizes, one-wave grid-stride shapes):
# Numba's low-occupancy warning would print once per such launch (hundreds per sweep). Read by
# numba-cuda when it is first imported; a value the user set is kept.
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

__version__ = "0.1.0"

__all__ = ["__version__"]
