"""The CUDA simulator must be chosen before numba.cuda is first imported, and pytest runs every
test folder in one process, where tests/unit has long since imported the real numba.cuda (and
must keep it: its PTX tests need the real compiler). So the simulator never runs in that process:
test_simulator.py starts a fresh `pytest` on the sim_*.py files with NUMBA_ENABLE_CUDASIM=1 and
SWEEPER_IN_SIM=1 in its environment, and this conftest ignores sim_*.py anywhere else. (Files named on the command line are
collected whatever their name, so the child lists them explicitly.)

Run the child directly while working on it:
    SWEEPER_IN_SIM=1 NUMBA_ENABLE_CUDASIM=1 .venv/bin/pytest tests/sim/sim_kernels.py -q
"""

from __future__ import annotations

import os
import sys

IN_SIM = os.environ.get("SWEEPER_IN_SIM") == "1"

if IN_SIM:
    if "numba.cuda" in sys.modules and os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
        raise RuntimeError("numba.cuda was imported before the simulator could be enabled")
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"  # before numba.cuda is imported in this process
    collect_ignore_glob: list[str] = []
else:
    collect_ignore_glob = ["sim_*.py"]
