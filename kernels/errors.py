"""The one error the kernels raise for a request they cannot serve (a bad variant field, grid,
dtype, array or launch size). The message says what to do; sweeper's CLI prints it as one line."""

from __future__ import annotations


class KernelError(ValueError):
    """A variant, grid, dtype, array or launch the kernels cannot serve."""
