"""Every figure docs/ states about a shipped run is derived here from that run's files.

Each claim is a function that reads results/h200/<run>/ (policy.json, manifest.json,
verify_timing.csv, verify.txt) and returns the text the doc must contain, built from what it
derived; the test fails when the doc says anything else. A doc that states a new figure about
a shipped run adds a claim here. Whitespace (line breaks in a paragraph) does not count.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import lzma
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
RUNS = ROOT / "results" / "h200"
MIB = 2**20
DTYPES = ("fp32", "fp16", "bf16", "int8")
WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six"}


def _doc(name: str) -> str:
    return " ".join((DOCS / name).read_text().split())


@functools.cache
def _json(run: str, name: str) -> dict:
    return json.loads((RUNS / run / name).read_text())


@functools.cache
def _verify(run: str) -> pd.DataFrame:
    return pd.read_csv(RUNS / run / "verify_timing.csv")


def _mib(ws_bytes: int) -> str:
    return f"{ws_bytes / MIB:.2f}"


def _bands(run: str) -> dict[str, list[dict]]:
    return {dt: v["bands"] for dt, v in _json(run, "policy.json")["dtypes"].items()}


def _movement(run: str) -> pd.Series:
    """|pass 2 / pass 1 - 1| of the ratio to the baseline per size, in percent."""
    w = _verify(run).pivot_table(index=["dtype", "ws_bytes"], columns="pass", values="ratio")
    return (w[2] / w[1] - 1).abs() * 100


def _losing(run: str, every: bool) -> list[tuple[str, int]]:
    """Sizes whose ratio's whole CI is below 1 in every pass (every=True) or in some only."""
    lost = _verify(run).assign(lost=lambda v: v.ratio_hi < 1).groupby(["dtype", "ws_bytes"]).lost
    s = lost.all() if every else lost.any() & ~lost.all()
    return sorted(s[s].index)


def _total_s(run: str) -> str:
    return f"{_json(run, 'manifest.json')['timing']['total_s']:.1f} s"


def _tol_first(run: str) -> str:
    r = _json(run, "policy.json")["provenance"]["tolerance_by_range"][0]
    assert r["hi_bytes"] == MIB
    return f"{r['tolerance'] * 100:.2f}% up to 1 MiB"


def _twin_range() -> str:
    v = _verify("hot-7")
    m = v[v.ws_bytes.between(16 * MIB, 37.5 * MIB)].groupby("dtype").vs_numba.median()
    return f"a median {m.min():.3f}-{m.max():.3f} of its Numba twin at 16-37.5 MiB"


def _bands_per_dtype(sep_last: str) -> str:
    b = _bands("hot-7")
    parts = [f"{len(b[dt])} for {dt}" for dt in DTYPES]
    return ", ".join(parts[:-1]) + f"{sep_last}{parts[-1]}"


def _band_from(run: str, dtype: str, token: str) -> dict:
    (band,) = [b for b in _bands(run)[dtype] if f"-{token}-" in b["config"]]
    return band


def _flat_peak_vs_numba() -> pd.Series:
    """hot-7's verify: the exported v16-u8 ld.nc flat kernel over its Numba twin, per dtype."""
    v = _verify("hot-7")
    return v[v.config == "v16-u8-ld.nc-st.cs-b128-flat"].groupby("dtype").vs_numba.median()


def _hot7_losses() -> str:
    every = _losing("hot-7", every=True)
    some = _losing("hot-7", every=False)
    assert {dt for dt, _ in every} == {"fp32"}
    sizes = " and ".join(_mib(ws) for _, ws in every)
    return (
        f"{WORDS[len(every)]} fp32 sizes, {sizes} MiB, that lose in both passes, and "
        f"{WORDS[len(some)]} more that lose in one"
    )


