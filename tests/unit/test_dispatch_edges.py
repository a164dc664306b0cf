"""Both exported dispatchers serve the policy's bands at every band edge of the shipped
policies: one element below each edge, at it and above it, the generated Python module
(`relu_policy.py`) and the CUDA header (`relu_policy.cuh`, its host-side band choice compiled
with nvcc and run on the CPU) name the config the policy's own lookup names. A band holds the
working sets [lo_bytes, hi_bytes): an edge belongs to the band above it.

The header's dispatch (which launches) and its choice function (which names) are generated
apart; the last test holds them to the same thresholds and configs, so the choice run here
speaks for the launch."""

from __future__ import annotations

import importlib.util
import json
import math
import re
import subprocess
from pathlib import Path

import pytest
from sweeper_kernels.toolkit import find_tool

from sweeper.analyze.policy import bands_from_policy, config_at, load_any, load_policy
from sweeper.dtypes import ITEMSIZE
from sweeper.errors import SweeperError
from sweeper.export import render
from sweeper.export.cuda import _ident
from sweeper.report.tables import band_config

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ("hot-7", "aw-4", "cold-6")
HUGE_N = 1 << 40  # far into the open last band (a 2 TiB-and-more working set)


def _policy(run: str) -> tuple[dict, dict]:
    """(the run's policy.json, its merged form: what the exports render)."""
    path = ROOT / "results/h200" / run / "policy.json"
    return load_policy(path), load_any(path)


def _edge_probes(doc: dict) -> list[tuple[str, int]]:
    """(dtype, n) for one element below, at and above each band edge, and n = 0, 1 and HUGE_N
    (the outer ends)."""
    out = []
    for dt, d in doc["dtypes"].items():
        per = 2 * ITEMSIZE[dt]  # working-set bytes per element
        out += [(dt, 0), (dt, 1), (dt, HUGE_N)]
        for b in d["bands"][:-1]:
            at, rest = divmod(b["hi_bytes"], per)
            assert rest == 0, f"{dt} edge {b['hi_bytes']} is not a whole element count"
            out += [(dt, at - 1), (dt, at), (dt, at + 1)]
    return out


def _expected(doc: dict) -> dict[tuple[str, int], str]:
    """(dtype, n) -> the policy's config: its byte bands and its relative bands (the lookup
    policy merging uses) must agree, and each edge must part two configs."""
    l2 = doc["l2_bytes"]
    byte_bands = bands_from_policy(doc)
    want = {}
    for dt, n in _edge_probes(doc):
        ws = 2 * n * ITEMSIZE[dt]
        by_bytes = band_config(byte_bands[dt], ws)
        assert by_bytes == config_at(doc["dtypes"][dt]["bands"], ws / l2), (dt, n)
        want[(dt, n)] = by_bytes
    for dt, d in doc["dtypes"].items():
        for k, b in enumerate(d["bands"][:-1]):
            at = b["hi_bytes"] // (2 * ITEMSIZE[dt])
            assert want[(dt, at - 1)] == b["config"]
            assert want[(dt, at)] == d["bands"][k + 1]["config"] != b["config"]
    return want


