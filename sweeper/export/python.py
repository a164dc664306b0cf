"""The policy as a runtime JSON document and as a dependency-free Python module."""

from __future__ import annotations

import json
from importlib.resources import files
from string import Template

from sweeper.analyze.policy import FALLBACK_RULE
from sweeper.ops import get_op

# ---- JSON and Python ------------------------------------------------------------------------


def runtime_doc(doc: dict) -> dict:
    """The minimal form a runtime loader needs: configs, entries of bands, the generic config
    per dtype, fallback rule."""
    return {
        "format": "sweeper-relu-policy-runtime",
        "version": 2,
        "bands_in": "working set (2 * n * itemsize) / l2CacheSize; band = first with rel < below",
        "fallback": list(doc["fallback"]),
        "configs": doc["configs"],
        "generic": dict(doc.get("generic", {})),
        "entries": [
            {
                "cc": e["cc"],
                "l2_bytes": e["l2_bytes"],
                "sm_count": e.get("sm_count"),
                "gpu": e["gpu"],
                "run_ids": e["source"].get("run_ids", []),
                "dtypes": {
                    dt: [{"below": b["hi_rel"], "config": b["config"]} for b in d["bands"]]
                    for dt, d in e["dtypes"].items()
                },
            }
            for e in doc["entries"]
        ],
    }


def render_python(doc: dict) -> str:
    """The module of templates/relu_policy.py.tmpl with the runtime document inlined."""
    rt = runtime_doc(doc)
    text = json.dumps(rt, indent=1, sort_keys=True)
    text = text.replace("null", "None").replace("true", "True").replace("false", "False")
    template = Template(
        (files("sweeper.export") / "templates" / "relu_policy.py.tmpl").read_text(encoding="utf-8")
    )
    return template.substitute(
        fallback=" > ".join(FALLBACK_RULE), differs=get_op("relu").differs, policy=text
    )
