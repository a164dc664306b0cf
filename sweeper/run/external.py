"""Users' kernels in a run: from the command line and from a run's manifest, checked before
anything is measured. The kernels themselves (contract, NVRTC, launcher) are in
sweeper_kernels.external; docs/external-kernels.md is the user's guide."""

from __future__ import annotations

from sweeper.errors import SweeperError


def user_kernels(
    kernel: str | None,
    kernel_block: int,
    kernel_grid: str,
    baseline: str,
    baseline_block: int,
    baseline_grid: str,
    allow_stateful: bool = False,
) -> tuple[list, object | None]:
    """(candidate kernels, baseline kernel or None) from `--kernel` and `--baseline`: each
    file read and hashed and each launch shape checked; nothing compiled yet.
    `allow_stateful` (--allow-stateful) applies to both."""
    from sweeper_kernels.external import is_kernel_spec, load_kernel

    kernels = [load_kernel(kernel, kernel_block, kernel_grid, allow_stateful)] if kernel else []
    base = None
    if is_kernel_spec(baseline):
        base = load_kernel(baseline, baseline_block, baseline_grid, allow_stateful)
        if kernels and kernels[0].config == base.config:
            raise SweeperError(
                f"--kernel and --baseline name the same kernel and launch shape ({base.config}): "
                "a kernel timed against itself measures nothing"
            )
    return kernels, base


def kernels_from_manifest(
    manifest: dict, allow_stateful: bool = False
) -> tuple[list, object | None]:
    """The users' kernels a run recorded (a resumed run times the same ones). The source file
    must still hold the code the run measured: its sha256 is checked when it compiles. A
    kernel the run allowed to keep state (`allow_stateful`) is allowed again; `allow_stateful`
    allows every kernel (--allow-stateful on the resume)."""
    from sweeper_kernels.external import ExternalKernel

    def one(doc: dict):
        path, _, name = str(doc["kernel"]).rpartition(":")
        allowed = allow_stateful or doc.get("allow_stateful") is True
        return ExternalKernel(
            path, name, int(doc["block"]), doc["grid"], doc["source_sha256"], allowed
        )

    kernels = [one(d) for d in manifest.get("external") or []]
    base = manifest.get("baseline_kernel")
    return kernels, (one(base) if base else None)


def check_kernels(kernels, dtypes, cc: tuple[int, int]) -> None:
    """Compile and check every kernel for every dtype of the run for the plan's compute
    capability (NVRTC, no GPU): the first problem is raised as one line."""
    from sweeper_kernels.external import check

    for k in kernels:
        check(k, dtypes, tuple(cc))
