"""sweeper: byte-gap-free sweeps and launch-policy selection for memory-bound GPU kernels.

`import sweeper` never imports numba.cuda or touches a driver: only the kernels package,
sweeper.run.timers and the GPU side of sweeper.run.runner do, and they are imported lazily.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
