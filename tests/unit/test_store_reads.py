"""A trial log read again in the same process (sweeper.analyze.store.read_trials keeps the
last ones read) or in another one (it keeps large logs checked on disk, under the cache
folder): the same records, copies of their own, and a log, manifest or code changed since is
checked again."""

from __future__ import annotations

import json
import lzma
import shutil
import zlib
from pathlib import Path

import pytest

from sweeper.analyze.store import load_manifest, read_trials
from sweeper.errors import SchemaError


@pytest.fixture(scope="module")
def cut(tmp_path_factory, cut_hot7) -> Path:
    """hot-7's fp32 part as a run of its own (conftest.one_dtype_of_hot7), made once."""
    return cut_hot7(tmp_path_factory.mktemp("cut") / "results", "fp32")


@pytest.fixture
def run(cut, tmp_path) -> Path:
    dst = tmp_path / "h200" / "hot-7"
    shutil.copytree(cut, dst)
    return dst


def _candidate(trials: list[dict]) -> dict:
    return next(t for t in trials if t["role"] == "candidate" and t.get("samples_us"))


def test_a_log_read_again_gives_the_same_records_as_copies_of_their_own(run):
    m = load_manifest(run)
    first, _ = read_trials(run, m)
    again, _ = read_trials(run, m)
    assert again == first
    t = _candidate(first)
    t["ratio"], t["samples_us"][0] = -1.0, -1.0
    third, _ = read_trials(run, m)
    assert third == again and third[first.index(t)]["ratio"] != -1.0
    assert _candidate(third)["samples_us"][0] != -1.0


def test_a_log_changed_after_it_was_read_is_checked_again(run):
    read_trials(run)
    path = run / "trials.jsonl.xz"
    lines = lzma.decompress(path.read_bytes()).decode().splitlines(keepends=True)
    path.write_bytes(lzma.compress("".join([*lines, lines[-1]]).encode(), preset=0))
    with pytest.raises(SchemaError, match="already recorded on line"):
        read_trials(run)


def test_a_manifest_changed_after_the_log_was_read_is_checked_again(run):
    m = load_manifest(run)
    read_trials(run, m)
    other = json.loads(json.dumps(m))
    other["run_id"] = "another-run"
    with pytest.raises(SchemaError, match="run_id"):
        read_trials(run, other)


def _other_process(monkeypatch, cache: Path) -> None:
    """This process as a new one: the in-memory readings forgotten, the cache folder set."""
    from sweeper.analyze import store

    monkeypatch.setenv("SWEEPER_CACHE", str(cache))
    monkeypatch.setattr(store, "_READ", type(store._READ)())


def test_a_large_log_checked_once_is_read_by_the_next_process_from_the_cache(
    run, tmp_path, monkeypatch
):
    from sweeper.analyze import store

    _other_process(monkeypatch, tmp_path / "cache")
    m = load_manifest(run)
    first, _ = read_trials(run, m)
    (kept,) = (tmp_path / "cache" / "trials").glob("*.marshal.z")
    _other_process(monkeypatch, tmp_path / "cache")
    checks = []
    monkeypatch.setattr(store, "validate_trial", lambda doc: checks.append(doc))
    again, truncated = read_trials(run, m)
    assert again == first and not truncated and checks == []  # decoded, not checked again
    # another manifest, another code or another mutant: checked again
    other = json.loads(json.dumps(m))
    other["run_id"] = "another-run"
    with pytest.raises(SchemaError, match="run_id"):
        _other_process(monkeypatch, tmp_path / "cache")
        read_trials(run, other)
    _other_process(monkeypatch, tmp_path / "cache")
    monkeypatch.setenv("MUTANT_UNDER_TEST", "sweeper.x__mutmut_1")
    checks.clear()
    read_trials(run, m)
    assert len(checks) == len(first)
    # a cache file that cannot be read, or holds what no reading wrote, is a miss
    monkeypatch.delenv("MUTANT_UNDER_TEST")
    for damaged in (b"not zlib", zlib.compress(b"T" + b"\x00not marshal"), zlib.compress(b"F")):
        kept.write_bytes(damaged)
        _other_process(monkeypatch, tmp_path / "cache")
        checks.clear()
        assert read_trials(run, m)[0] == first and len(checks) == len(first)


def test_the_cache_keeps_the_last_logs_used_and_never_a_small_one(tmp_path, monkeypatch):
    import os

    from sweeper.analyze import store

    monkeypatch.setenv("SWEEPER_CACHE", str(tmp_path))
    for i in range(store.DISK_KEEP + 3):
        store._disk_put(("log", str(i), "src"), (b"x" * 10, i % 2 == 0))
        path = store._disk_path(("log", str(i), "src"))
        os.utime(path, (1000 + i, 1000 + i))
    kept = sorted((tmp_path / "trials").glob("*.marshal.z"))
    assert len(kept) == store.DISK_KEEP
    assert store._disk_get(("log", "0", "src")) is None  # the oldest went
    assert store._disk_get(("log", "10", "src")) == (b"x" * 10, True)
    assert store.DISK_MIN_BYTES == 1 << 20
