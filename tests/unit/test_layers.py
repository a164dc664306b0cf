"""The import graph of sweeper/ and kernels/ runs one way: every module sits in one layer and
imports only modules of its own layer or lower ones, and no set of modules imports itself in a
cycle. Every import counts, at the top of a file or inside a function (a lazy import is still a
dependency), with relative imports resolved and `sweeper_kernels` read as the kernels/ folder."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).parents[2]

# Lowest first. A module may import modules of its own layer and of the layers before it.
LAYERS: list[tuple[str, list[str]]] = [
    (
        "kernels",  # the Numba variants; never imports sweeper
        [
            "kernels",
            "kernels.adversarial",
            "kernels.bitmath",
            "kernels.build",
            "kernels.dtypes",
            "kernels.errors",
            "kernels.external",
            "kernels.hints",
            "kernels.intrinsics",
            "kernels.launch",
            "kernels.launchers",
            "kernels.ops",
            "kernels.ops.builtin",
            "kernels.ops.core",
            "kernels.ops.host",
            "kernels.ops.reference",
            "kernels.ptxcheck",
            "kernels.reference",
            "kernels.scan",
            "kernels.source",
            "kernels.toolkit",
            "kernels.variants",
        ],
    ),
    (
        "core",  # names, errors, units and file formats every stage shares
        [
            "sweeper",
            "sweeper.devices",
            "sweeper.dtypes",
            "sweeper.errors",
            "sweeper.files",
            "sweeper.ops",
            "sweeper.records",
            "sweeper.runfolder",
            "sweeper.schema",
            "sweeper.slices",
            "sweeper.stats",
            "sweeper.units",
        ],
    ),
    (
        "plan",
        [
            "sweeper.plan",
            "sweeper.plan.gpus",
            "sweeper.plan.ladder",
            "sweeper.plan.planfile",
        ],
    ),
    (
        "analyze",
        [
            "sweeper.analyze",
            "sweeper.analyze.bands",
            "sweeper.analyze.ceilings",
            "sweeper.analyze.cliff",
            "sweeper.analyze.columns",
            "sweeper.analyze.gpuwork",
            "sweeper.analyze.modegain",
            "sweeper.analyze.policy",
            "sweeper.analyze.position",
            "sweeper.analyze.select",
            "sweeper.analyze.spread",
            "sweeper.analyze.store",
            "sweeper.analyze.targets",
            "sweeper.analyze.verdict",
        ],
    ),
    (
        "export",
        [
            "sweeper.export",
            "sweeper.export.cuda",
            "sweeper.export.native",
            "sweeper.export.python",
            "sweeper.export.sass",
            "sweeper.export.torch_op",
            "sweeper.export.verify",
        ],
    ),
    (
        "run",
        [
            "sweeper.run",
            "sweeper.run.clocks",
            "sweeper.run.dispatch",
            "sweeper.run.executor",
            "sweeper.run.batched",
            "sweeper.run.external",
            "sweeper.run.fresh",
            "sweeper.run.fresh_kernels",
            "sweeper.run.pool",
            "sweeper.run.fleet",
            "sweeper.run.campaign",
            "sweeper.run.replay",
            "sweeper.run.runner",
            "sweeper.run.search",
            "sweeper.run.timers",
            "sweeper.run.verify",
        ],
    ),
    (
        "report",
        [
            "sweeper.report",
            "sweeper.report.checks",
            "sweeper.report.pairing",
            "sweeper.report.plots",
            "sweeper.report.report",
            "sweeper.report.summary",
            "sweeper.report.tables",
        ],
    ),
    ("api", ["sweeper.api"]),
    ("cli", ["sweeper.cli", "sweeper.__main__"]),
]

# The folder each top-level import name lives in.
PACKAGES = {"sweeper": "sweeper", "sweeper_kernels": "kernels"}


def modules(root: Path, packages: dict[str, str]) -> dict[str, Path]:
    """Dotted module name (named after its folder: kernels.launch) -> file."""
    found = {}
    for folder in packages.values():
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _target(name: str, known: dict[str, Path], packages: dict[str, str]) -> str | None:
    """The module an imported dotted name lands in (its longest known prefix), or None for a
    name outside our packages."""
    head, _, rest = name.partition(".")
    if head in packages:
        name = packages[head] + ("." + rest if rest else "")
    elif head not in packages.values():
        return None
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(root: Path, packages: dict[str, str] = PACKAGES) -> dict[str, list[tuple[str, str]]]:
    """module -> [(imported module, "file:line")], every import statement in the file."""
    known = modules(root, packages)
    graph: dict[str, list[tuple[str, str]]] = {}
    for mod, path in known.items():
        edges = []
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    pkg = mod.split(".") if is_package else mod.split(".")[:-1]
                    pkg = pkg[: len(pkg) - (node.level - 1)]
                    base = ".".join(pkg + ([base] if base else []))
                # `from pkg import mod` imports the module pkg.mod; `from mod import name`
                # imports mod
                names = [f"{base}.{a.name}" for a in node.names]
            where = f"{path.relative_to(root)}:{getattr(node, 'lineno', 0)}"
            for name in names:
                target = _target(name, known, packages)
                if target and target != mod and (target, where) not in edges:
                    edges.append((target, where))
        graph[mod] = edges
    return graph


def unassigned(graph: dict, layers: list[tuple[str, list[str]]]) -> list[str]:
    listed = [m for _, mods in layers for m in mods]
    twice = sorted({m for m in listed if listed.count(m) > 1})
    return (
        [f"{m}: in no layer" for m in sorted(set(graph) - set(listed))]
        + [f"{m}: in more than one layer" for m in twice]
        + [f"{m}: in a layer but no such module" for m in sorted(set(listed) - set(graph))]
    )


def back_edges(graph: dict, layers: list[tuple[str, list[str]]]) -> list[str]:
    rank = {m: (i, name) for i, (name, mods) in enumerate(layers) for m in mods}
    bad = []
    for mod, edges in sorted(graph.items()):
        for target, where in edges:
            if mod in rank and target in rank and rank[target][0] > rank[mod][0]:
                bad.append(f"{where}: {mod} ({rank[mod][1]}) imports {target} ({rank[target][1]})")
    return bad


def cycles(graph: dict) -> list[str]:
    """Each strongly connected component of more than one module, with its edges (file:line)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    out = []
    for comp in found:
        inside = sorted(
            f"{where}: {m} imports {t}" for m in comp for t, where in graph[m] if t in comp
        )
        out.append(f"cycle {comp}: " + "; ".join(inside))
    return out


