"""The first screen of REPORT.md: what to ship, how much faster than the baseline it is and
where, and the verdict on the user's targets.

The default targets are what a user of the exported files expects of them: never slower than
the baseline beyond noise, where a size fails only when the whole 95% CI of its ratio lies
below 1 in every verify pass (the rule `sweeper verify` applies, `timing_verdict`), and the
speedup per range of working set, stated, not graded. `sweeper report RUN --targets FILE`
grades the targets of FILE instead (`load_targets`). The project's own H200 targets are a
later section of the report (report.project_targets), whatever the user's are.

Each target is graded on verify's timing of the exported header where verify ran and has a
value for it, else on the run's own measurement of the policy's config at each size.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweeper.analyze.targets import METRICS, Target
from sweeper.dtypes import DTYPES
from sweeper.report.tables import md_table
from sweeper.runfolder import baseline_of, is_audit
from sweeper.units import fmt_bytes, fmt_mib

if TYPE_CHECKING:
    import pandas as pd

NEVER_SLOWER = "never slower than the baseline beyond noise"


def default_targets() -> list[Target]:
    """A user's targets when no file names any: the whole CI of the ratio is never below 1
    (on verify: at no size in every pass)."""
    return [Target(NEVER_SLOWER, tuple(DTYPES), 0, math.inf, "ratio_hi", 1.0, passes="any")]


# The ranges of working set the speedup is stated over, as fractions of the run's L2: on the
# H200's 60 MiB L2 the edges are the README's 8, 36, 52 and 240 MiB (4 x L2, the DRAM-bound
# sizes); on another GPU they scale with its L2.
RANGE_EDGES = (Fraction(2, 15), Fraction(3, 5), Fraction(13, 15), Fraction(4))


def ranges(l2_bytes: int) -> list[tuple[int, float, str]]:
    """(lo, hi, label) of each range of working set, [lo, hi) bytes, from the L2 size."""
    cuts = [int(l2_bytes * f) for f in RANGE_EDGES]
    names = [fmt_mib(c) for c in cuts]
    out: list[tuple[int, float, str]] = [(0, cuts[0], f"< {names[0]} MiB")]
    for i in range(len(cuts) - 1):
        out.append((cuts[i], cuts[i + 1], f"{names[i]}-{names[i + 1]} MiB"))
    out.append((cuts[-1], math.inf, f">= {names[-1]} MiB (4 x L2)"))
    return out


def ranges_text(l2_bytes: int) -> str:
    """How the ranges are derived, as the report says it."""
    fracs = ", ".join(str(f) for f in RANGE_EDGES[:-1])
    return (
        f"range of working set, [lo, hi) with the edges at {fracs} and 4 x the run's L2 "
        f"({fmt_bytes(l2_bytes)})"
    )


def range_ends(
    per_size: pd.DataFrame, l2_bytes: int, dtype: str
) -> list[tuple[str, tuple[float, float] | None]]:
    """Per range of working set (ranges), its label and the lowest and highest ratio of
    `dtype` there (`per_size`: one `ratio` per dtype and ws_bytes); None where the range holds
    no size."""
    s = per_size[per_size["dtype"] == dtype]
    out = []
    for lo, hi, label in ranges(l2_bytes):
        r = s["ratio"][(s["ws_bytes"] >= lo) & (s["ws_bytes"] < hi)].astype(float).dropna()
        out.append((label, (float(r.min()), float(r.max())) if len(r) else None))
    return out


def speedup_rows(per_size: pd.DataFrame, l2_bytes: int, dtypes: Sequence[str]) -> list[list[str]]:
    """Per dtype, the lowest-highest ratio in each range (range_ends); "-" where the range
    holds no size."""
    return [
        [d, *(f"{e[0]:.2f}-{e[1]:.2f}" if e else "-" for _, e in range_ends(per_size, l2_bytes, d))]
        for d in dtypes
    ]


def verified_ratios(vt: pd.DataFrame, mode: str) -> pd.DataFrame:
    """Verify's ratio at each (dtype, ws_bytes) of `mode`: the lowest of its passes."""
    v = vt[vt["mode"] == mode] if "mode" in vt else vt
    return v.groupby(["dtype", "ws_bytes"], as_index=False)["ratio"].min()