@pytest.mark.parametrize("run", POLICIES)
def test_the_python_export_serves_the_policy_at_every_band_edge(run, tmp_path):
    doc, merged = _policy(run)
    (entry,) = merged["entries"]
    path = tmp_path / f"relu_policy_{run.replace('-', '_')}.py"
    path.write_text(render(merged, "python"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    device = (tuple(entry["cc"]), entry["l2_bytes"], entry["sm_count"])
    assert device == (tuple(doc["cc"]), doc["l2_bytes"], doc["provenance"]["device"]["sm_count"])
    got = {}
    for dt, n in _expected(doc):
        name, fields = mod.select_config(dt, n, *device)
        assert fields == doc["configs"][name]
        got[(dt, n)] = name
    assert got == _expected(doc)


def _edges_function(doc: dict, probes: list[tuple[str, int]]) -> str:
    """A host function that prints the header's choice (entry 0) for each (dtype, n), one a
    line; it reads no device: DeviceInfo carries the L2 size."""
    lines = [
        "static void edges() {",
        "  sweeper_relu::detail::DeviceInfo d;",
        f"  d.l2 = {doc['l2_bytes']}LL;",
    ]
    lines += [f"  std::puts(sweeper_relu::detail::choice_e0_{dt}({n}ull, d));" for dt, n in probes]
    return "\n".join([*lines, "}", ""])


@pytest.fixture(scope="module")
def host_program(tmp_path_factory):
    """run -> (its header, a host program built once with nvcc: `prog edges` prints the
    header's choice at each band edge probe (_expected's order), `prog pick` the entry
    pick_entry takes for each device case of _generic_case and dtype)."""
    from sweeper.dtypes import DTYPES

    built: dict[str, tuple[str, Path]] = {}

    def build(run: str) -> tuple[str, Path]:
        if run in built:
            return built[run]
        doc, merged = _policy(run)
        d = tmp_path_factory.mktemp(f"host-{run}")
        header = render(merged, "cuda")
        (d / "relu_policy.cuh").write_text(header)
        calls = [
            f'  std::printf("%d\\n", sweeper_relu::detail::pick_entry(keys, count, {i}, '
            f"{cc[0]}, {cc[1]}, {l2}LL, {sms}));"
            for (cc, l2, sms) in _generic_case(doc).values()
            for i in range(len(DTYPES))
        ]
        (d / "host.cu").write_text(
            '#include "relu_policy.cuh"\n#include <cstdio>\n#include <cstring>\n'
            + _edges_function(doc, list(_expected(doc)))
            + "static void pick() {\n  int count = 0;\n"
            "  const sweeper_relu::detail::EntryKey* keys = "
            "sweeper_relu::detail::entry_keys(&count);\n"
            + "\n".join(calls)
            + "\n}\nint main(int argc, char** argv) {\n"
            '  if (argc > 1 && std::strcmp(argv[1], "edges") == 0) edges(); else pick();\n'
            "  return 0;\n}\n"
        )
        r = subprocess.run(
            [find_tool("nvcc"), "-std=c++17", "host.cu", "-o", "host"],
            cwd=d,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert r.returncode == 0, r.stderr[-4000:]
        built[run] = (header, d / "host")
        return built[run]

    return build


@pytest.mark.needs_tool("nvcc")
@pytest.mark.xdist_group("host-program")  # one worker builds each run's program once
@pytest.mark.parametrize("run", POLICIES)
def test_the_cuda_header_serves_the_policy_at_every_band_edge(run, host_program):
    doc, _ = _policy(run)
    want = _expected(doc)
    probes = list(want)
    _, prog = host_program(run)
    out = subprocess.run([str(prog), "edges"], capture_output=True, text=True, check=True)
    got = dict(zip(probes, out.stdout.splitlines(), strict=True))
    assert got == want


_FUNC = re.compile(
    r"^inline (?:cudaError_t dispatch|const char\* choice)_e(\d+)_(\w+)\([^)]*\) \{\n(.*?)^\}$",
    re.M | re.S,
)
_STEP = re.compile(
    r'^  (?:if \(rel < ([0-9.e+-]+)\) )?return (?:V_(\w+)::launch<[^;]*|"([^"]+)");$', re.M
)


def _bands_in(body: str) -> tuple[str, list[tuple[float | None, str]]]:
    """A dispatch or choice function's working-set line and its (threshold, config) steps."""
    (rel_line,) = re.findall(r"^  const double rel = .*$", body, re.M)
    steps = [(None if t == "" else float(t), v or _ident(c)) for t, v, c in _STEP.findall(body)]
    return rel_line, steps


@pytest.mark.parametrize("run", POLICIES)
def test_the_header_launches_the_config_its_choice_function_names(run):
    doc, merged = _policy(run)
    header = render(merged, "cuda")
    funcs: dict[tuple[str, str], list] = {}
    for m in _FUNC.finditer(header):
        funcs.setdefault((m[1], m[2]), []).append(_bands_in(m[3]))
    assert sorted(funcs) == sorted(("0", dt) for dt in doc["dtypes"])
    for (_, dt), (dispatch, choice) in funcs.items():
        want = [
            (b["hi_rel"], _ident(b["config"])) for b in doc["dtypes"][dt]["bands"]
        ]  # the policy's own thresholds, exactly
        assert (
            dispatch
            == choice
            == (f"  const double rel = ws_over_l2(n, {ITEMSIZE[dt]}, d.l2);", want)
        )
    # the public functions reach entry 0's dispatch and choice for every dtype the policy has
    for dt in doc["dtypes"]:
        assert f"case 0: return detail::dispatch_e0_{dt}(in, out, n, d, s);" in header
        assert f"case 0: return detail::choice_e0_{dt}(n, d);" in header


def test_a_relative_edge_one_float_step_off_its_byte_edge_is_refused(tmp_path):
    """The exports dispatch on `hi_rel`. One float step above `hi_bytes / l2_bytes`, the first
    element count of the band above would be served the band below's config, while the
    policy's byte bands serve it the band above's: such a policy is refused, naming the field."""
    doc, _ = _policy("hot-7")
    bands = doc["dtypes"]["fp32"]["bands"]
    bands[0]["hi_rel"] = bands[1]["lo_rel"] = math.nextafter(bands[0]["hi_rel"], math.inf)
    ws = bands[0]["hi_bytes"]  # the edge, a whole fp32 element count (2 x 276430 x 4 bytes)
    by_rel = config_at(bands, ws / doc["l2_bytes"])
    assert by_rel == bands[0]["config"] != band_config(bands_from_policy(doc)["fp32"], ws)
    path = tmp_path / "policy.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(
        SweeperError, match=r"'dtypes\.fp32\.bands\[0\]\.hi_rel': .* is not hi_bytes"
    ):
        load_policy(path)


def _generic_case(doc: dict) -> dict:
    """The device keys the exports must refuse the tuned bands to: the policy's own device
    with one SM fewer, with another L2 size, with another compute capability."""
    cc, l2, sms = tuple(doc["cc"]), doc["l2_bytes"], doc["provenance"]["device"]["sm_count"]
    return {"own": (cc, l2, sms), "sms": (cc, l2, sms - 1), "l2": (cc, l2 // 2, sms),
            "cc": ((cc[0], cc[1] + 1), l2, sms)}  # fmt: skip


@pytest.mark.parametrize("run", POLICIES)
def test_the_python_export_serves_tuned_bands_only_on_the_policys_device(run, tmp_path):
    doc, merged = _policy(run)
    path = tmp_path / "relu_policy_off.py"
    path.write_text(render(merged, "python"))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    for dt, d in doc["dtypes"].items():
        n = d["bands"][0]["hi_bytes"] // (2 * ITEMSIZE[dt]) - 1  # the first band's last element
        for case, device in _generic_case(doc).items():
            name, fields = mod.select_config(dt, n, *device)
            want = d["bands"][0]["config"] if case == "own" else d["generic"]["config"]
            assert (case, name, fields) == (case, want, doc["configs"][want])


@pytest.mark.needs_tool("nvcc")
@pytest.mark.xdist_group("host-program")  # one worker builds each run's program once
@pytest.mark.parametrize("run", POLICIES)
def test_the_cuda_header_picks_its_entry_only_on_the_policys_device(run, host_program):
    """pick_entry over the header's entry table, run on the host, and the public functions'
    switch: each dtype reads its own slot of DeviceInfo.entry and falls back to its generic."""
    from sweeper.dtypes import DTYPES

    doc, _ = _policy(run)
    cases = _generic_case(doc)
    header, prog = host_program(run)
    out = subprocess.run([str(prog), "pick"], capture_output=True, text=True, check=True)
    got = [int(x) for x in out.stdout.split()]
    want = [0 if case == "own" and dt in doc["dtypes"] else -1 for case in cases for dt in DTYPES]
    assert got == want
    for i, dt in enumerate(DTYPES):
        (block,) = re.findall(
            rf"^inline const char\* relu_choice_{dt}\(size_t n\) \{{\n(.*?)^\}}$",
            header,
            re.M | re.S,
        )
        assert f"switch (d.entry[{i}])" in block
        generic = doc["dtypes"][dt]["generic"]["config"] if dt in doc["dtypes"] else ""
        assert f'default: return "{generic}";' in block
