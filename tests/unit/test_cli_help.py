"""`--help` of every command at 80 columns, and the options that messages name.

Every command and subcommand is rendered through typer's CliRunner with COLUMNS=80: each
option with a default shows it, no `<bool>` metavar, no line over 80 columns, every paragraph of
the description ends a sentence, and the help ends with the command's example line, whose
options exist on that command. Every `--option` in a message sweeper can print exists on a
command, and one quoted as `sweeper CMD ... --option` exists on CMD.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from sweeper.cli import app

ROOT = Path(__file__).resolve().parents[2]
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _commands():
    """(path, click command) for the root, every command and every subcommand."""
    out = []

    def walk(cmd, path):
        out.append((path, cmd))
        for name, sub in sorted(getattr(cmd, "commands", {}).items()):
            walk(sub, (*path, name))

    walk(get_command(app), ())
    return out


COMMANDS = _commands()
BY_PATH = dict(COMMANDS)


def _help(path: tuple[str, ...]) -> str:
    res = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="sweeper")
    assert res.exit_code == 0, res.output
    return res.output


def _flat(text: str) -> str:
    return " ".join(text.split())


def _options(cmd) -> set[str]:
    return {
        o
        for p in cmd.params
        if p.param_type_name == "option"
        for o in (*p.opts, *p.secondary_opts)
        if o.startswith("--")
    }


def test_every_command_is_walked():
    names = {" ".join(p) for p, _ in COMMANDS}
    for want in ("", "run", "audit", "plan", "policy build", "kernels ptx", "verify", "compare"):
        assert want in names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=lambda p: " ".join(p) or "root")
def test_help_at_80_columns(path):
    cmd = BY_PATH[path]
    text = _help(path)
    assert "<bool>" not in text
    too_long = [line for line in text.splitlines() if len(line) > 80]
    assert not too_long, too_long
    flat = _flat(text)

    # every option or argument with a default shows it
    ctx = cmd.make_context("sweeper", [], resilient_parsing=True)
    for p in cmd.params:
        if p.hidden or p.name == "help" or p.required:
            continue
        plain_flag = p.param_type_name == "option" and p.is_flag and not p.secondary_opts
        if plain_flag and p.default is False:
            continue  # a plain flag is off unless given
        record = p.get_help_record(ctx)
        assert record is not None, p.name
        assert "[default: " in record[1], f"{' '.join(path)} {p.name}: {record[1]}"
        shown = _flat(record[1].split("  [")[0]).replace("- ", "-")
        assert shown in flat.replace("- ", "-"), shown  # and it is what the help shows

    # the description: every paragraph ends a sentence (or is a \b block of code)
    description = (cmd.help or "").strip()
    assert description, "no description"
    for para in re.split(r"\n\s*\n", description):
        para = para.strip()
        if para.startswith("\b"):
            continue
        assert para[-1] in ".:!?)", f"paragraph cut: {para!r}"
    for p in cmd.params:
        if not p.hidden and p.param_type_name == "option" and p.help:
            assert p.help.rstrip()[-1] in ".)", f"{p.name}: {p.help!r}"

    # it ends with the example, one line, that runs this command with its own options
    if path and getattr(cmd, "commands", None):
        return  # a group (policy, kernels) lists its subcommands; they carry the examples
    last = text.rstrip().splitlines()[-1].strip()
    assert last.startswith("Example: sweeper"), last
    assert cmd.epilog and last == cmd.epilog.strip()
    words = last.removeprefix("Example: sweeper ").split()
    if path:
        assert words[: len(path)] == list(path), last
    else:
        assert words[words.index("run") - 2 : words.index("run")] == ["--device", "1"]
        path = ("run",)
    for opt in OPTION.findall(" ".join(words[len(path) :])):
        assert opt in _options(BY_PATH[path]), f"{last}: {opt}"


def _strings():
    """Every string constant (f-string parts included) in sweeper/, with its file."""
    for f in sorted((ROOT / "sweeper").rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                yield f.relative_to(ROOT), node.value


# options of other programs that sweeper runs (git, nvcc) or table rules in the report
NOT_OURS = {"--porcelain", "--untracked-files", "--version"}


def test_every_option_a_message_names_exists():
    ours = set().union(*(_options(c) for _, c in COMMANDS))
    missing = []
    for f, text in _strings():
        for opt in OPTION.findall(text):
            if opt in ours or opt in NOT_OURS or re.fullmatch(r"--[r-]+", opt):
                continue
            missing.append((str(f), opt))
    assert not missing, missing


def test_an_option_quoted_with_its_command_exists_on_that_command():
    quoted = re.compile(r"`sweeper ([^`]+)`")
    checked, wrong = 0, []
    for f, text in _strings():
        for cmdline in quoted.findall(text):
            words = cmdline.split()
            path: tuple[str, ...] = ()
            while words and path + (words[0],) in BY_PATH:
                path, words = path + (words[0],), words[1:]
            for opt in OPTION.findall(" ".join(words)):
                checked += 1
                if opt not in _options(BY_PATH[path]):
                    wrong.append((str(f), cmdline, opt))
    assert checked > 10  # the walk finds the quoted commands
    assert not wrong, wrong


def test_messages_that_name_an_option_name_one_of_the_printing_commands():
    """Messages of the lower layers that name an option of one command: that command has it."""
    cases = {
        ("policy", "build"): "pass --resolution",  # sweeper/analyze/policy.py
        ("plan",): "pass --force",  # sweeper/plan/planfile.py
        ("verify",): "use --no-timing",  # sweeper/export/verify.py
        ("export",): "--force overwrites it",  # sweeper/export/__init__.py
    }
    texts = [t for _, t in _strings()]
    for path, phrase in cases.items():
        assert any(phrase in t for t in texts), phrase
        assert OPTION.findall(phrase)[0] in _options(BY_PATH[path]), (path, phrase)
    assert "--gpu" not in _options(BY_PATH[("run",)])  # run reads the device instead


# ---- renamed options: the old spelling is a hidden alias that means the same --------------


def _calls(monkeypatch, name: str, result=None):
    """Record the calls of sweeper.api.<name>; it then raises a user error (no work done)."""
    from sweeper import api
    from sweeper.errors import SweeperError

    calls = []

    def fake(*args, **kwargs):
        calls.append((args, kwargs))
        if result is not None:
            return result
        raise SweeperError("stopped here")

    monkeypatch.setattr(api, name, fake)
    return calls


@pytest.mark.parametrize(
    "api_name, new, old",
    [
        ("run", ["run", "--plan", "p.json", "--other-gpu"], ["run", "p.json", "--force"]),
        ("compare", ["compare", "a", "b", "--within", "0.05"],
         ["compare", "a", "b", "--tolerance", "0.05"]),
        ("policy_build", ["policy", "build", "r", "--mode", "cold"],
         ["policy", "build", "r", "--modes", "cold"]),
        ("kernel_check", ["kernels", "check", "k.cu:k", "--kernel-block", "128",
                          "--kernel-grid", "onepass"],
         ["kernels", "check", "k.cu:k", "--block", "128", "--grid", "onepass"]),
    ],
)  # fmt: skip
def test_an_old_spelling_means_the_same_and_prints_nothing_extra(monkeypatch, api_name, new, old):
    outputs, seen = [], []
    for argv in (new, old):
        calls = _calls(monkeypatch, api_name)
        res = CliRunner().invoke(app, argv, prog_name="sweeper")
        assert res.exit_code == 1 and len(calls) == 1, res.output
        outputs.append(res.output)
        args, kwargs = calls[0]
        seen.append((args, {k: v for k, v in kwargs.items() if k != "progress"}))
    assert outputs[0] == outputs[1] and outputs[0].strip() == "error: stopped here"
    assert seen[0] == seen[1]


def test_run_builds_one_request_from_its_options(monkeypatch):
    from sweeper import api

    calls = _calls(monkeypatch, "run")
    argv = ["run", "--plan", "p.json", "--dtypes", "fp32, fp16", "--modes", "hot,cold",
            "--configs", "v16-*", "--resume", "--run-dir", "results/h200/r", "--time-limit", "5"]  # fmt: skip
    res = CliRunner().invoke(app, argv, prog_name="sweeper")
    assert res.exit_code == 1, res.output
    (request,), kwargs = calls[0]
    assert isinstance(request, api.RunRequest) and set(kwargs) == {"progress", "executor"}
    assert (request.plan_path, request.dtypes, request.modes) == (
        "p.json", ("fp32", "fp16"), ("hot", "cold"))  # fmt: skip
    assert (request.configs, request.resume, request.time_limit_s) == (
        ("v16-*",), "results/h200/r", 5.0)  # fmt: skip
    assert request.policy == "none" and request.force is False


def test_run_refuses_two_different_plans(monkeypatch):
    calls = _calls(monkeypatch, "run")
    res = CliRunner().invoke(app, ["run", "a.json", "--plan", "b.json"], prog_name="sweeper")
    assert res.exit_code == 1 and not calls
    assert res.output == "error: two plans given: --plan b.json and a.json\n"


@pytest.mark.parametrize(
    "fields, message",
    [({"producer": "dma"}, "--producer 'dma': use sm or memcpy"),
     ({"time_limit_s": 0}, "--time-limit must be a positive number of seconds, got 0"),
     ({"modes": ["warm"]}, "unknown mode 'warm'")],
)  # fmt: skip
def test_a_run_request_is_validated_when_it_is_made(fields, message):
    from sweeper import api
    from sweeper.errors import SweeperError

    with pytest.raises(SweeperError, match=re.escape(message)):
        api.RunRequest(**fields)
    request = api.RunRequest(dtypes=["fp32"], configs=["v16-*"])
    assert (request.dtypes, request.configs, request.modes) == (("fp32",), ("v16-*",), ("hot",))
    with pytest.raises(AttributeError):
        request.grid = "extended"  # frozen
