"""Which GPU a command uses: `sweeper --device N` narrows CUDA_VISIBLE_DEVICES to the N-th
visible device before anything initialises CUDA, so Numba, torch, the compile pool's
workers and the exported-header checks all see that one device, as device 0."""

from __future__ import annotations

import os

from sweeper.errors import SweeperError

ENV = "CUDA_VISIBLE_DEVICES"
CHOSEN = "SWEEPER_DEVICE"  # the index asked for, for messages and the manifest


def use_device(index: int, environ: dict | None = None) -> str:
    """Narrow CUDA_VISIBLE_DEVICES to the index-th visible device; returns the new value.
    Where CUDA_VISIBLE_DEVICES is already set, the index counts its entries."""
    env = os.environ if environ is None else environ
    if index < 0:
        raise SweeperError(f"--device {index}: a device index is 0 or more")
    visible = env.get(ENV)
    if visible is not None and visible.strip() != "":
        entries = [v.strip() for v in visible.split(",") if v.strip()]
        if index >= len(entries):
            raise SweeperError(
                f"--device {index}: {ENV}={visible} makes {len(entries)} device(s) visible "
                f"(indices 0..{len(entries) - 1})"
            )
        chosen = entries[index]
    else:
        chosen = str(index)
    env[ENV] = chosen
    env[CHOSEN] = str(index)
    return chosen


def chosen_device() -> str | None:
    """The `--device` index this process was started with, if any."""
    return os.environ.get(CHOSEN)
