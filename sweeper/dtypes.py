"""The dtypes sweeper times. Defined once, in the kernels layer (sweeper_kernels.dtypes, which
never imports sweeper); this module is where the rest of sweeper takes them from."""

from sweeper_kernels.dtypes import CTYPE, DTYPES, ITEMSIZE, STORAGE, bits_view

__all__ = ["CTYPE", "DTYPES", "ITEMSIZE", "STORAGE", "bits_view"]
