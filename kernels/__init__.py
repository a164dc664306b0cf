"""sweeper_kernels: the Numba CUDA ReLU variants (installed from the kernels/ folder).

A variant is data (`Variant`, a frozen config with a stable id); one factory compiles a kernel
per compile key. Importing this package does not import numba: that happens on the first PTX
compile or launch.

    from sweeper_kernels import Variant, default_grid, get_launcher, ptx, reference_relu
"""

from sweeper_kernels.build import ptx
from sweeper_kernels.launch import LaunchShape, launch_shape
from sweeper_kernels.launchers import get_launcher
from sweeper_kernels.reference import (
    itemsize,
    random_bits,
    reference_relu,
    special_values,
    storage_dtype,
)
from sweeper_kernels.variants import (
    DTYPES,
    GRIDS,
    Variant,
    compile_keys,
    default_grid,
    extended_grid,
    get_grid,
)

__all__ = [
    "DTYPES",
    "GRIDS",
    "LaunchShape",
    "Variant",
    "compile_keys",
    "default_grid",
    "extended_grid",
    "get_grid",
    "get_launcher",
    "itemsize",
    "launch_shape",
    "ptx",
    "random_bits",
    "reference_relu",
    "special_values",
    "storage_dtype",
]
