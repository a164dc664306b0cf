"""A trial log read again in the same process (sweeper.analyze.store.read_trials keeps the
last ones read): the same records, copies of their own, and a log or manifest changed since
is checked again."""

from __future__ import annotations

import json
import lzma
import shutil
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
