"""The `sweeper` command: parse -> one api call -> render. No file formats or pandas here."""

from __future__ import annotations

import sys

import typer

from sweeper import __version__
from sweeper.errors import SweeperError

app = typer.Typer(
    name="sweeper",
    help="Byte-gap-free sweeps and launch-policy selection for memory-bound GPU kernels.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"sweeper {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """sweeper: plan -> run -> select -> policy -> export, with plots and reports."""


def fail(message: str) -> None:
    """Print one clear line on stderr and exit 1."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(1)


# ---- commands are registered below, one small function each ------------------------------


def main() -> None:
    try:
        app()
    except SweeperError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(1)
