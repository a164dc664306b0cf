"""The table of table.txt: every run's candidate ratios under /tmp/runs/h200, pivoted by size,
kernel and pass, and their medians (run on the GPU machine after the runs of provenance.json;
table.txt adds a header saying what the columns are)."""

from pathlib import Path

import pandas as pd

from sweeper.analyze.store import load_run

rows = []
for d in sorted(Path("/tmp/runs/h200").iterdir()):
    df = load_run(d).results
    c = df[df.role == "candidate"]
    rows.append(c.assign(run=d.name)[["run", "ws_bytes", "config", "ratio", "status"]])
t = pd.concat(rows)
t["k"] = t.run.str.rsplit("-", n=1).str[0]
t["p"] = t.run.str.rsplit("-", n=1).str[1]
t["cfg"] = t.config.where(t.config.str.startswith("ext-"), "floor-flat32").str.split("-b").str[0]
pd.set_option("display.width", 220)
print(t.pivot_table(index="ws_bytes", columns=["cfg", "p"], values="ratio").round(3).to_string())
print(t.groupby(["cfg", "p"]).ratio.median().round(4).unstack().to_string())
print("not ok:", (t.status != "ok").sum())