def run_ratios(results: pd.DataFrame, doc: Mapping[str, Any], mode: str) -> pd.DataFrame:
    """The run's own ratio of the policy's config at each size it measured it ok."""
    from sweeper.report.checks import policy_rows

    rows = policy_rows(results, dict(doc), mode)
    return rows[rows["status"] == "ok"]


def stale_verify(vt: pd.DataFrame, doc: Mapping[str, Any], mode: str) -> int:
    """How many of verify's rows of `mode` timed a config other than the policy's at that
    size (verify_timing.csv is then of another policy)."""
    from sweeper.analyze.policy import bands_from_policy
    from sweeper.report.tables import band_config

    bands = bands_from_policy(doc)
    v = vt[vt["mode"] == mode] if "mode" in vt else vt
    return sum(
        band_config(bands.get(d, []), int(ws)) != c
        for d, ws, c in zip(v["dtype"], v["ws_bytes"], v["config"], strict=True)
    )


def _link(name: str) -> str:
    return f"[`{name}`]({name})"


def _counted(counts: Mapping[str, int]) -> str:
    """ "7 for fp32, 8 for fp16 and 7 for int8"."""
    parts = [f"{n} for {d}" for d, n in counts.items()]
    if len(parts) < 2:
        return parts[0] if parts else "none"
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def ship(
    run_dir: Path, doc: Mapping[str, Any], manifest: Mapping[str, Any], dtypes: Sequence[str]
) -> list[str]:
    """What to ship: the exported files (checked to be this policy's export), the bands per
    dtype and the device they serve."""
    from sweeper.analyze.policy import merge_docs
    from sweeper.errors import SweeperError
    from sweeper.export import DEFAULT_NAMES, render
    from sweeper.export.verify import check_export
    from sweeper.runfolder import POLICY

    policy_path = (run_dir / POLICY).as_posix()
    uses = {
        "cuda": "CUDA C++: `launch_relu(in, out, n, stream)`",
        "python": "Python: `select_config(dtype, n, cc, l2_bytes, sm_count)`",
    }
    have, missing, other = [], [], []
    for fmt, use in uses.items():
        path = run_dir / DEFAULT_NAMES[fmt]
        if not path.exists():
            missing.append(f"`sweeper export {policy_path} --format {fmt}`")
            continue
        have.append(f"{_link(path.name)} ({use})")
        try:  # the file as `sweeper export` would write it now, its path comment aside
            check_export(path, render(merge_docs([dict(doc)], [policy_path]), fmt), "", fmt)
        except (SweeperError, KeyError, TypeError, ValueError, OSError):
            other.append((path.name, f"`sweeper export {policy_path} --format {fmt} --force`"))
    prov = doc.get("provenance") or {}
    policy = f"{_link(POLICY)} ({prov.get('mode', '-')} mode)"
    if len(have) > 1:
        text = " or ".join(have) + f", both the export of {policy}"
    elif have:
        text = f"{have[0]}, the export of {policy}"
    else:
        text = f"{policy}, not exported yet"
    bands = {d: len((doc.get("dtypes") or {})[d].get("bands") or []) for d in dtypes}
    text = (
        f"**What to ship.** {text}: bands of working set (2 x n x the item size) of one config "
        f"each, {_counted(bands)} ([Policy](#policy)). The bands serve the device they were "
        f"measured on, {_device(doc, manifest)}; any other device gets one generic config per "
        "dtype."
    )
    if missing:
        text += " To export: " + "; ".join(missing) + "."
    if other:
        one = len(other) == 1
        names = " and ".join(f"`{name}`" for name, _ in other)
        text += (
            f" **{names} {'is' if one else 'are'} not this policy's export** (edited, or of "
            "another policy): "
            + "; ".join(cmd for _, cmd in other)
            + " rewrites "
            + ("it." if one else "them.")
        )
    return [text, ""]