def _hot7_ties() -> str:
    """hot-7's losses in both passes against verify's within-the-noise label: each one's best
    pass and 1 / (1 + the pass-to-pass p95)."""
    every = _losing("hot-7", every=True)
    assert len(every) == 2  # the doc says "Both"
    v = _verify("hot-7").set_index(["dtype", "ws_bytes"])
    best = [v.loc[[k]].ratio.max() for k in every]
    p95 = _movement("hot-7").quantile(0.95) / 100
    assert all(b >= 1 / (1 + p95) for b in best)  # both labelled
    return (
        f"Both of hot-7's losses are such ties ({best[0]:.3f}x and {best[1]:.3f}x at best, "
        f"against 1 / {1 + p95:.4f} = {1 / (1 + p95):.3f})"
    )


def _movement_text(run: str) -> str:
    m = _movement(run)
    return f"median {m.median():.2f}%, p95 {m.quantile(0.95):.2f}%, max {m.max():.2f}%"


@functools.cache
def _cell_cost():
    """benchmarks/cell_cost.py, loaded from its file (benchmarks/ is not a package)."""
    spec = importlib.util.spec_from_file_location("cell_cost", ROOT / "benchmarks/cell_cost.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.cache
def _hot7_cost() -> dict:
    return _cell_cost().load(str(RUNS / "hot-7"))


@functools.cache
def _candidate_cells(run: str) -> int:
    with lzma.open(RUNS / run / "trials.jsonl.xz", "rt") as f:
        return sum(json.loads(line)["role"] == "candidate" for line in f if line.strip())


def _per_cell(run: str, seconds: float) -> str:
    return f"{1e3 * seconds / _candidate_cells(run):.2f} ms"


def _hot7_cell_cost_table() -> str:
    """The output of `python benchmarks/cell_cost.py results/h200/hot-7`, as recorded."""
    return "\n".join(_cell_cost().one("results/h200/hot-7", _hot7_cost()))


def _hot7_cell_cost_text() -> str:
    from sweeper.analyze.gpuwork import gpu_work

    t = _json("hot-7", "manifest.json")["timing"]
    ph = t["cell_phases_s"]
    gpu = {r["phase"]: r["gpu_s"] for r in _hot7_cost()["rows"]}
    timed = sum(w["timed"] for w in gpu_work(str(RUNS / "hot-7"))[0].values())
    return (
        f"a cell costs {_per_cell('hot-7', t['total_s'])} of wall time, "
        f"{_per_cell('hot-7', sum(ph.values()))} of it inside the cells' phases, while the GPU "
        f"work it holds is {_per_cell('hot-7', _hot7_cost()['gpu_s'])}, "
        f"{_per_cell('hot-7', timed)} of it the timed samples (up to 16 per side of about "
        f"150 us each). The host waits for the GPU in `rounds` "
        f"({_per_cell('hot-7', ph['hot/rounds'])} per cell against {_per_cell('hot-7', gpu['hot/rounds'])} of GPU work there); of "
        f"`fresh`'s {_per_cell('hot-7', ph['hot/fresh'])}, {_per_cell('hot-7', gpu['hot/fresh'])} "
        f"is GPU work, of `checks`' {_per_cell('hot-7', ph['hot/checks'])} an estimated "
        f"{_per_cell('hot-7', gpu['hot/checks'])}"
    )


CLAIMS = {
    "methodology: hot-7's cell cost as benchmarks/cell_cost.py prints it": (
        "methodology.md",
        _hot7_cell_cost_table,
    ),
    "methodology: hot-7's host and GPU ms per cell": ("methodology.md", _hot7_cell_cost_text),
    "methodology: hot-7's L2-resident ceiling": (
        "methodology.md",
        lambda: f"hot-7's is {_json('hot-7', 'manifest.json')['ceiling']['gbps']:.0f} GB/s",
    ),
    "methodology: hot-7's pass-to-pass movement": (
        "methodology.md",
        lambda: f"by a {_movement_text('hot-7')} over {len(_movement('hot-7'))} sizes",
    ),
    "methodology: aw-4's and cold-6's pass-to-pass p95": (
        "methodology.md",
        lambda: (
            f"in aw-4's by a p95 of {_movement('aw-4').quantile(0.95):.2f}%, in cold-6's by "
            f"{_movement('cold-6').quantile(0.95):.2f}%"
        ),
    ),
    "methodology: wall time of the three shipped runs": (
        "methodology.md",
        lambda: (
            f"took {_total_s('hot-7')} in hot mode ([hot-7](../results/h200/hot-7/manifest"
            f".json), `timing.total_s`), {_total_s('aw-4')} in after-write mode "
            f"([aw-4](../results/h200/aw-4/manifest.json)) and {_total_s('cold-6')} in cold mode"
        ),
    ),
    "methodology: the header against its twin in hot-7's verify": (
        "methodology.md",
        _twin_range,
    ),
    "methodology: library versions of the shipped runs": (
        "methodology.md",
        lambda: "torch {torch}, numba-cuda {numba_cuda} and numpy {numpy}".format(
            **_json("hot-7", "manifest.json")["versions"]
        ),
    ),
    "export: the header against its twin in hot-7's verify": ("export.md", _twin_range),
    "export: hot-7's losses are ties within the pass-to-pass noise": ("export.md", _hot7_ties),
    "export: pass-to-pass p95 of the three verifies": (
        "export.md",
        lambda: (
            f"p95 of {_movement('hot-7').quantile(0.95):.2f}% over all sizes, in aw-4's "
            f"{_movement('aw-4').quantile(0.95):.2f}%, in cold-6's "
            f"{_movement('cold-6').quantile(0.95):.2f}%"
        ),
    ),
    "export: the band's flat peak against its Numba twin": (
        "export.md",
        lambda: "that export read a median {:.3f}-{:.3f}x its Numba kernel's time".format(
            *_flat_peak_vs_numba().agg(["min", "max"])
        ),
    ),
    "export: hot-7's tolerance up to 1 MiB": (
        "export.md",
        lambda: f"hot-7's: {_tol_first('hot-7')}",
    ),
    "export: floored sizes": (
        "export.md",
        lambda: (
            f"{_json('hot-7', 'policy.json')['provenance']['floored_sizes']} in hot-7's "
            f"policy, {_json('aw-4', 'policy.json')['provenance']['floored_sizes']} in aw-4's"
        ),
    ),
    "export: hot-7's fp32 generic config": (
        "export.md",
        lambda: "In hot-7's policy fp32's is `{config}`, {worst:.3f}x torch".format(
            config=_json("hot-7", "policy.json")["dtypes"]["fp32"]["generic"]["config"],
            worst=_json("hot-7", "policy.json")["dtypes"]["fp32"]["generic"]["worst_ratio"],
        ),
    ),
    "export: where hot-7's fp32 turns to L2el75 loads": (
        "export.md",
        lambda: (
            f"`L2::evict_last` on 75% of the lines, from "
            f"{_band_from('hot-7', 'fp32', 'ld.L2el75')['lo_bytes'] / MIB:.1f} MiB"
        ),
    ),
    "export: aw-4's fp32 ld.lu band": (
        "export.md",
        lambda: "last use, over [{lo}, {hi}) MiB".format(
            lo=f"{_band_from('aw-4', 'fp32', 'ld.lu')['lo_bytes'] / MIB:.1f}",
            hi=_mib(_band_from("aw-4", "fp32", "ld.lu")["hi_bytes"]),
        ),
    ),
    "export: hot-7's sizes losing in both passes": (
        "export.md",
        lambda: (
            "below 1 in both passes ("
            + " and ".join(_mib(ws) for _, ws in _losing("hot-7", every=True))
            + " MiB"
        ),
    ),
    "export: verify.txt as quoted": (
        "export.md",
        lambda: (
            f"hot-7's [verify.txt](../results/h200/hot-7/verify.txt) (4 dtypes, "
            f"{_verify('hot-7').groupby(['dtype', 'ws_bytes']).ngroups} sizes, "
            f"{_verify('hot-7')['pass'].nunique()} passes)"
        ),
    ),
    "reading-a-report: hot-7's bands per dtype": (
        "reading-a-report.md",
        lambda: f"(hot-7: {_bands_per_dtype(', ')})",
    ),
    "reading-a-report: hot-7's verdict": ("reading-a-report.md", _hot7_losses),
    "reading-a-report: hot-7's pass-to-pass movement": (
        "reading-a-report.md",
        lambda: (
            f"(2 passes over {len(_movement('hot-7'))} sizes) the ratio moved between "
            f"passes by a {_movement_text('hot-7')}"
        ),
    ),
    "reading-a-report: hot-7's tolerance up to 1 MiB": (
        "reading-a-report.md",
        lambda: f"hot-7's is {_tol_first('hot-7')}",
    ),
    "hints-and-grids: hot-7's bands and configs": (
        "hints-and-grids.md",
        lambda: "{configs} configs over {bands} bands, {per}".format(
            configs=len({b["config"] for v in _bands("hot-7").values() for b in v}),
            bands=sum(len(v) for v in _bands("hot-7").values()),
            per=_bands_per_dtype(" and "),
        ),
    ),
    "requirements: the shipped runs' driver and versions": (
        "requirements.md",
        lambda: (
            "(`device.driver_version` {drv} in their manifests), nvcc 13.0 ({nvcc}), "
            "numba-cuda {nc} and torch {torch}".format(
                drv=_json("hot-7", "manifest.json")["device"]["driver_version"],
                nvcc=re.search(r"V[\d.]+", (RUNS / "hot-7" / "verify.txt").read_text()).group(0),
                nc=_json("hot-7", "manifest.json")["versions"]["numba_cuda"],
                torch=_json("hot-7", "manifest.json")["versions"]["torch"],
            )
        ),
    ),
}


@pytest.mark.parametrize("name", sorted(CLAIMS))
def test_a_figure_in_the_docs_is_what_the_run_files_say(name):
    doc, derive = CLAIMS[name]
    want = " ".join(derive().split())
    assert want in _doc(doc), f"docs/{doc} should say: {want}"


def test_the_claims_hold_for_every_shipped_run_they_name():
    """The wall-time and versions claims speak for all three runs: they agree."""
    versions = {r: _json(r, "manifest.json")["versions"] for r in ("hot-7", "aw-4", "cold-6")}
    assert len({json.dumps(v, sort_keys=True) for v in versions.values()}) == 1
    drivers = {_json(r, "manifest.json")["device"]["driver_version"] for r in versions}
    assert len(drivers) == 1
    assert "floored_sizes" not in _json("cold-6", "policy.json")["provenance"]
    # "The three shipped policies are built that way" (export.md): a tolerance per range
    assert all(_json(r, "policy.json")["provenance"].get("tolerance_by_range") for r in versions)
    assert "The three shipped policies are built that way" in _doc("export.md")
    assert "cold-6's is built without floors" in _doc("export.md")


def test_lines_quoted_from_verify_txt_are_in_it():
    """The verify.txt excerpt in docs/export.md is the shipped file's text, line for line."""
    text = (RUNS / "hot-7" / "verify.txt").read_text().splitlines()
    doc = (DOCS / "export.md").read_text()
    block = doc[doc.index("hot-7's [verify.txt]") :].split("\n\n")[1]
    quoted = [ln.strip() for ln in block.splitlines() if ln.strip() and ln.strip() != "..."]
    assert len(quoted) >= 5
    for line in quoted:
        if line.endswith("; ..."):
            assert any(t.startswith(line[: -len(" ...")]) for t in text), line
        else:
            assert line in text, line
