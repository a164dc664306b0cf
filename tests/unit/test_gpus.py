"""The GPU spec table (cited per field), spec files, lookup, and device detection (with a fake
driver: no GPU here)."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import types
from dataclasses import replace
from pathlib import Path

import pytest

from sweeper import __version__
from sweeper.errors import NoGPUError, SchemaError, SweeperError
from sweeper.plan import gpus
from sweeper.plan import planfile as P

MiB = 1 << 20

REQUIRED = {
    "3090", "4080", "4090", "5090", "rtx6000-ada", "l4", "l40s", "a10", "a100-40gb",
    "a100-80gb", "h100-sxm", "h100-pcie", "h200", "gh200", "b200",
}  # fmt: skip

# Where table values may come from: vendor documents and sweeper's own recorded device query.
PRIMARY = ("NVIDIA", "device query recorded by sweeper")
# Third-party sites the table must not lean on.
NOT_PRIMARY = (
    "techpowerup", "wiki", "forum", "guru3d", "hardwareluxx", "chipsandcheese", "fpsreview",
    "hpctech", "spheron", "grokipedia", "glennklockwood", "pytorch", "http", "unverified",
)  # fmt: skip


def test_table_rows_present_and_well_formed():
    keys = [s.key for s in gpus.SPECS]
    assert set(keys) >= REQUIRED
    assert len(keys) == len(set(keys))
    for s in gpus.SPECS:
        assert s.key == s.key.lower() and " " not in s.key
        assert s.cc is None or (len(s.cc) == 2 and all(isinstance(x, int) for x in s.cc))
        for n in ("sm_count", "l2_bytes", "persisting_l2_max_bytes", "memory_bytes"):
            v = getattr(s, n)
            assert v is None or (isinstance(v, int) and v > 0), (s.key, n)
        assert s.dram_peak_gbps is None or s.dram_peak_gbps > 0
        if s.l2_bytes and s.memory_bytes:
            assert s.memory_bytes > s.l2_bytes
        if s.l2_bytes and s.persisting_l2_max_bytes:
            assert s.persisting_l2_max_bytes < s.l2_bytes


def test_every_known_value_is_cited_by_a_primary_source():
    for s in gpus.SPECS:
        assert s.uncited() == [], s.key
        assert set(s.sources) <= set(gpus.SPEC_FIELDS), s.key
        for n, text in s.sources.items():
            assert getattr(s, n) is not None, f"{s.key}: a source for unknown {n}"
            assert any(p in text for p in PRIMARY), (s.key, n, text)
            assert not any(bad in text.lower() for bad in NOT_PRIMARY), (s.key, n, text)


def test_persisting_max_only_from_a_device_query():
    """No datasheet states persistingL2CacheMaxSize: only a recorded device query may."""
    for s in gpus.SPECS:
        if s.persisting_l2_max_bytes is not None:
            assert "device query" in s.sources["persisting_l2_max_bytes"], s.key
    assert gpus.lookup("a100-40gb").persisting_l2_max_bytes is None
    assert not any(hasattr(s, "unverified") for s in gpus.SPECS)


def test_known_values():
    r4090 = gpus.lookup("4090")
    assert (r4090.l2_bytes, r4090.sm_count, r4090.cc) == (75497472, 128, (8, 9))
    assert (r4090.memory_bytes, r4090.dram_peak_gbps) == (24 << 30, 1008.0)
    assert r4090.persisting_l2_max_bytes is None
    h200 = gpus.lookup("h200")
    assert (h200.l2_bytes, h200.persisting_l2_max_bytes) == (62914560, 39321600)
    assert (h200.sm_count, h200.cc) == (132, (9, 0))
    assert (h200.memory_bytes, h200.dram_peak_gbps) == (141 * 10**9, 4800.0)
    assert "results/h200/hot-7/manifest.json" in h200.sources["l2_bytes"]
    # the cited device query holds the values
    manifest = Path(__file__).parents[2] / "results/h200/hot-7/manifest.json"
    device = json.loads(manifest.read_text())["device"]
    assert (device["l2_bytes"], device["persisting_l2_max_bytes"]) == (62914560, 39321600)
    assert (device["sm_count"], tuple(device["cc"])) == (132, (9, 0))
    assert "H200" in h200.sources["memory_bytes"] and "141 GB" in h200.sources["memory_bytes"]
    a100 = gpus.lookup("a100-40gb")
    assert (a100.l2_bytes, a100.sm_count, a100.dram_peak_gbps) == (41943040, 108, 1555.0)


@pytest.mark.parametrize(
    "name, key",
    [("H200", "h200"), ("rtx 4090", "4090"), ("NVIDIA GeForce RTX 4090", "4090"),
     ("A100_80GB", "a100-80gb"), ("h100 sxm", "h100-sxm"), ("H100-PCIe", "h100-pcie"),
     ("a100-sxm4-40gb", "a100-40gb"), ("l4", "l4"), ("a10", "a10")],
)  # fmt: skip
def test_lookup(name, key):
    assert gpus.lookup(name).key == key


@pytest.mark.parametrize(
    "name, candidates",
    [("h100", {"h100-sxm", "h100-pcie"}), ("A100", {"a100-40gb", "a100-80gb"}),
     ("rtx", {"3090", "4080", "4090", "5090", "rtx6000-ada"})],
)  # fmt: skip
def test_an_ambiguous_name_lists_its_candidates(name, candidates):
    with pytest.raises(SweeperError) as ei:
        gpus.lookup(name)
    msg = str(ei.value)
    assert "\n" not in msg and "ambiguous" in msg
    listed = set(msg.split("one of ", 1)[1].split(" (", 1)[0].split(", "))
    assert listed == candidates


@pytest.mark.parametrize(
    "name", ["mi300", "MI250X", "AMD MI300X", "Instinct MI210", "Radeon RX 7900 XTX", "gaudi2",
             "Intel Arc A770", "intel max 1550", "tpu v5e"],
)  # fmt: skip
def test_other_vendors_gpus_are_refused_as_not_nvidia(name):
    with pytest.raises(SweeperError) as ei:
        gpus.lookup(name)
    assert str(ei.value) == f"GPU {name!r}: sweeper supports NVIDIA GPUs only"


def test_every_key_alias_and_name_that_is_not_shared_finds_its_row():
    shared = {"h100", "a100"}  # each starts another row's name too
    for spec in gpus.SPECS:
        for n in (spec.key, spec.name, *spec.aliases):
            if n not in shared:
                assert gpus.lookup(n).key == spec.key, n


def test_unknown_lists_keys_on_one_line():
    with pytest.raises(SweeperError) as ei:
        gpus.lookup("voodoo3")
    msg = str(ei.value)
    assert "\n" not in msg and "voodoo3" in msg
    for k in REQUIRED:
        assert k in msg


def test_import_pulls_in_no_cuda():
    code = (
        "import sys, sweeper, sweeper.plan.gpus, sweeper.plan, sweeper.api\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('numba', 'cuda'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- unknown fields -----------------------------------------------------------------------


def test_rows_with_every_plan_field_make_a_plan():
    plannable = [s for s in gpus.SPECS if not s.missing()]
    assert {"4090", "h200", "3090", "a100-40gb", "h100-sxm"} <= {s.key for s in plannable}
    for s in plannable:
        p = P.make_plan(s, dtypes="fp32")
        assert p.l2_bytes == s.l2_bytes and p.sm_count == s.sm_count


def test_row_with_an_unknown_plan_field_refuses_in_one_line():
    l4 = gpus.lookup("l4")
    assert l4.missing() == ["l2_bytes", "sm_count"]
    with pytest.raises(SweeperError) as ei:
        P.make_plan(l4)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith("GPU 'l4' (spec table): l2_bytes, sm_count are unknown")
    assert "--gpu auto" in msg and "spec file" in msg


@pytest.mark.parametrize("name", gpus.PLAN_FIELDS)
def test_each_plan_field_is_required(name):
    spec = replace(gpus.lookup("4090"), **{name: None})
    with pytest.raises(SweeperError, match=rf"'4090' \(spec table\): {name} is unknown"):
        P.make_plan(spec)


def test_persisting_max_is_optional():
    spec = replace(gpus.lookup("h200"), persisting_l2_max_bytes=None)
    p = P.make_plan(spec, dtypes="fp32")
    names = {a for e in p.entries for a in e["anchors"]}
    assert "L2" in names and "persist-max" not in names
    with_max = P.make_plan(gpus.lookup("h200"), dtypes="fp32")
    assert "persist-max" in {a for e in with_max.entries for a in e["anchors"]}


# ---- spec files ---------------------------------------------------------------------------

GOOD = """\
key = "my-gpu"
name = "My GPU"
cc = [8, 9]
sm_count = 60
l2_bytes = 50331648
dram_type = "GDDR6"
dram_peak_gbps = 300
memory_bytes = 25769803776

