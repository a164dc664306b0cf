"""Export a policy for production code: a CUDA header, a runtime JSON document, Python, or a
PyTorch op."""

from __future__ import annotations

import json
import os
from pathlib import Path

from sweeper.errors import SweeperError
from sweeper.export.cuda import check_configs, render_cuda
from sweeper.export.python import render_python, runtime_doc
from sweeper.export.torch_op import render_torch

FORMATS = ("cuda", "json", "python", "torch")
DEFAULT_NAMES = {
    "cuda": "relu_policy.cuh",
    "json": "relu_policy.json",
    "python": "relu_policy.py",
    "torch": "relu_torch.py",
}


def render(doc: dict, fmt: str) -> str:
    if fmt == "cuda":
        return render_cuda(doc)
    if fmt == "json":
        check_configs(doc)
        return json.dumps(runtime_doc(doc), indent=1, allow_nan=False) + "\n"
    if fmt == "python":
        check_configs(doc)
        return render_python(doc)
    if fmt == "torch":
        return render_torch(doc)
    raise SweeperError(f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)}")


def export(
    policy_path: str | os.PathLike,
    fmt: str,
    out: str | os.PathLike | None = None,
    force: bool = False,
) -> Path:
    """Render the policy file (either kind) and write it atomically; returns the path. A file
    already there with other contents is kept unless `force` (the same contents: nothing is
    written); the policy itself is never overwritten, nor a path `check_output` refuses (the
    policy's run folder is the one it works on)."""
    from sweeper.analyze.policy import load_any
    from sweeper.errors import SweeperError
    from sweeper.files import file_to_write
    from sweeper.runfolder import check_output
    from sweeper.schema import atomic_write_text

    doc = load_any(policy_path)
    text = render(doc, fmt)
    path = Path(out) if out else Path(policy_path).parent / DEFAULT_NAMES[fmt]
    if path.exists() and path.resolve() == Path(policy_path).resolve():
        raise SweeperError(f"{path} is the policy being exported; write the export elsewhere")
    check_output(path, works_on=(policy_path,))
    path = file_to_write(path)
    if path.exists():
        if path.read_text(encoding="utf-8", errors="replace") == text:
            return path
        if not force:
            raise SweeperError(f"{path} exists with other contents; --force overwrites it")
    return atomic_write_text(path, text)
