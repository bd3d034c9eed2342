"""The `cer` command line: parse options, call one function per command, render.

Exit codes: 0 ok, 1 runtime failure, 2 usage or input error, 130 interrupted.
"""

from __future__ import annotations

import sys

import click

from cer_cli import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="cer")
def cli() -> None:
    """Complex event recognition over event logs.

    Write a pattern query in CEQL, point it at a CSV / Parquet / NDJSON log,
    and get every complex event that matches.
    """


def main() -> None:
    try:
        cli.main(standalone_mode=True)
    except KeyboardInterrupt:
        sys.exit(130)