[sources]
l2_bytes = "My GPU datasheet, table 2: L2 48 MB"
"""


def write(tmp_path, text: str, name: str = "my.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_spec_file_reads_values_and_defaults(tmp_path):
    spec = gpus.load_spec_file(write(tmp_path, GOOD))
    assert (spec.key, spec.name, spec.cc, spec.sm_count) == ("my-gpu", "My GPU", (8, 9), 60)
    assert (spec.l2_bytes, spec.memory_bytes) == (48 * MiB, 24 << 30)
    assert spec.dram_peak_gbps == 300.0 and isinstance(spec.dram_peak_gbps, float)
    assert spec.persisting_l2_max_bytes is None  # left out -> not known
    assert spec.sources["l2_bytes"] == "My GPU datasheet, table 2: L2 48 MB"
    assert spec.sources["sm_count"] == "spec file my.toml"  # no citation -> the file itself
    assert spec.uncited() == []
    # key and name default to the file name
    bare = gpus.load_spec_file(write(tmp_path, "l2_bytes = 4194304\n", "Lab_Card.toml"))
    assert (bare.key, bare.name, bare.sm_count) == ("lab-card", "lab-card", None)


@pytest.mark.parametrize("key", [s.key for s in gpus.SPECS])
def test_every_table_row_round_trips_through_the_writer(tmp_path, key):
    spec = gpus.lookup(key)
    path = gpus.write_spec_file(spec, tmp_path / f"{key}.toml")
    text = path.read_text()
    tomllib.loads(text)  # plain TOML
    back = gpus.load_spec_file(path)
    assert back == spec  # every value and every citation
    for n in gpus.SPEC_FIELDS:
        assert (f"\n{n} = " in text) == (getattr(spec, n) is not None)


def test_a_spec_file_completes_a_table_row_that_lacks_fields(tmp_path):
    b200 = gpus.lookup("b200")
    assert b200.missing()  # the table alone cannot plan it
    text = (
        'key = "b200"\nsm_count = 148\nl2_bytes = 132120576\ndram_peak_gbps = 8000\n'
        'memory_bytes = 180000000000\n[sources]\nsm_count = "lab device query"\n'
    )
    spec = gpus.load_spec_file(write(tmp_path, text, "lab.toml"))
    assert (spec.key, spec.name, spec.aliases) == ("b200", b200.name, b200.aliases)
    assert (spec.cc, spec.dram_type) == (b200.cc, b200.dram_type)  # kept from the row
    assert (spec.sm_count, spec.l2_bytes, spec.dram_peak_gbps) == (148, 132120576, 8000.0)
    assert spec.sources["cc"] == b200.sources["cc"]  # the row's citation goes with its value
    assert spec.sources["sm_count"] == "lab device query"
    assert spec.sources["l2_bytes"] == "spec file lab.toml"
    assert spec.missing() == [] and spec.uncited() == []
    P.make_plan(spec)  # plannable now


def test_a_spec_file_overrides_only_the_fields_it_gives(tmp_path):
    h200 = gpus.lookup("h200")
    spec = gpus.load_spec_file(write(tmp_path, 'key = "h200"\ndram_peak_gbps = 4000\n'))
    assert spec.dram_peak_gbps == 4000.0 and spec.sources["dram_peak_gbps"] == "spec file my.toml"
    for n in gpus.SPEC_FIELDS:
        if n != "dram_peak_gbps":
            assert getattr(spec, n) == getattr(h200, n), n
            assert spec.sources[n] == h200.sources[n], n
    # the merged values are checked together: an L2 below the row's persisting max is refused
    with pytest.raises(SchemaError, match="persisting_l2_max_bytes"):
        gpus.load_spec_file(write(tmp_path, 'key = "h200"\nl2_bytes = 1048576\n', "s.toml"))
    # a citation for a field the file does not give is still refused
    with pytest.raises(SchemaError, match="cites cc"):
        gpus.load_spec_file(write(tmp_path, 'key = "h200"\n[sources]\ncc = "x"\n', "c.toml"))


def test_a_spec_file_for_another_key_takes_nothing_from_the_table(tmp_path):
    spec = gpus.load_spec_file(write(tmp_path, 'key = "h200-lab"\nl2_bytes = 4194304\n'))
    assert (spec.key, spec.sm_count, spec.cc, spec.aliases) == ("h200-lab", None, None, ())


def test_writer_escapes_strings_and_refuses_what_toml_cannot_hold(tmp_path):
    odd = 'a "quoted" \\ back\tslash, new\nline, \u00e9, ctl \x01'
    spec = gpus.GpuSpec(
        key="odd",
        name="Odd GPU",
        aliases=("one", 'tw"o'),
        l2_bytes=4 * MiB,
        dram_peak_gbps=0.1,
        sources={"l2_bytes": odd, "dram_peak_gbps": "x"},
    )
    doc = tomllib.loads(gpus.spec_to_toml(spec))
    assert doc["sources"]["l2_bytes"] == odd
    assert doc["aliases"] == ["one", 'tw"o'] and doc["dram_peak_gbps"] == 0.1
    assert "cc" not in doc and "sm_count" not in doc
    with pytest.raises(ValueError, match="dram_peak_gbps"):
        gpus.spec_to_toml(replace(spec, dram_peak_gbps=float("inf")))
    with pytest.raises(TypeError, match="sm_count"):
        gpus.spec_to_toml(replace(spec, sm_count=True))


@pytest.mark.parametrize(
    "text, field, words",
    [
        ('l2_bytes = -4\n', "l2_bytes", "positive"),
        ('l2_bytes = 0\n', "l2_bytes", "positive"),
        ('l2_bytes = "48 MB"\n', "l2_bytes", "positive integer"),
        ('l2_bytes = 4.5e6\n', "l2_bytes", "positive integer"),
        ('sm_count = true\n', "sm_count", "boolean"),
        ('memory_bytes = [1]\n', "memory_bytes", "array"),
        ('cc = [8]\n', "cc", "two integers"),
        ('cc = "8.9"\n', "cc", "two integers"),
        ('cc = [8, 9.5]\n', "cc", "two integers"),
        ('cc = [0, 9]\n', "cc", "major must be positive"),
        ('dram_peak_gbps = "fast"\n', "dram_peak_gbps", "number"),
        ('dram_peak_gbps = -1.0\n', "dram_peak_gbps", "positive"),
        ('dram_peak_gbps = nan\n', "dram_peak_gbps", "positive"),
        ('dram_type = ""\n', "dram_type", "non-empty"),
        ('l2_bytes_mb = 48\n', "l2_bytes_mb", "unknown field"),
        ('[extra]\nx = 1\n', "extra", "unknown field"),
        ('key = "has space"\n', "key", "letters, digits"),
        ('aliases = "one"\n', "aliases", "array of strings"),
        ('l2_bytes = 8\npersisting_l2_max_bytes = 16\n', "persisting_l2_max_bytes", "larger"),
        ('l2_bytes = 4096\nmemory_bytes = 4096\n', "memory_bytes", "not larger"),
        ('[sources]\nl2_bytes = "x"\n', "sources.l2_bytes", "does not give"),
        ('l2_bytes = 8\n[sources]\nl2 = "x"\n', "sources.l2", "unknown field"),
        ('l2_bytes = 8\n[sources]\nl2_bytes = 5\n', "sources.l2_bytes", "non-empty string"),
        ('sources = "datasheet"\n', "sources", "table"),
    ],
)  # fmt: skip
def test_bad_spec_field_is_one_line_naming_file_and_field(tmp_path, text, field, words):
    path = write(tmp_path, text)
    with pytest.raises(SchemaError) as ei:
        gpus.load_spec_file(path)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(f"{path}: field '{field}': "), msg
    assert words in msg, msg
    assert ei.value.field == field


@pytest.mark.parametrize(
    "raw, words",
    [(b'l2_bytes = \n', "not valid TOML"), (b'l2_bytes = 1\nl2_bytes = 2\n', "not valid TOML"),
     (b'key = "a\nb"\n', "not valid TOML"), (b"\xff\xfe = 1\n", "not UTF-8")],
)  # fmt: skip
def test_bad_toml_is_one_line(tmp_path, raw, words):
    path = tmp_path / "bad.toml"
    path.write_bytes(raw)
    with pytest.raises(SchemaError) as ei:
        gpus.load_spec_file(path)
    msg = str(ei.value)
    assert "\n" not in msg and msg.startswith(f"{path}: ") and words in msg


def test_missing_spec_file(tmp_path):
    with pytest.raises(SchemaError, match="spec file not found"):
        gpus.load_spec_file(tmp_path / "nope.toml")


def test_spec_file_without_l2_refuses_to_plan_naming_the_file(tmp_path):
    path = write(tmp_path, GOOD.replace("l2_bytes = 50331648\n", "").replace(
        'l2_bytes = "My GPU datasheet, table 2: L2 48 MB"\n', ""))  # fmt: skip
    spec = gpus.load_spec_file(path)
    assert spec.l2_bytes is None
    with pytest.raises(SweeperError) as ei:
        P.make_plan(spec)
    msg = str(ei.value)
    assert msg.startswith(f"spec file {path}: l2_bytes is unknown (not given)") and "\n" not in msg


def test_resolve_reads_spec_files_by_suffix_or_existence(tmp_path, monkeypatch):
    path = write(tmp_path, GOOD, "card")  # no .toml suffix, but an existing file
    assert gpus.resolve(str(path))[0].key == "my-gpu"
    assert gpus.resolve("h200")[0] is gpus.lookup("h200")
    with pytest.raises(SchemaError, match="spec file not found"):
        gpus.resolve(str(tmp_path / "absent.toml"))


def test_save_refuses_to_replace_a_different_spec(tmp_path):
    spec = gpus.load_spec_file(write(tmp_path, GOOD))
    out = tmp_path / "saved.toml"
    gpus.write_spec_file(spec, out)
    before = out.read_text()
    # the same values with other citations: left as it is
    assert gpus.spec_file_needs_write(replace(spec, sources={}), out) is False
    gpus.write_spec_file(replace(spec, sources={}), out)
    assert out.read_text() == before
    with pytest.raises(SweeperError, match="holds a different GPU spec"):
        gpus.write_spec_file(replace(spec, sm_count=61), out)
    out2 = tmp_path / "junk.toml"
    out2.write_text("not toml [")
    with pytest.raises(SweeperError, match="different GPU spec"):
        gpus.write_spec_file(spec, out2)
    assert out.read_text() == before and out2.read_text() == "not toml ["
    with pytest.raises(SweeperError, match=r"must end in \.toml"):
        gpus.write_spec_file(spec, tmp_path / "saved.json")


# ---- detection ----------------------------------------------------------------------------


def fake_driver(name=b"NVIDIA H200", l2=62914560, persist=39321600, sms=132, cc=(9, 0)):
    """A stand-in for cuda.bindings.driver with the calls detect() makes."""
    ok = "SUCCESS"
    attrs = types.SimpleNamespace(
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR="major",
        CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR="minor",
        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT="sms",
        CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE="l2",
        CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE="persist",
        CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH="bus",
        CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE="clock",
    )
    values = dict(
        major=cc[0], minor=cc[1], sms=sms, l2=l2, persist=persist, bus=6016, clock=3200000
    )
    return types.SimpleNamespace(
        CUresult=types.SimpleNamespace(CUDA_SUCCESS=ok),
        CUdevice_attribute=attrs,
        cuInit=lambda flags: (ok,),
        cuDeviceGetCount=lambda: (ok, 1),
        cuDeviceGet=lambda i: (ok, i),
        cuDeviceGetAttribute=lambda a, dev: (ok, values[a]),
        cuDeviceGetName=lambda n, dev: (ok, name + b"\0" * 8),
        cuDeviceTotalMem=lambda dev: (ok, 150 * 10**9),
        cuDriverGetVersion=lambda: (ok, 13000),
    )


def install(monkeypatch, driver):
    pkg = types.ModuleType("cuda.bindings")
    pkg.driver = driver
    monkeypatch.setitem(sys.modules, "cuda.bindings", pkg)
    monkeypatch.setitem(sys.modules, "cuda.bindings.driver", driver)


def test_detect_reads_attributes(monkeypatch):
    install(monkeypatch, fake_driver())
    info = gpus.detect()
    assert info.name == "NVIDIA H200"
    assert (info.cc, info.sm_count, info.l2_bytes) == ((9, 0), 132, 62914560)
    assert info.persisting_l2_max_bytes == 39321600
    assert info.driver_version == 13000
    assert info.dram_peak_gbps == pytest.approx(6016 / 8 * 3.2e9 * 2 / 1e9)


def test_detect_without_bindings(monkeypatch):
    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(
        NoGPUError, match=r"needs the cuda extra: pip install 'relu-sweeper\[cuda\]'"
    ):
        gpus.detect()


def test_no_device_errors_name_what_the_command_that_prints_them_takes(monkeypatch, tmp_path):
    from sweeper import api

    monkeypatch.setitem(sys.modules, "cuda.bindings", None)
    with pytest.raises(NoGPUError, match="pass --gpu NAME") as ei:
        api.plan("auto", out=str(tmp_path / "p.json"))
    assert "\n" not in str(ei.value) and not (tmp_path / "p.json").exists()
    with pytest.raises(NoGPUError) as ei:
        api._gpu_key()  # what `sweeper run` asks first: run has no --gpu
    assert "--gpu" not in str(ei.value) and "measures on this machine's GPU" in str(ei.value)


def test_a_driver_older_than_cuda_13_is_refused_with_the_branch_needed(monkeypatch):
    from sweeper import api

    drv = fake_driver()
    drv.cuDriverGetVersion = lambda: ("SUCCESS", 12080)
    install(monkeypatch, drv)
    with pytest.raises(NoGPUError) as ei:
        api._gpu_key()
    assert str(ei.value) == (
        "the NVIDIA driver here supports CUDA 12.8; sweeper's CUDA 13 wheels need a driver for "
        "CUDA 13 (R580 or newer)"
    )
    drv.cuDriverGetVersion = lambda: ("SUCCESS", 13000)
    assert api._gpu_key() == "h200"


def test_detect_driver_failure(monkeypatch):
    drv = fake_driver()

    def no_lib(flags):
        raise OSError("libcuda.so not found")

    drv.cuInit = no_lib
    install(monkeypatch, drv)
    with pytest.raises(NoGPUError, match="no usable CUDA driver"):
        gpus.detect()
    drv.cuInit = lambda flags: ("CUDA_ERROR_NO_DEVICE",)
    with pytest.raises(NoGPUError, match="CUDA_ERROR_NO_DEVICE"):
        gpus.detect()


def test_spec_for_matching_device(monkeypatch):
    install(monkeypatch, fake_driver())
    spec, diffs = gpus.spec_for_device(gpus.detect(), today="2030-01-02")
    assert spec.key == "h200"
    assert diffs == ["memory_bytes: table 141000000000, device 150000000000"]
    queried = f"device query recorded by sweeper {__version__} on 2030-01-02"
    for n in ("cc", "sm_count", "l2_bytes", "persisting_l2_max_bytes", "memory_bytes"):
        assert spec.sources[n] == queried
    # the table's DRAM figures keep their citation
    assert spec.dram_peak_gbps == 4800.0
    assert spec.sources["dram_peak_gbps"] == gpus.lookup("h200").sources["dram_peak_gbps"]
    assert spec.uncited() == []


def test_spec_for_device_that_differs(monkeypatch):
    install(monkeypatch, fake_driver(name=b"NVIDIA H100 80GB HBM3", l2=50 * 2**20 + 4096))
    spec, diffs = gpus.spec_for_device(gpus.detect())
    assert spec.key == "h100-sxm"
    assert spec.l2_bytes == 50 * 2**20 + 4096  # the device wins
    assert any(d.startswith("l2_bytes: table 52428800, device") for d in diffs)
    assert "persisting_l2_max_bytes: table unknown, device 39321600" in diffs


def test_spec_for_device_fills_fields_the_table_lacks(monkeypatch):
    install(monkeypatch, fake_driver(name=b"NVIDIA L4", l2=48 * MiB, persist=0, sms=58))
    row = gpus.lookup("l4")
    assert row.missing()
    spec, diffs = gpus.spec_for_device(gpus.detect(), today="2030-01-02")
    assert spec.key == "l4" and spec.missing() == []
    assert (spec.l2_bytes, spec.sm_count, spec.persisting_l2_max_bytes) == (48 * MiB, 58, None)
    assert "persisting_l2_max_bytes" not in spec.sources
    assert "l2_bytes: table unknown, device 50331648" in diffs
    P.make_plan(spec, dtypes="fp32")  # plannable now


def test_spec_for_unknown_device(monkeypatch):
    install(monkeypatch, fake_driver(name=b"NVIDIA Mystery GPU", sms=77, cc=(8, 7)))
    spec, notes = gpus.spec_for_device(gpus.detect(), today="2030-01-02")
    assert spec.key == "mystery-gpu"
    assert spec.l2_bytes == 62914560
    assert spec.dram_peak_gbps == pytest.approx(4812.8)
    assert spec.dram_type is None
    assert spec.sources["dram_peak_gbps"].endswith("(memory bus width x memory clock x 2)")
    assert spec.uncited() == []
    assert len(notes) == 1 and "not in the spec table" in notes[0]


def test_device_without_a_dram_figure_refuses_in_one_line(monkeypatch):
    drv = fake_driver(name=b"NVIDIA B200", l2=126 * MiB, sms=148, cc=(10, 0))
    install(monkeypatch, drv)
    info = replace(gpus.detect(), mem_bus_width_bits=0, mem_clock_khz=0)
    spec, _ = gpus.spec_for_device(info)
    assert spec.key == "b200" and spec.missing() == ["dram_peak_gbps"]
    with pytest.raises(SweeperError) as ei:
        P.make_plan(spec)
    msg = str(ei.value)
    assert msg.startswith("device 'NVIDIA B200': dram_peak_gbps is unknown (the device does not")
    assert "\n" not in msg
