"""Executors without a GPU: a replay of a recorded run, and a synthetic performance model.

Both implement sweeper.run.runner.Executor, so the runner's ordering, pairing bookkeeping,
pruning, refinement, guards and resume are tested on the CPU through the real code path.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweeper.analyze.columns import MEASURED
from sweeper.analyze.store import isna, load_run
from sweeper.errors import SweeperError
from sweeper.ops import working_set


@dataclass(frozen=True)
class SimpleVariant:
    """The fields the runner reads from a variant (a stand-in for sweeper_kernels.Variant)."""

    dtype: str
    config: str
    vec_bytes: int = 16
    unroll: int = 1
    load_hint: str = "default"
    store_hint: str = "default"
    block: int = 256
    grid: str = "onepass"
    recorded_id: str = ""  # a replayed variant answers to the id it was recorded under

    @property
    def id(self) -> str:
        return self.recorded_id or f"{self.dtype}-{self.config}"


def _noise(key: str, scale: float) -> float:
    h = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return 1 + scale * (2 * h - 1)


class ModelExecutor:
    """A synthetic GPU: bandwidth per config as a function of the working set.

    `curves` maps config -> function(ws_bytes, l2_bytes) -> GB/s. The baseline and the copy
    have their own curves. Deterministic noise (seeded by the cell) of +-`noise`.
    `fail` maps config -> status to report (e.g. "mismatch"), to exercise guard bookkeeping.
    `interrupt_after` raises KeyboardInterrupt after that many candidate cells (resume tests).
    `dram_peak_gbps` is the device's DRAM peak as describe() reports it (None: unknown).
    `floor` is the config `baseline_shape` names (None: the model has no launch shape). A
    confirmation cell (`role` "confirm", set by the runner) draws its own noise.
    """

    role = "candidate"

    def __init__(
        self,
        curves: dict[str, Any],
        *,
        l2_bytes: int,
        baseline: Any,
        copy: Any,
        noise: float = 0.004,
        fail: dict[str, str] | None = None,
        interrupt_after: int | None = None,
        device_name: str = "Model GPU",
        baseline_name: str = "torch",
        dram_peak_gbps: float | None = None,
        floor: str | None = None,
    ):
        self.curves = curves
        self.l2 = l2_bytes
        self.baseline_curve = baseline
        self.copy_curve = copy
        self.noise = noise
        self.fail = fail or {}
        self.interrupt_after = interrupt_after
        self.device_name = device_name
        self.baseline_name = baseline_name
        self.dram_peak_gbps = dram_peak_gbps
        self.floor = floor
        self.calls: list[tuple] = []

    def describe(self) -> dict:
        device = {"name": self.device_name, "l2_bytes": self.l2, "sm_count": 1, "cc": [0, 0]}
        if self.dram_peak_gbps is not None:
            device["dram_peak_gbps"] = self.dram_peak_gbps
        return {"device": device, "versions": {}, "baseline": self.baseline_name}

    def variants(self, grid: str, dtype: str) -> list[SimpleVariant]:
        return [SimpleVariant(dtype, c) for c in self.curves]

    def variant(self, dtype: str, config: str) -> SimpleVariant:
        return SimpleVariant(dtype, config)

    def prepare(self, variants: list[Any]) -> None:
        pass

    def release(self, dtype: str, n: int) -> None:
        pass

    def baseline_shape(self, dtype: str, n: int) -> dict:
        if self.floor is None:
            return {"config": None, "why": "the model has no launch shape"}
        return {"config": self.floor, "exact": True, "source": "the model's"}

    def _time(self, curve, ws: int, key: str) -> tuple[float, float, float]:
        t = ws / curve(ws, self.l2) / 1e3 * _noise(key, self.noise)
        return t, t * (1 - self.noise / 2), t * (1 + self.noise / 2)

    def _row(self, mode, dtype, n, role, config, t, base_t) -> dict:
        ws = working_set(n, dtype)
        tm, lo, hi = t
        r = base_t[0] / tm
        return {
            "mode": mode,
            "dtype": dtype,
            "n": n,
            "ws_bytes": ws,
            "role": role,
            "config": config,
            "variant_id": "",
            "status": "ok",
            "time_us": tm,
            "time_lo_us": lo,
            "time_hi_us": hi,
            "gbps": ws / tm / 1e3,
            "base_time_us": base_t[0],
            "ratio": r,
            "ratio_lo": r * (1 - self.noise),
            "ratio_hi": r * (1 + self.noise),
            "n_samples": 8,
        }

    def reference(self, mode: str, dtype: str, n: int) -> list[dict]:
        ws = working_set(n, dtype)
        key = f"{mode}|{dtype}|{n}"
        base_t = self._time(self.baseline_curve, ws, key + "|base")
        copy_t = self._time(self.copy_curve, ws, key + "|copy")
        copy = self._row(mode, dtype, n, "copy", "copy", copy_t, base_t)
        base = self._row(mode, dtype, n, "baseline", self.baseline_name, base_t, base_t)
        copy["copy_gbps"] = base["copy_gbps"] = copy["gbps"]
        return [copy, base]

    def measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        if self.interrupt_after is not None and len(self.calls) >= self.interrupt_after:
            raise KeyboardInterrupt
        self.calls.append((mode, dtype, n, variant.config))
        ws = working_set(n, dtype)
        key = f"{mode}|{dtype}|{n}" + ("|confirm" if self.role == "confirm" else "")
        base_t = self._time(self.baseline_curve, ws, key + "|base")
        t = self._time(self.curves[variant.config], ws, key + "|" + variant.config)
        row = self._row(mode, dtype, n, "candidate", variant.config, t, base_t)
        row["variant_id"] = variant.id
        copy_t = self._time(self.copy_curve, ws, key + "|copy")
        row["copy_gbps"] = ws / copy_t[0] / 1e3
        for f in ("vec_bytes", "unroll", "load_hint", "store_hint", "block", "grid"):
            row[f] = getattr(variant, f)
        if variant.config in self.fail:
            row["status"] = self.fail[variant.config]
            row["status_detail"] = "model: configured to fail"
        return row


class ReplayExecutor:
    """Answers every cell from a recorded run; a cell it does not hold is an error.

    Replaying a complete run with the same plan and parameters visits exactly the recorded
    cells, so it reproduces the run's decisions without a GPU. A candidate recorded under kernel
    code recorded as equivalent (sweeper_kernels.Variant.current_id) is answered under this
    checkout's id, as a resumed run keys it, so a replayed run resumes like a measured one.
    """

    replays = True  # its cells cost nothing to answer again: a failed new run leaves no folder
    role = "candidate"  # the role `measure` answers: the runner sets "confirm" for its round

    def __init__(self, run_dir: str | Path):
        from sweeper_kernels import Variant

        data = load_run(run_dir)
        self.run_dir = Path(run_dir)  # the recorded run (a worker elsewhere opens it again)
        self.manifest = data.manifest
        df = data.results
        self.rows: dict[tuple, dict] = {}
        current: dict[str, str] = {}  # recorded id -> this checkout's (one parse per id)
        for r in df.to_dict(orient="records"):
            if r["role"] in MEASURED and (vid := r["variant_id"]):
                if vid not in current:
                    current[vid] = Variant.current_id(vid) or vid
                r["variant_id"] = current[vid]
            ident = r["variant_id"] or r["config"]
            clean = {k: (None if isna(v) else v) for k, v in r.items()}
            for k in ("n", "ws_bytes", "vec_bytes", "unroll", "block", "n_samples"):
                if clean.get(k) is not None:
                    clean[k] = int(clean[k])
            self.rows[(r["mode"], r["dtype"], int(r["n"]), r["role"], ident)] = clean
        self._variants: dict[str, dict[str, SimpleVariant]] = {}
        for r in self.rows.values():
            if r["role"] == "candidate":
                v = SimpleVariant(
                    r["dtype"],
                    r["config"],
                    r["vec_bytes"],
                    r["unroll"],
                    r["load_hint"],
                    r["store_hint"],
                    r["block"],
                    r["grid"],
                    r["variant_id"],
                )
                self._variants.setdefault(r["dtype"], {})[r["variant_id"]] = v
        # a config's first recorded variant, as variant() serves it
        self._by_config: dict[tuple[str, str], SimpleVariant] = {}
        for dtype, by_id in self._variants.items():
            for v in by_id.values():
                self._by_config.setdefault((dtype, v.config), v)

    def describe(self) -> dict:
        m = self.manifest
        return {"device": m["device"], "versions": m.get("versions", {}), "baseline": m["baseline"]}

    def variants(self, grid: str, dtype: str) -> list[Any]:
        """The recorded candidates; of a climbing run, those of the seed grid and the users'
        kernels (the climb reaches the others through `neighbours`)."""
        recorded = sorted(self._variants.get(dtype, {}).values(), key=lambda v: v.id)
        if not self.manifest.get("climb"):
            return recorded
        from sweeper_kernels import GRIDS

        from sweeper.run.search import screened_everywhere

        seeds = set(self._grid_configs(grid, dtype)) if grid in GRIDS else set()
        # the grid as the recorded run had it
        seeds &= screened_everywhere(self.rows.values(), dtype) or set()
        return [v for v in recorded if v.config in seeds or not v.config.startswith("v")]

    @staticmethod
    def _grid_configs(grid: str, dtype: str) -> list[str]:
        from sweeper_kernels import GRIDS

        return [v.config for v in GRIDS[grid]([dtype])]

    def variant(self, dtype: str, config: str) -> Any:
        v = self._by_config.get((dtype, config))
        if v is not None:
            return v
        # not measured by the recorded run: asking for its cell is the replay's error
        from sweeper_kernels import Variant

        v = Variant.parse(f"{dtype}-{config}")
        return SimpleVariant(
            dtype, config, v.vec_bytes, v.unroll, v.load_hint, v.store_hint, v.block, v.grid,
            recorded_id=f"{dtype}-{config}-unrecorded",
        )  # fmt: skip

    def baseline_shape(self, dtype: str, n: int) -> dict:
        """The recorded run's floor of this dtype."""
        doc = (self.manifest.get("floor") or {}).get(dtype)
        return doc if doc is not None else {"config": None, "why": "the recorded run has none"}

    def neighbours(self, variant: Any) -> list[Any]:
        """A climbing run's one-axis moves (the extended grid's), as recorded variants."""
        if not self.manifest.get("climb"):
            return []
        from sweeper_kernels import Variant

        moves = Variant.parse(f"{variant.dtype}-{variant.config}").neighbours()
        return [self.variant(variant.dtype, m.config) for m in moves]

    def prepare(self, variants: list[Any]) -> None:
        pass

    def release(self, dtype: str, n: int) -> None:
        pass

    def _get(self, key: tuple) -> dict:
        if key not in self.rows:
            raise SweeperError(f"replay: cell {key} is not in the recorded run")
        return dict(self.rows[key])

    def reference(self, mode: str, dtype: str, n: int) -> list[dict]:
        base = self.manifest["baseline"]
        return [
            self._get((mode, dtype, n, "copy", "copy")),
            self._get((mode, dtype, n, "baseline", base)),
        ]

    def measure(self, mode: str, dtype: str, n: int, variant: Any) -> dict:
        return self._get((mode, dtype, n, self.role, variant.id))
