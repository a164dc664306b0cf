"""A shipped policy's dispatch as one more candidate of an audit: the exported header's
`launch_relu`, compiled with nvcc (sweeper.export.native.build_exported_launchers) and timed
with every guard beside a user's kernel, so the audit says where the user's kernel stands
against torch and against what sweeper would ship.

A policy is a folder's `policy.json` with its `relu_policy.cuh` beside it, the header being
that policy's export (checked as `sweeper verify` checks it). Its config name is
`policy-<run id>` (e.g. `policy-hot-7`); it is timed in the one mode its policy was built
for, for the dtypes it covers. `--policy auto` takes, per mode and dtype of the audit, the
newest verified policy (a `verify.txt` beside it) that covers it, among the results root's run
folders for the GPU.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from sweeper_kernels.variants import id_hash

from sweeper.errors import SweeperError
from sweeper.files import read_text
from sweeper.runfolder import POLICY_PREFIX


@dataclass(frozen=True)
class PolicyDispatch:
    """One policy: its folder's name, header, mode and dtypes."""

    name: str
    policy: str  # path of policy.json
    header: str  # path of relu_policy.cuh
    mode: str
    dtypes: tuple[str, ...]
    header_sha256: str

    @property
    def config(self) -> str:
        return f"{POLICY_PREFIX}{self.name}"

    def variant(self, dtype: str) -> DispatchVariant:
        return DispatchVariant(self, dtype)

    def describe(self) -> dict:
        """What a manifest records of it."""
        return {
            "config": self.config,
            "policy": self.policy,
            "header": self.header,
            "mode": self.mode,
            "dtypes": list(self.dtypes),
            "header_sha256": self.header_sha256,
        }


@dataclass(frozen=True)
class DispatchVariant:
    """One dtype of a policy's dispatch: the fields the runner and executor read."""

    dispatch: PolicyDispatch
    dtype: str

    @property
    def config(self) -> str:
        return self.dispatch.config

    @property
    def mode(self) -> str:
        """The runner times it in this mode only."""
        return self.dispatch.mode

    @property
    def id(self) -> str:
        return f"{self.dtype}-{self.config}-{id_hash(self.dtype, self.config, self.dispatch.header_sha256)}"

    # the runner records a candidate's fields; a dispatch picks a config per size
    vec_bytes = None
    unroll = None
    load_hint = "policy"
    store_hint = "policy"
    block = None
    grid = "policy"

    def neighbours(self) -> list:
        return []

    def launcher(self):
        """launch(x, y, n, stream) over Numba device arrays: the header's launch_relu, which
        only enqueues work (no sync, no allocation), so hot mode captures it in a graph."""
        from sweeper.export.native import stream_handle

        fn = _launchers(self.dispatch.header)[self.dtype]

        def launch(x, y, n, stream):
            fn(x.device_ctypes_pointer.value, y.device_ctypes_pointer.value, n,
               stream_handle(stream))  # fmt: skip

        return launch


@functools.cache
def _launchers(header: str) -> dict:
    from sweeper.export.native import build_exported_launchers

    return build_exported_launchers(header)


def load_dispatch(policy_path: str | Path) -> PolicyDispatch:
    """A policy.json (or its folder) -> PolicyDispatch; SweeperError in one line when it is
    not a single-run policy with its own export beside it."""
    from sweeper.analyze.policy import load_any
    from sweeper.export import render
    from sweeper.export.verify import check_export

    path = Path(policy_path)
    if path.is_dir():
        path = path / "policy.json"
    if not path.is_file():
        raise SweeperError(f"--policy {policy_path}: no such policy file")
    doc = load_any(path)
    modes = _modes(doc)
    if len(modes) != 1 or None in modes:
        raise SweeperError(f"{path}: a policy of one run and one mode is needed, got {modes}")
    header = path.parent / "relu_policy.cuh"
    if not header.is_file():
        raise SweeperError(
            f"{header}: missing; `sweeper export {path} --format cuda -o {header}` writes it"
        )
    check_export(header, render(doc, "cuda"), path, "cuda")
    text = read_text(header)
    return PolicyDispatch(
        name=path.parent.name,
        policy=str(path),
        header=str(header),
        mode=modes.pop(),
        dtypes=tuple(sorted(_dtypes(doc))),
        header_sha256=hashlib.sha256(text.encode()).hexdigest(),
    )


