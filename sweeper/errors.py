"""Errors a user can act on. The CLI turns any of USER_ERRORS into one line and exit 1."""

from __future__ import annotations

from sweeper_kernels.errors import KernelError


class SweeperError(Exception):
    """A problem the user can fix; the message says what to do next."""


class SchemaError(SweeperError):
    """A file on disk is not a valid sweeper file of the expected kind/version."""

    def __init__(self, path: object, field: str | None, message: str):
        self.path = str(path)
        self.field = field
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")


class FieldError(ValueError):
    """Raised by validators; load() wraps it into a SchemaError naming the file."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(message)


# What a light install (numpy, pandas, matplotlib: reading results) adds to measure and compile.
CUDA_EXTRA = "pip install 'relu-sweeper[cuda]'"


class NoGPUError(SweeperError):
    """A command needs a CUDA GPU and none is usable here."""


class PlanMismatchError(SweeperError):
    """A plan, run or policy belongs to a different GPU / plan than asked for."""


# What the CLI reports as one line: sweeper's own errors and the kernels' (sweeper_kernels is
# the lower layer and raises its own KernelError).
USER_ERRORS: tuple[type[Exception], ...] = (SweeperError, KernelError)
