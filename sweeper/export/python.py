"""The policy as a runtime JSON document and as a dependency-free Python module."""

from __future__ import annotations

import json
import re

from sweeper.analyze.policy import FALLBACK_RULE
from sweeper.export.cuda import template
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


_PYTHON_WORDS = {"null": "None", "true": "True", "false": "False"}
# a JSON string (kept as it is) or one of JSON's three words outside strings
_JSON_TOKEN = re.compile(r'"(?:\\.|[^"\\])*"|\b(?:null|true|false)\b')


def python_literal(value) -> str:
    """JSON data as Python source: json.dumps's layout (indent 1, sorted keys), with null,
    true and false written None, True and False outside strings only (a GPU or run named
    "true-1" keeps its name)."""
    text = json.dumps(value, indent=1, sort_keys=True)
    return _JSON_TOKEN.sub(lambda m: _PYTHON_WORDS.get(m[0], m[0]), text)


def render_python(doc: dict) -> str:
    """The module of templates/relu_policy.py.tmpl with the runtime document inlined."""
    text = python_literal(runtime_doc(doc))
    return template("relu_policy.py.tmpl").substitute(
        fallback=" > ".join(FALLBACK_RULE), differs=get_op("relu").differs, policy=text
    )