def test_every_module_is_in_exactly_one_layer():
    problems = unassigned(imports(ROOT), LAYERS)
    assert not problems, "\n".join(problems)


def test_no_module_imports_a_higher_layer():
    problems = back_edges(imports(ROOT), LAYERS)
    assert not problems, "\n".join(problems)


def test_no_import_cycle():
    problems = cycles(imports(ROOT))
    assert not problems, "\n".join(problems)


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def test_the_checks_see_a_lazy_back_edge_a_relative_import_and_a_cycle(tmp_path):
    root = _tree(
        tmp_path,
        {
            "sweeper/__init__.py": "",
            "sweeper/low.py": "def f():\n    from sweeper.top import g\n",
            "sweeper/top.py": "",
            "sweeper/high.py": "from . import low\nfrom .mid import h\n",
            "sweeper/mid.py": "import sweeper.high\n",
            "sweeper/new.py": "",
            "kernels/__init__.py": "",
            "kernels/k.py": "from sweeper_kernels import j\nimport numpy\n",
            "kernels/j.py": "import sweeper\n",
        },
    )
    graph = imports(root)
    assert sorted(graph["sweeper.high"]) == [
        ("sweeper.low", "sweeper/high.py:1"),
        ("sweeper.mid", "sweeper/high.py:2"),
    ]
    assert graph["kernels.k"] == [("kernels.j", "kernels/k.py:1")]
    layers = [
        ("kernels", ["kernels", "kernels.j", "kernels.k"]),
        ("low", ["sweeper", "sweeper.low"]),
        ("high", ["sweeper.high", "sweeper.mid", "sweeper.top"]),
    ]
    assert unassigned(graph, layers) == ["sweeper.new: in no layer"]
    assert unassigned(
        graph, [*layers, ("again", ["sweeper.new", "kernels.j", "sweeper.gone"])]
    ) == [
        "kernels.j: in more than one layer",
        "sweeper.gone: in a layer but no such module",
    ]
    assert back_edges(graph, layers) == [
        "kernels/j.py:1: kernels.j (kernels) imports sweeper (low)",
        "sweeper/low.py:2: sweeper.low (low) imports sweeper.top (high)",
    ]
    assert cycles(graph) == [
        "cycle ['sweeper.high', 'sweeper.mid']: sweeper/high.py:2: sweeper.high imports "
        "sweeper.mid; sweeper/mid.py:1: sweeper.mid imports sweeper.high"
    ]
