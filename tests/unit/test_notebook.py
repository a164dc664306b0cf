"""notebooks/analysis.ipynb runs top to bottom (nbclient) on a run folder via SWEEPER_RUN."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

try:
    from tests.unit.test_plots import STREAMING, synthetic_manifest, synthetic_results
except ImportError:  # tests/ is not a package: pytest put tests/unit on sys.path
    from test_plots import STREAMING, synthetic_manifest, synthetic_results

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK = REPO / "notebooks" / "analysis.ipynb"


def execute(run_dir: Path, monkeypatch) -> list[str]:
    """Run the notebook against run_dir; return every text output, in order."""
    monkeypatch.setenv("SWEEPER_RUN", str(run_dir))
    monkeypatch.setenv("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell
    texts, images = [], 0
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "stream":
                texts.append(out["text"])
            data = out.get("data", {})
            texts += [data[k] for k in ("text/markdown", "text/plain") if k in data]
            images += "image/png" in data
    return [*texts, f"IMAGES={images}"]


def test_committed_notebook_is_clean_and_uses_the_public_api():
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(not c["outputs"] and c["execution_count"] is None for c in code)
    source = "\n".join("".join(c["source"]) for c in code)
    imported = re.findall(r"^\s*from\s+(sweeper[\w.]*)\s+import\s+(.+)$", source, flags=re.M)
    public = {
        "sweeper": {"api", "runfolder", "units"},
        "sweeper.analyze": {"policy", "select", "store"},
        "sweeper.report": {"plots", "tables"},
    }
    assert imported and all(
        set(names.replace(" ", "").split(",")) <= public.get(mod, set()) for mod, names in imported
    ), imported
    assert not re.findall(r"^\s*import\s+sweeper", source, flags=re.M)


def test_notebook_on_two_mode_run_with_policy(tmp_path, monkeypatch):
    from sweeper.analyze import policy
    from sweeper.analyze.store import write_run

    run_dir = write_run(tmp_path / "testgpu" / "r1", synthetic_manifest(), synthetic_results())
    doc = policy.build_policy(synthetic_results(), synthetic_manifest())
    policy.write_policy(run_dir / "policy.json", doc)
    before = {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()}
    out = "\n".join(execute(run_dir, monkeypatch))
    # the envelope cliff at L2 (64 -> 72 MiB) in hot mode, for both dtypes
    assert re.search(r"hot\s+fp16\s+64\s+72", out) and re.search(r"hot\s+fp32\s+64\s+72", out)
    # the v2-style config cliff: streaming loads entering (32 MiB, L2]
    assert re.search(rf"hot\s+fp32\s+{STREAMING}\s+32\s+40", out)
    assert "No policy built yet" not in out
    assert "pick a different config in hot and cold" in out
    assert int(re.search(r"IMAGES=(\d+)", out).group(1)) >= 4 + 1 + 1  # 2 per mode, policy, modes
    # the notebook only reads: the run folder is as it was, byte for byte
    assert {p: p.read_bytes() for p in run_dir.rglob("*") if p.is_file()} == before


def test_notebook_on_one_mode_run_without_policy(tmp_path, monkeypatch):
    from sweeper.analyze.store import write_run

    run_dir = write_run(tmp_path / "r", synthetic_manifest(("cold",)), synthetic_results(("cold",)))
    monkeypatch.setenv("SWEEPER_NOTEBOOK_WRITE_REPORT", "1")  # asked to: it writes the report
    out = "\n".join(execute(run_dir, monkeypatch))
    assert "No policy built yet" in out
    assert "Only one residency mode in this run (cold)" in out
    assert (run_dir / "REPORT.md").exists()


def test_notebook_on_the_newest_shipped_run(monkeypatch, tmp_path):
    """The real thing: the newest run under results/ (skipped until one is shipped)."""
    from sweeper.errors import SweeperError
    from sweeper.runfolder import newest_run

    try:
        run_dir = newest_run(REPO / "results", complete=True)
    except SweeperError:
        pytest.skip("no run folder under results/ yet")
    out = "\n".join(execute(run_dir, monkeypatch))
    from sweeper.analyze.store import load_manifest

    assert f"run `{load_manifest(run_dir)['run_id']}`" in out
    assert "IMAGES=0" not in out
