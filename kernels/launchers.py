"""`get_launcher(variant)(x, y, n, stream)`: what the runner calls, for any kind of variant.

The one place that picks the launcher: the Numba variants' (sweeper_kernels.launch), the
anti-gaming variants' (sweeper_kernels.adversarial) or a user's kernel's
(sweeper_kernels.external). All three share the interface `launcher(x, y, n, stream)`.
Importing this module does not import numba (sweeper_kernels.adversarial does, on first use).
"""

from __future__ import annotations

from sweeper_kernels.external import ExternalLauncher, ExternalVariant
from sweeper_kernels.launch import Launcher
from sweeper_kernels.variants import Variant, is_adversarial_id


def get_launcher(variant: Variant | str, **overrides):
    """A launcher for a Variant, a variant id, an adversarial id ("adv-<kind>-<id>") or a
    user's kernel (sweeper_kernels.external.ExternalVariant).

    Compiles (or loads from the disk cache) on its first call."""
    if isinstance(variant, ExternalVariant):
        return ExternalLauncher(variant, **overrides)
    if isinstance(variant, str):
        if is_adversarial_id(variant):
            from sweeper_kernels.adversarial import get_adversarial_launcher

            return get_adversarial_launcher(variant, **overrides)
        variant = Variant.from_id(variant)
    elif not isinstance(variant, Variant):  # an AdversarialVariant
        from sweeper_kernels.adversarial import get_adversarial_launcher

        return get_adversarial_launcher(variant, **overrides)
    return Launcher(variant, **overrides)