def _device(doc: Mapping[str, Any], manifest: Mapping[str, Any]) -> str:
    """The device a policy was measured on, "h200 (cc 9.0, L2 60 MiB, 132 SMs)": from the
    policy's provenance, else the run's manifest."""
    prov = doc.get("provenance") or {}
    dev = prov.get("device") or manifest.get("device") or {}
    cc = dev.get("cc") or doc.get("cc")
    parts = [f"cc {cc[0]}.{cc[1]}"] if isinstance(cc, (list, tuple)) and len(cc) == 2 else []
    parts.append(f"L2 {fmt_bytes(doc.get('l2_bytes') or dev.get('l2_bytes'))}")
    if dev.get("sm_count"):
        parts.append(f"{dev['sm_count']} SMs")
    return f"{prov.get('gpu') or manifest.get('gpu', '-')} ({', '.join(parts)})"


def grade(
    results: pd.DataFrame,
    doc: Mapping[str, Any],
    vt: pd.DataFrame | None,
    chosen: Sequence[Target],
    mode: str,
    l2_bytes: int,
    ceiling_gbps: float | None,
) -> list[dict]:
    """One entry per (target, dtype) of `mode`: the scorecard line it is graded on, verify's
    (`on` "verify") where verify has a value for it, else the run's (`on` "run")."""
    from sweeper.report.checks import scorecard, verify_scorecard

    card = scorecard(results, dict(doc), l2_bytes, mode, ceiling_gbps, chosen)
    vcard = verify_scorecard(vt, l2_bytes, mode, ceiling_gbps, chosen) if vt is not None else []
    ver = {(c["target"], c["dtype"]): c for c in vcard}
    out = []
    for c in card:
        v = ver.get((c["target"], c["dtype"]))
        out.append({**v, "on": "verify"} if v and v["ok"] is not None else {**c, "on": "run"})
    return out


SHOWN = 6  # failing sizes named per target in the summary; the detail sections list more


def target_result(entries: list[dict]) -> str:
    """One cell of a target table: met, n/a, or the failing dtypes and sizes."""
    if not entries:
        return "-"
    if all(c["ok"] is None for c in entries):
        return "n/a"
    failing = [c for c in entries if c["ok"] is False]
    na = [c["dtype"] for c in entries if c["ok"] is None]
    if not failing:
        return "met" + (f" ({', '.join(na)} n/a)" if na else "")
    parts = []
    for c in failing:
        sizes = ", ".join(f"{x:g}" for x in c["failing_mib"][:SHOWN])
        more = len(c["failing_mib"]) - SHOWN
        parts.append(f"{c['dtype']} at {sizes}" + (f", ... ({len(c['failing_mib'])} sizes)"
                                                  if more > 0 else ""))  # fmt: skip
    return "**no**: " + "; ".join(parts) + " MiB"


def _named_losses(failing: list[dict], values: Mapping[tuple[str, int], str]) -> list[str]:
    """ "fp32 12.24 MiB (0.992x [0.991, 0.993]; 0.980x [0.979, 0.984])" for each failing size
    of the graded entries, `values` giving the ratios by (dtype, ws_bytes)."""
    return [
        f"{c['dtype']} {fmt_bytes(ws)} ({values.get((c['dtype'], ws), '-')})"
        for c in failing
        for ws in c.get("failing_ws", [])
    ]


def verify_values(vt: pd.DataFrame, mode: str) -> dict[tuple[str, int], str]:
    """Each size's ratio with its CI in every verify pass, as `sweeper verify` prints them."""
    from sweeper.analyze.verdict import pass_values, size_groups

    v = vt[vt["mode"] == mode] if "mode" in vt else vt
    groups = size_groups(v.to_dict("records"))
    return {(d, int(ws)): "; ".join(pass_values({"passes": g}, "ratio"))
            for (d, ws), g in groups.items()}  # fmt: skip


def run_values(results: pd.DataFrame, doc: Mapping[str, Any], mode: str) -> dict:
    """The run's ratio with its CI of the policy's config at each size."""
    rows = run_ratios(results, doc, mode)
    cols = [rows[c] for c in ("dtype", "ws_bytes", "ratio", "ratio_lo", "ratio_hi")]
    return {(d, int(ws)): f"{r:.3f}x [{lo:.3f}, {hi:.3f}]"
            for d, ws, r, lo, hi in zip(*cols, strict=True)}  # fmt: skip