def _modes(doc: dict) -> set:
    """The modes a policy's entries were built for (one for a policy of one run)."""
    return {e["source"].get("mode") for e in doc["entries"]}


def _dtypes(doc: dict) -> set:
    """The dtypes a policy's entries cover."""
    return {d for e in doc["entries"] for d in e["dtypes"]}


def shipped_policies(
    root: str | Path, gpu: str, modes: list[str], dtypes: list[str] | None = None
) -> list[Path]:
    """Per mode and dtype asked for (every dtype when None), the newest verified policy under
    root/gpu that covers it: a run folder with policy.json, relu_policy.cuh and verify.txt,
    its policy built for that mode; newest by the run manifest's `finished`. Each policy
    once, in the order of the modes, then of the folders."""
    import json

    from sweeper.analyze.policy import load_any

    best: dict[tuple[str, str], tuple[str, Path]] = {}
    for folder in sorted(Path(root, gpu).glob("*/")):
        files = [folder / f for f in ("policy.json", "relu_policy.cuh", "verify.txt")]
        if not all(f.is_file() for f in files):
            continue
        try:
            doc = load_any(files[0])
            finished = json.loads((folder / "manifest.json").read_text()).get("finished", "")
        except (SweeperError, OSError, ValueError):
            continue
        mode = _modes(doc)
        if len(mode) != 1:
            continue
        (m,) = mode
        if m not in modes:
            continue
        for d in _dtypes(doc):
            if (dtypes is None or d in dtypes) and (
                (m, d) not in best or str(finished) > best[m, d][0]
            ):
                best[m, d] = (str(finished), files[0])
    out: list[Path] = []
    for m in modes:
        for path in sorted({p for (mm, _), (_, p) in best.items() if mm == m}):
            if path not in out:
                out.append(path)
    return out


def resolve(
    spec: str, root: str | Path, gpu: str, modes: list[str], dtypes: list[str] | None = None
) -> list[PolicyDispatch]:
    """--policy: "auto" (shipped_policies), "none", or comma-separated policy files. A policy's
    header is built with nvcc: without one, auto times no policy (and says so on stderr) and
    a named policy is refused."""
    import sys

    from sweeper_kernels.toolkit import find_tool, how_to_get

    if spec == "none":
        return []
    if spec == "auto":
        paths = shipped_policies(root, gpu, modes, dtypes)
    else:
        paths = [Path(p.strip()) for p in spec.split(",") if p.strip()]
    out = [load_dispatch(p) for p in paths]
    if out and find_tool("nvcc") is None:
        if spec != "auto":
            raise SweeperError(f"{how_to_get('nvcc')}; it builds the policy's header")
        names = ", ".join(d.policy for d in out)
        print(f"sweeper: no nvcc, so the shipped policy ({names}) is not timed", file=sys.stderr)
        return []
    names = [d.config for d in out]
    if len(set(names)) != len(names):
        raise SweeperError(f"--policy names two policies of one folder name: {', '.join(names)}")
    return out


def dispatch_from_manifest(manifest: dict) -> list[PolicyDispatch]:
    """The policies a run timed (a resumed run times the same ones): each must still hold the
    header the run measured."""
    out = []
    for doc in manifest.get("dispatch") or []:
        d = load_dispatch(doc["policy"])
        if d.header_sha256 != doc.get("header_sha256"):
            raise SweeperError(
                f"{d.header} changed since the run timed it; resuming would mix two policies "
                f"under {d.config}"
            )
        out.append(d)
    return out
