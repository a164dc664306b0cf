"""The pruning proof: does the search lose speed in the L2 band by not sweeping every config?

At the screening sizes inside (L2/2, L2] (sweeper.run.search.BAND_FRACTIONS), an exhaustive
run of the extended grid ranks every config; the fastest of them are then timed again beside
the shipped policy's exported dispatch, in two separate runs (passes), each config and the
policy against the baseline in the same run. The proof holds when no top config is more than
`--margin` faster than the policy in both passes. In order:

    python lab/tools/pruning_proof.py sizes sweeps/h200.json --dtypes fp32,bf16
        # prints one exhaustive `sweeper run` per screening size (GPU), e.g.
        # sweeper run sweeps/h200.json --grid extended --dtypes fp32,bf16 --quick \\
        #     --sizes 43.120:43.130 --run-id proof-ex-43.120
    python lab/tools/pruning_proof.py top EXHAUSTIVE_RUN... --k 10
        # prints the two passes' `sweeper run ... --configs TOP,policy-* --policy POLICY`
    python lab/tools/pruning_proof.py check EXHAUSTIVE_RUN... --passes PASS_1,PASS_2 --out proof.md
        # a pass timed in several runs joins their folders: P1A+P1B,P2A+P2B

`prove EXHAUSTIVE_RUN... --policy POLICY --root DIR` does the last two steps in one command on
the GPU: it times the two passes that `top` prints (run folders DIR/<gpu>/proof-p1, -p2) and
then checks them as `check` does, with the same table, verdict and exit status.

`leave-out RUN --fraction F` asks what one screening size contributes to a recorded run: the
survivors without it, the cells that would save, and how much speed the sweep would lose.

`check` exits 1 when a config beats the policy by more than the margin in every pass, and 2
when a pass lacks a cell the proof needs.
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd

from sweeper.analyze.store import load_run
from sweeper.api import parse_ws_range
from sweeper.errors import SweeperError
from sweeper.plan.planfile import load_plan
from sweeper.run.search import BAND_FRACTIONS, SearchParams, climb_moves, one_axis, screen_sizes
from sweeper.runfolder import POLICY_PREFIX
from sweeper.units import MiB

MARGIN = 0.02  # the bound: no config more than 2% faster than the policy in both passes
TOP = 5  # configs per size and dtype that the proof re-times


def band_sizes(plan, dtypes: list[str]) -> dict[str, list[dict]]:
    """dtype -> the plan entries at the in-band screening sizes."""
    out = {}
    for d in dtypes:
        entries = plan.sizes(d)
        ns = screen_sizes(entries, plan.l2_bytes, BAND_FRACTIONS)
        out[d] = [e for e in entries if e["n"] in ns]
    return out


def mib_range(lo_ws: int, hi_ws: int) -> str:
    """A `--sizes LO:HI` (MiB) just around working sets lo_ws..hi_ws bytes."""
    return f"{lo_ws / MiB - 0.005:.3f}:{hi_ws / MiB + 0.005:.3f}"


def size_ranges(plan_path: str, dtypes: list[str]) -> list[tuple[str, list[str]]]:
    """`--sizes LO:HI` ranges (MiB) that each hold one planned working set, with the dtypes
    whose screening size it is. Refuses a range that would hold a second planned size."""
    plan = load_plan(plan_path)
    by_ws: dict[int, list[str]] = {}
    for d, entries in band_sizes(plan, dtypes).items():
        for e in entries:
            by_ws.setdefault(e["working_set_bytes"], []).append(d)
    out = []
    for ws, ds in sorted(by_ws.items()):
        rng = mib_range(ws, ws)
        lo, hi = parse_ws_range(rng)  # what `sweeper run --sizes` will select
        inside = {
            e["working_set_bytes"]
            for d in ds
            for e in plan.sizes(d)
            if lo <= e["working_set_bytes"] <= hi
        }
        if inside != {ws}:
            raise SystemExit(f"--sizes {rng} holds {len(inside)} planned sizes, not one")
        out.append((rng, ds))
    return out


TABLE_COLUMNS = ["mode", "dtype", "n", "ws_bytes", "config", "status", "ratio", "ratio_lo",
                 "ratio_hi", "time_us"]  # fmt: skip


def is_table(path: str) -> bool:
    """Whether `path` names a table written by `table`, not a run folder."""
    return path.endswith(".csv.xz")


def _candidates(runs: list[str]) -> pd.DataFrame:
    """The ok candidate cells of run folders, or of tables written by `table` (.csv.xz)."""
    frames = []
    for r in runs:
        df = pd.read_csv(r).assign(role="candidate") if is_table(r) else load_run(r).results
        frames.append(df[(df["role"] == "candidate") & (df["status"] == "ok")])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def write_table(runs: list[str], out: str) -> int:
    """Every candidate cell of the exhaustive runs, TABLE_COLUMNS only, xz-compressed CSV:
    what `top`, `check` and `replay` read, small enough to keep beside the proof."""
    frames = [load_run(r).results for r in runs]
    df = pd.concat(frames, ignore_index=True)
    df = df[df["role"] == "candidate"].sort_values(["mode", "dtype", "n", "config"])
    data = df[TABLE_COLUMNS].to_csv(index=False, float_format="%.7g").encode()
    Path(out).write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    return len(df)


def replay_climb(
    exhaustive: list[str], params: SearchParams, trades: bool, top: int = TOP
) -> pd.DataFrame:
    """The search's climb replayed, size by size, on an exhaustive run's recorded ratios: from
    the default grid's configs, the neighbours (sweeper_kernels.Variant.neighbours; one-axis
    moves only unless `trades`) of every config near the best, round after round, as
    sweeper.run.search.climb_moves decides. Per mode, dtype and size: what the climb measured
    and the best it found, against the exhaustive best. The full search also sweeps every
    survivor of the other screening sizes at each size, so what the climb found is a floor."""
    from sweeper_kernels import GRIDS, Variant

    df = _candidates(exhaustive)
    df = df[~df["config"].str.startswith(POLICY_PREFIX)]
    out = []
    for (mode, dtype, n), g in df.groupby(["mode", "dtype", "n"], sort=True):
        ratio = dict(zip(g["config"], g["ratio"], strict=True))
        variant = {}

        def neighbours(config: str, dtype=dtype, variant=variant) -> list[str]:
            v = variant.setdefault(config, Variant.parse(f"{dtype}-{config}"))
            return [m.config for m in v.neighbours() if trades or one_axis(v, m)]

        def cell(c: str, n=n, ratio=ratio) -> dict:
            return {"role": "candidate", "status": "ok", "n": n, "config": c, "ratio": ratio[c]}

        rows = [cell(v.config) for v in GRIDS["default"]([dtype]) if v.config in ratio]
        rounds = 0
        while rounds < params.max_climb_rounds:
            moves = climb_moves(rows, neighbours, params).get(n, [])
            if not moves:
                break
            rounds += 1
            rows += [cell(c) for c in moves if c in ratio]
        found = max(rows, key=lambda r: r["ratio"])
        ranked = g.sort_values("ratio", ascending=False)
        measured = {r["config"] for r in rows}
        out.append(
            {"mode": mode, "dtype": dtype, "n": int(n), "ws_mib": g["ws_bytes"].iloc[0] / MiB,
             "cells": len(rows), "rounds": rounds, "found": found["config"],
             "found_ratio": found["ratio"], "best": ranked["config"].iloc[0],
             "best_ratio": float(ranked["ratio"].iloc[0]),
             "shortfall": 1 - found["ratio"] / float(ranked["ratio"].iloc[0]),
             "top_measured": int(ranked["config"].head(top).isin(measured).sum())}
        )  # fmt: skip
    return pd.DataFrame(out)


def drift(reference: str, passes: list[str]) -> dict:
    """How far a config's standing among the others moves between the reference run (e.g. the
    run the policy was built from) and the two passes, and between the two passes. At every
    mode, dtype and size that the reference and both passes measured, over the grid configs
    all three hold (at least 3): each config's log ratio minus the mean over those configs in
    the same run (which takes out the baseline's own drift); then |reference - mean of the
    passes| ("across runs") and |pass 1 - pass 2| ("between passes"), as fractions."""
    if len(passes) != 2:
        raise SystemExit("drift: name exactly two passes")
    keys = ["mode", "dtype", "n"]

    def log_ratios(run: str) -> pd.Series:
        df = _candidates([run])
        df = df[~df["config"].str.startswith(POLICY_PREFIX)]
        return np.log(df.groupby([*keys, "config"])["ratio"].mean())

    # one row per cell that all three measured; then per size, each run centred on its mean
    both = pd.concat([log_ratios(r) for r in (reference, *passes)], axis=1, join="inner")
    both.columns = ["ref", "p1", "p2"]
    both = both[both.groupby(level=keys)["ref"].transform("size") >= 3]
    both = both - both.groupby(level=keys).transform("mean")
    across = list(np.abs(both["ref"] - (both["p1"] + both["p2"]) / 2))
    between = list(np.abs(both["p1"] - both["p2"]))

    def stats(x: list[float]) -> dict:
        y = np.expm1(np.array(x))
        return {"median": float(np.median(y)), "p95": float(np.quantile(y, 0.95)),
                "max": float(y.max())}  # fmt: skip

    if not across:
        raise SystemExit("drift: the reference and the passes share no size with 3 configs")
    return {"configs_sizes": len(across), "across_runs": stats(across),
            "between_passes": stats(between)}  # fmt: skip


def leave_out(run: str, fraction: float, params: SearchParams | None = None) -> pd.DataFrame:
    """What one screening size contributes to a recorded run: its survivors decided again from
    the screening and climb cells without that size (the one nearest `fraction` x L2), the
    sweep and refinement cells that would save, and how far the best of those survivors then
    falls short of the run's best at each swept size (the worst size per mode and dtype)."""
    from sweeper.analyze.store import read_trials
    from sweeper.run.search import survivors

    params = params or SearchParams()
    trials, _ = read_trials(run)
    l2 = load_run(run).manifest["plan"]["l2_bytes"]
    out = []
    for key in sorted({(t["mode"], t["dtype"]) for t in trials}):
        rows = [t for t in trials if (t["mode"], t["dtype"]) == key]
        screen = [t for t in rows if t.get("phase") == "screen"]
        entries = [
            {"n": n, "working_set_bytes": w} for n, w in {(t["n"], t["ws_bytes"]) for t in screen}
        ]
        (gone,) = screen_sizes(entries, l2, (fraction,))
        keep = set(survivors(screen, params)[0])
        left = set(survivors([t for t in screen if t["n"] != gone], params)[0])
        swept = [
            t for t in rows
            if t["role"] == "candidate" and t["status"] == "ok" and t.get("phase") in ("sweep", "refine")
        ]  # fmt: skip
        best: dict[int, list[float]] = {}
        for t in swept:
            b = best.setdefault(t["ws_bytes"], [0.0, 0.0])
            b[0] = max(b[0], t["ratio"])
            if t["config"] in left:
                b[1] = max(b[1], t["ratio"])
        ws, (full, kept) = min(best.items(), key=lambda kv: kv[1][1] / kv[1][0])
        gone_ws = next(t["ws_bytes"] for t in screen if t["n"] == gone)
        out.append({
            "mode": key[0], "dtype": key[1], "left_out_mib": gone_ws / MiB,
            "survivors": len(keep), "survivors_without": len(left),
            "cells": len(swept), "cells_saved": sum(1 for t in swept if t["config"] not in left),
            "worst_ws_mib": ws / MiB, "best": full, "best_without": kept, "short": 1 - kept / full,
        })  # fmt: skip
    return pd.DataFrame(out)


def replay_markdown(tables: dict[str, pd.DataFrame], top: int = TOP) -> str:
    """One row per dtype and size, a column group per move set."""
    names = list(tables)
    head = ["dtype", "size", "exhaustive best"]
    for name in names:
        head += [f"{name}: cells", f"{name}: best found", f"{name}: short of best",
                 f"{name}: top {top} measured"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    first = tables[names[0]]
    for i, r in enumerate(first.to_dict("records")):
        cells = [r["dtype"], f"{r['ws_mib']:.4g} MiB", f"`{r['best']}` {r['best_ratio']:.3f}x"]
        for name in names:
            x = tables[name].iloc[i]
            cells += [str(x["cells"]), f"`{x['found']}` {x['found_ratio']:.3f}x",
                      f"{x['shortfall']:.1%}", str(x["top_measured"])]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def top_configs(exhaustive: list[str], k: int) -> pd.DataFrame:
    """The k fastest grid configs (by ratio to the baseline) per mode, dtype and size."""
    df = _candidates(exhaustive)
    df = df[~df["config"].str.startswith(POLICY_PREFIX)]
    df = df.sort_values(["mode", "dtype", "n", "ratio", "config"], ascending=[1, 1, 1, 0, 1])
    top = df.groupby(["mode", "dtype", "n"], sort=True).head(k)
    return top[["mode", "dtype", "n", "ws_bytes", "config", "ratio"]].reset_index(drop=True)


def pass_runs(exhaustive: list[str], k: int, policy: str, plan: str) -> list[dict]:
    """The two passes' `sweeper run` arguments (api.run keywords, the plan as `plan_path`):
    the extended grid's configs that are a top-k somewhere and the policy's dispatch, at the
    exhaustive runs' sizes, in their modes. `plan` is used for a table (.csv.xz), which does
    not record it; a run folder's manifest names its own."""
    best = top_configs(exhaustive, k)
    if is_table(exhaustive[0]):
        modes = sorted(set(best["mode"]))
    else:
        m = load_run(exhaustive[0]).manifest
        plan, modes = m["plan"]["path"], m["modes"]
    return [
        {"plan_path": plan, "grid": "extended", "dtypes": sorted(set(best["dtype"])),
         "modes": list(modes), "sizes": mib_range(best["ws_bytes"].min(), best["ws_bytes"].max()),
         "configs": [*sorted(set(best["config"])), f"{POLICY_PREFIX}*"], "policy": policy,
         "run_id": f"proof-p{i}"}
        for i in (1, 2)
    ]  # fmt: skip


def command_line(args: dict) -> str:
    """A pass as the `sweeper run` command that times it."""
    return (f"sweeper run {args['plan_path']} --grid {args['grid']} --dtypes "
            f"{','.join(args['dtypes'])} --modes {','.join(args['modes'])} --sizes "
            f"{args['sizes']} --configs '{','.join(args['configs'])}' --policy {args['policy']} "
            f"--run-id {args['run_id']}")  # fmt: skip


def check(
    exhaustive: list[str], passes: list[str], top: int, margin: float, policy: str | None
) -> tuple[pd.DataFrame, list[str]]:
    """Per top config: its ratio to the policy's dispatch (both against the baseline in the
    same pass) in each pass, and whether it beats the policy by more than `margin` in all."""
    best = top_configs(exhaustive, top)
    rows, missing = [], []
    per_pass = [_candidates(p.split("+")) for p in passes]
    for b in best.itertuples(index=False):
        row = {"mode": b.mode, "dtype": b.dtype, "n": b.n, "ws_mib": b.ws_bytes / MiB,
               "config": b.config, "exhaustive_ratio": b.ratio}  # fmt: skip
        for i, df in enumerate(per_pass, 1):
            at = df[(df["mode"] == b.mode) & (df["dtype"] == b.dtype) & (df["n"] == b.n)]
            pol = at[at["config"].str.startswith(POLICY_PREFIX)]
            if policy is not None:
                pol = pol[pol["config"] == policy]
            cfg = at[at["config"] == b.config]
            if len(pol) != 1 or len(cfg) != 1:
                what = "the policy" if len(pol) != 1 else b.config
                missing.append(f"{passes[i - 1]}: {b.dtype} {b.mode} n={b.n}: no cell of {what}")
                row[f"vs_policy_{i}"] = None
                continue
            row["policy"] = pol["config"].iloc[0]
            row[f"vs_policy_{i}"] = float(cfg["ratio"].iloc[0] / pol["ratio"].iloc[0])
        vs = [row.get(f"vs_policy_{i}") for i in range(1, len(passes) + 1)]
        row["faster_in_every_pass"] = all(v is not None and v > 1 + margin for v in vs)
        rows.append(row)
    return pd.DataFrame(rows), missing


def markdown(table: pd.DataFrame, passes: list[str], margin: float) -> str:
    head = ["dtype", "size", "config", "exhaustive", *[f"vs policy, pass {i}" for i in
            range(1, len(passes) + 1)], f"> {margin:.0%} in every pass"]  # fmt: skip
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in table.to_dict("records"):
        vs = [f"{r[f'vs_policy_{i}']:.3f}x" if r.get(f"vs_policy_{i}") is not None else "-"
              for i in range(1, len(passes) + 1)]  # fmt: skip
        lines.append(
            f"| {r['dtype']} | {r['ws_mib']:.4g} MiB | `{r['config']}` | "
            f"{r['exhaustive_ratio']:.3f}x | " + " | ".join(vs) + " | "
            f"{'**yes**' if r['faster_in_every_pass'] else 'no'} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    # options shared by subcommands (argparse parent parsers)
    exhaustive = argparse.ArgumentParser(add_help=False)
    exhaustive.add_argument("exhaustive", nargs="+")
    passes = argparse.ArgumentParser(add_help=False)  # the top-k passes
    passes.add_argument("--k", type=int, default=2 * TOP)
    passes.add_argument("--plan", default="sweeps/h200.json", help="the plan, for a .csv.xz table")
    verdict = argparse.ArgumentParser(add_help=False)  # the proof's table
    verdict.add_argument("--top", type=int, default=TOP)
    verdict.add_argument("--margin", type=float, default=MARGIN)
    out = argparse.ArgumentParser(add_help=False)
    out.add_argument("--out", default=None, help="write the table (.md) and its JSON beside it")
    s = sub.add_parser("sizes", help="print the exhaustive runs' commands")
    s.add_argument("plan")
    s.add_argument("--dtypes", default="fp32,bf16")
    s.add_argument("--mode", default="hot")
    t = sub.add_parser("top", parents=[exhaustive, passes],
                       help="print the passes' commands for the exhaustive runs' top k")  # fmt: skip
    t.add_argument("--policy", default="results/h200/hot-7/policy.json")
    c = sub.add_parser("check", parents=[exhaustive, verdict, out],
                       help="the proof's table and verdict")  # fmt: skip
    c.add_argument(
        "--passes", required=True,
        help="comma-separated passes; a pass timed in several runs joins their folders with +",
    )  # fmt: skip
    c.add_argument("--policy-config", default=None, help="policy-<run> (default: the one timed)")
    pr = sub.add_parser("prove", parents=[exhaustive, passes, verdict, out],
                        help="time the two passes on the GPU, then check them")  # fmt: skip
    pr.add_argument("--policy", required=True)
    pr.add_argument("--root", required=True, help="results root of the passes' run folders")
    w = sub.add_parser("table", parents=[exhaustive],
                       help="write the exhaustive runs' cells as one .csv.xz")  # fmt: skip
    w.add_argument("--out", required=True)
    sub.add_parser("replay", parents=[exhaustive, out],
                   help="the climb replayed on the exhaustive runs' ratios")  # fmt: skip
    lo = sub.add_parser("leave-out", help="what one screening size contributes to a run")
    lo.add_argument("run")
    lo.add_argument("--fraction", type=float, required=True, help="the size, as a fraction of L2")
    d = sub.add_parser("drift", help="how far configs' standing moves across runs and passes")
    d.add_argument("reference", help="the run the policy was built from")
    d.add_argument("--passes", required=True, help="two comma-separated pass run folders")
    a = ap.parse_args(argv)

    if a.cmd == "drift":
        doc = drift(a.reference, [p for p in a.passes.split(",") if p])
        print(
            f"{doc['configs_sizes']} config-size pairs; a config's ratio relative to the "
            "others, moved by"
        )
        for k in ("across_runs", "between_passes"):
            x = doc[k]
            print(f"  {k.replace('_', ' ')}: median {x['median']:.2%}, p95 {x['p95']:.2%}, "
                  f"max {x['max']:.2%}")  # fmt: skip
        return 0
    if a.cmd == "leave-out":
        print(f"{a.run} without its screening size nearest {a.fraction:g} x L2\n")
        print("| mode | dtype | left out | survivors | without it | sweep and refine cells | "
              "saved | worst size | best there | best without | short |")  # fmt: skip
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in leave_out(a.run, a.fraction).to_dict("records"):
            print(f"| {r['mode']} | {r['dtype']} | {r['left_out_mib']:.1f} MiB | {r['survivors']} | "
                  f"{r['survivors_without']} | {r['cells']} | {r['cells_saved']} | "
                  f"{r['worst_ws_mib']:.2f} MiB | {r['best']:.3f}x | {r['best_without']:.3f}x | "
                  f"{r['short']:.1%} |")  # fmt: skip
        return 0
    if a.cmd == "table":
        if not is_table(a.out):
            raise SystemExit(f"--out {a.out}: name a .csv.xz file")
        print(f"{write_table(a.exhaustive, a.out)} cells -> {a.out}")
        return 0
    if a.cmd == "replay":
        params = SearchParams()
        tables = {"one-axis moves": replay_climb(a.exhaustive, params, trades=False),
                  "with trades": replay_climb(a.exhaustive, params, trades=True)}  # fmt: skip
        text = replay_markdown(tables)
        print(text, end="")
        if a.out:
            Path(a.out).write_text(text)
            doc = {"exhaustive": a.exhaustive, "search": asdict(params),
                   **{k: v.to_dict("records") for k, v in tables.items()}}  # fmt: skip
            Path(a.out).with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
        return 0

    if a.cmd == "sizes":
        dtypes = a.dtypes.split(",")
        for rng, ds in size_ranges(a.plan, dtypes):
            tag = rng.split(":")[0]
            print(f"sweeper run {a.plan} --grid extended --dtypes {','.join(ds)} --modes "
                  f"{a.mode} --quick --sizes {rng} --run-id proof-ex-{tag}")  # fmt: skip
        return 0
    if a.cmd == "top":
        for args in pass_runs(a.exhaustive, a.k, a.policy, a.plan):
            print(command_line(args))
        return 0
    if a.cmd == "prove":
        from sweeper import api

        passes = []
        for args in pass_runs(a.exhaustive, a.k, a.policy, a.plan):
            print(command_line(args) + f" --root {a.root}", flush=True)
            try:
                passes.append(str(api.run(**args, out_root=a.root)))
            except SweeperError as e:  # a bad policy, plan or root: one line, nothing checked
                raise SystemExit(f"prove: {e}") from None
    else:
        passes = [p for p in a.passes.split(",") if p]
    policy_config = getattr(a, "policy_config", None)  # prove: the dispatch its passes timed
    table, missing = check(a.exhaustive, passes, a.top, a.margin, policy_config)
    text = markdown(table, passes, a.margin)
    beaten = int(table["faster_in_every_pass"].sum()) if len(table) else 0
    verdict = (
        f"{len(table)} top configs ({a.top} per dtype and size) against "
        f"{', '.join(sorted(set(table.get('policy', pd.Series(dtype=str)).dropna())))}: "
        f"{beaten} more than {a.margin:.0%} faster in every pass"
    )
    print(text + "\n" + verdict)
    if a.out:
        Path(a.out).write_text(text + "\n" + verdict + "\n")
        doc = {"exhaustive": a.exhaustive, "passes": passes, "top": a.top, "margin": a.margin,
               "missing": missing, "rows": table.to_dict("records")}  # fmt: skip
        Path(a.out).with_suffix(".json").write_text(json.dumps(doc, indent=1) + "\n")
    for line in missing:
        print(f"missing: {line}", file=sys.stderr)
    if missing:
        return 2
    return 1 if beaten else 0


if __name__ == "__main__":
    sys.exit(main())