def _passes(n: int) -> str:
    return "both of verify's passes" if n == 2 else f"every one of verify's {n} passes"


def verdict_lines(
    run_dir: Path,
    manifest: Mapping[str, Any],
    results: pd.DataFrame,
    doc: Mapping[str, Any],
    vt: pd.DataFrame | None,
    verify: dict | None,
    chosen: Sequence[Target] | None = None,
    source: str | None = None,
    stale: int = 0,
) -> list[str]:
    """The verdict on the user's targets (`chosen`, from `source`; None: default_targets),
    graded on verify's timing (`vt`, `verify`: its timing_verdict; None when not verified or
    `stale`: verify_timing.csv of another policy at that many size-passes) where it has a
    value, else on the run's measurements; for a targets file, its table."""
    from sweeper.runfolder import POLICY

    mode = (doc.get("provenance") or {}).get("mode", "hot")
    l2 = int(doc.get("l2_bytes") or manifest["device"]["l2_bytes"])
    ceiling = (manifest.get("ceiling") or {}).get("gbps")
    base = baseline_of(manifest)
    own = chosen is not None
    targets = list(chosen) if own else default_targets()
    graded = grade(results, doc, vt, targets, mode, l2, ceiling)
    checked = [c for c in graded if c["ok"] is not None]
    failing = [c for c in checked if c["ok"] is False]
    on_verify = any(c["on"] == "verify" for c in checked)
    passes = int((verify or {}).get("passes") or 0)
    said = []
    if not own:
        n = sum(c["sizes"] for c in checked)
        if on_verify:
            rule = f"the whole 95% CI of the ratio below 1 in {_passes(passes)}"
            values = verify_values(vt, mode)
        else:
            rule = "the whole 95% CI of the ratio below 1 in the run's own measurement"
            values = run_values(results, doc, mode)
        named = _named_losses(failing, values)
        if named:
            more = f"; ... ({len(named)} in all)" if len(named) > SHOWN else ""
            said.append(
                f"Slower than {base} beyond noise at {len(named)} of {n} sizes, each a loss "
                f"({rule}): " + "; ".join(named[:SHOWN]) + more
            )
        else:
            said.append(f"Never slower than {base} beyond noise: none of {n} sizes loses ({rule})")
        losses = ((verify or {}).get("baseline_losses") or []) if on_verify and named else []
        ties = sum(1 for r in losses if r.get("within_noise"))
        if ties:
            said.append(
                f"{ties} of the sizes verify lists as losses are within its pass-to-pass noise: "
                f"a tie with {base} read below 1 in {_passes(passes)} ([Verify](#verify))"
            )
        some = len((verify or {}).get("unrepeated_losses") or []) if on_verify else 0
        if some:
            only = "one pass" if passes == 2 else "some passes"
            sizes = "size loses" if some == 1 else "sizes lose"
            said.append(f"{some} more {sizes} in {only} only ([Verify](#verify))")
        said.append(
            "The speedup above is stated, not graded. These are the default targets; "
            "`sweeper report RUN --targets FILE` grades yours instead, and the project's H200 "
            "targets are under [Project targets](#project-targets)"
        )
    else:
        said.append(
            f"{len(failing)} of {len(checked)} checks of your targets fail"
            if failing
            else f"All {len(checked)} checks of your targets are met"
        )
        said[-1] += (
            f" ({source}), graded on "
            + ("verify's timing of the exported header" if on_verify else "the run's measurements")
            + (
                " and, where verify has no value, on the run's"
                if on_verify and any(c["on"] == "run" for c in checked)
                else ""
            )
        )
    wrong = (verify or {}).get("bit_failures") or []
    if wrong:
        said.append(
            f"The exported header is **not bit-exact** after timing in {len(wrong)} case(s)"
        )
    missing = []
    again = f"`sweeper verify {(run_dir / POLICY).as_posix()}` on a GPU"
    if stale:
        missing.append(
            f"`verify_timing.csv` is of another policy ({stale} size-passes timed another config): "
            f"{again} times this one"
        )
    elif vt is None:
        missing.append(
            f"not verified: {again} times the exported header in passes, and a size then fails "
            "only where it loses in every pass"
        )
    if manifest.get("status") not in (None, "complete"):
        missing.append(f"the run is {manifest['status']}")
    if manifest.get("open_brackets"):
        missing.append("a band boundary is bracketed more widely than the plan resolution")
    word = "fail" if failing or wrong else ("incomplete" if missing else "pass")
    sentences = said + ([missing[0][0].upper() + "; ".join(missing)[1:]] if missing else [])
    out = [f"**Verdict: {word}.** " + ". ".join(sentences) + ".", ""]
    if own:
        rows = []
        for t in targets:
            entries = [c for c in graded if c["target"] == t.name]
            if entries:
                rule = (
                    f"{METRICS.get(t.metric, t.metric)} >= {t.floor:g}, {t.sizes_text()}, "
                    + "/".join(c["dtype"] for c in entries)
                )
                on = {c["on"] for c in entries if c["ok"] is not None}
                rows.append((t.name, rule, target_result(entries), _on(on, passes)))
        out += md_table(("target", "rule", "result", "graded on"), rows) + [""]
        idle = [t.name for t in targets if not any(c["target"] == t.name for c in graded)]
        if idle:
            out += [f"Not applicable to this run's mode and dtypes: {'; '.join(idle)}.", ""]
    return out


