"""sweeper_kernels: the Numba CUDA ReLU variants (installed from the kernels/ folder)."""
