"""GPU workers as Ray actors: the GPUs of this host (`sweeper run --devices`) and a cluster's
GPUs of several models (`sweeper fleet run`).

Ray (install extra `ray`) places one actor per GPU, pinned to a whole GPU (`num_gpus=1`) of the
model a run asks for (Ray's `accelerator_type`); each actor builds its executor there and
answers the run's calls in order (sweeper.run.pool.serve). The run's own process is the only
writer of its folder: the actors send their cells back, so only the machine that runs
`sweeper` needs the results root. A lost actor (its process, GPU or node gone) shows as
`ray.exceptions.RayActorError` on its calls, and its sizes are measured by another actor of the
run (PoolExecutor).
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from collections.abc import Callable, Sequence
from typing import Any

from sweeper.errors import SweeperError
from sweeper.run.pool import PoolExecutor, WorkerLost, serve

RAY_EXTRA = "Ray is not installed: `pip install 'relu-sweeper[ray]'`"


def ray_module():
    """The `ray` module (SweeperError naming the install extra without it)."""
    try:
        import ray
    except ImportError:
        raise SweeperError(RAY_EXTRA) from None
    return ray


class ExecutorActor:
    """An executor made on the actor's GPU by `make` (a picklable function of no
    arguments), answering calls one at a time."""

    def __init__(self, make: Callable[[], Any]):
        self.ex = make()
        self.visible = os.environ.get("CUDA_VISIBLE_DEVICES")

    def serve(self, method: str, args: tuple) -> Any:
        return serve(self.ex, method, args)


class RayWorker:
    """A worker whose executor runs in a Ray actor."""

    def __init__(self, actor: Any, name: str):
        self.actor = actor
        self.name = name

    def call(self, method: str, *args: Any) -> cf.Future:
        return self.actor.serve.remote(method, args).future()

    def lost(self, error: BaseException) -> bool:
        from ray.exceptions import RayActorError

        return isinstance(error, RayActorError | WorkerLost)

    def close(self) -> None:
        ray = ray_module()
        ray.kill(self.actor)


def actors(
    make: Callable[[], Any], count: int, accelerator_type: str | None = None, name: str = "gpu"
) -> list[RayWorker]:
    """`count` actors, each on a whole GPU (of `accelerator_type` when given), each with its
    executor made by `make`; they start at once and are ready when this returns."""
    ray = ray_module()
    options: dict[str, Any] = {"num_gpus": 1, "num_cpus": 0, "max_restarts": 0}
    if accelerator_type:
        options["accelerator_type"] = accelerator_type
    cls = ray.remote(ExecutorActor).options(**options)
    workers = [RayWorker(cls.remote(make), f"{name}{i}") for i in range(count)]
    free = ray.available_resources().get("GPU", 0)
    ready, waiting = ray.wait(
        [w.actor.serve.remote("capabilities", ()) for w in workers],
        num_returns=count,
        timeout=float(os.environ.get("SWEEPER_ACTOR_START_S", "600")),
    )
    if waiting:
        for w in workers:
            ray.kill(w.actor)
        want = f"{count} GPUs" + (f" of type {accelerator_type}" if accelerator_type else "")
        raise SweeperError(
            f"Ray placed {len(ready)} of {count} GPU workers ({want} asked, {free:g} GPUs free "
            "in the cluster); free or add GPUs, or ask for fewer"
        )
    ray.get(ready)  # an executor that failed to start raises here, naming its error
    return workers


def parse_devices(devices: str) -> list[str] | None:
    """`--devices` as a list of device ordinals (None: "all", every GPU of this host)."""
    if devices.strip() == "all":
        return None
    parts = [p.strip() for p in devices.split(",")]
    if not parts or not all(p.isdigit() for p in parts) or len(set(parts)) != len(parts):
        raise SweeperError(
            f"--devices {devices!r}: expected 'all' or distinct GPU ordinals such as 0,1"
        )
    return parts


def host_pool(
    devices: str, make: Callable[[], Any], planned: dict[str, Sequence[int]]
) -> PoolExecutor:
    """A pool of one actor per GPU of this host (`devices`: "all" or "0,1,..."), in a local Ray
    instance that sees those GPUs only."""
    ray = ray_module()
    chosen = parse_devices(devices)
    if not ray.is_initialized():
        if chosen is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(chosen)
        ray.init(
            num_gpus=len(chosen) if chosen is not None else None,
            include_dashboard=False,
            log_to_driver=False,
        )
    count = int(ray.cluster_resources().get("GPU", 0))
    if count < 1:
        raise SweeperError("--devices: Ray finds no GPU on this host")
    return PoolExecutor(actors(make, count), planned)