def _on(on: set, passes: int) -> str:
    names = []
    if "verify" in on:
        names.append(f"verify ({passes} pass{'es' if passes != 1 else ''})")
    if "run" in on:
        names.append("the run")
    return ", ".join(names) or "-"


def first_screen(
    run_dir: Path,
    manifest: Mapping[str, Any],
    results: pd.DataFrame,
    doc: Mapping[str, Any] | None,
    vt: pd.DataFrame | None,
    verify: dict | None,
    chosen: Sequence[Target] | None = None,
    source: str | None = None,
) -> list[str]:
    """Everything above the report's first section: what to ship, the speedup per dtype and
    range of working set, and the verdict on the user's targets (`chosen`, from `source`;
    None: default_targets). Nothing for an audit (report.build_report leads with its
    cliff)."""
    from sweeper.runfolder import POLICY

    if is_audit(manifest):
        return []
    if doc is None:
        return [
            "**Verdict: incomplete.** No policy yet, so nothing to ship or grade: "
            f"`sweeper policy build {run_dir.as_posix()}` builds {POLICY}.",
            "",
        ]
    mode = (doc.get("provenance") or {}).get("mode", "hot")
    l2 = int(doc.get("l2_bytes") or manifest["device"]["l2_bytes"])
    base = baseline_of(manifest)
    stale = stale_verify(vt, doc, mode) if vt is not None else 0
    if stale:
        vt = verify = None
    dtypes = sorted(doc.get("dtypes") or {}, key=lambda d: (DTYPES.index(d) if d in DTYPES
                                                            else len(DTYPES), d))  # fmt: skip
    if vt is not None:
        passes = int((verify or {}).get("passes") or vt.get("pass", [1]).nunique())
        per_size = verified_ratios(vt, mode)
        lower = "lower" if passes == 2 else "lowest"
        what = (
            f"the exported header's ratio to {base} as `sweeper verify` timed it, the {lower} "
            f"of its {passes} passes at each size"
        )
    else:
        per_size = run_ratios(results, doc, mode)
        what = f"not verified: the run's own ratio to {base} of the policy's config at each size"
    names = [name for _, _, name in ranges(l2)]
    return [
        *ship(run_dir, doc, manifest, dtypes),
        f"**How much faster than {base}, where** ({mode} mode): {what}, lowest-highest per "
        f"{ranges_text(l2)}.",
        "",
        *md_table(("dtype", *names), speedup_rows(per_size, l2, dtypes), "-" + "r" * len(names)),
        "",
        *verdict_lines(run_dir, manifest, results, doc, vt, verify, chosen, source, stale),
    ]
