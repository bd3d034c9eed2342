"""How a message names an option, in the words of the front end that runs.

A hint such as "pass --time-format '%d/%m/%Y'" helps on the command line and misleads in
Python, where the same option is the keyword ``time_format='%d/%m/%Y'``. Messages are
written deep down (the log contract, the query checks) without knowing which front end
called, so they spell options through ``option``, and a front end that is not the command
line says so around its work (``spelling("api")``: ``cer_cli.match``, ``cer_cli.count``,
``cer_cli.spark.match``). Imports nothing from ``cer_cli``, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

#: ``"cli"`` (``--time-unit clicks=ms``) or ``"api"`` (``time_unit={'clicks': 'ms'}``).
_STYLE: ContextVar[str] = ContextVar("cer_option_spelling", default="cli")
STYLES = ("cli", "api")


@contextmanager
def spelling(style: str) -> Iterator[None]:
    """Messages raised inside spell options as ``style`` (one of ``STYLES``)."""
    if style not in STYLES:
        raise ValueError(f"unknown option spelling {style!r}")
    token = _STYLE.set(style)
    try:
        yield
    finally:
        _STYLE.reset(token)


def option(name: str, value: str | None = None, log: str | None = None, *,
           quoted: bool = False, placeholder: bool = False) -> str:
    """Option ``name`` (its command-line name without dashes: ``"time-unit"``) as the
    running front end spells it, with ``value`` for the log of stream ``log`` when given:
    ``--time-unit ms``, ``--time-unit clicks=ms`` / ``time_unit='ms'``,
    ``time_unit={'clicks': 'ms'}``. ``quoted``: the command line shows the value in single
    quotes (a strftime pattern); ``placeholder``: the value stands for one the user picks
    (``COLUMN``) and is shown bare in both."""
    if _STYLE.get() == "api":
        keyword = name.replace("-", "_")
        if value is None:
            return keyword
        shown = value if placeholder else repr(value)
        return f"{keyword}={shown}" if log is None else f"{keyword}={{{log!r}: {shown}}}"
    flag = f"--{name}"
    if value is None:
        return flag
    shown = repr(value) if quoted and not placeholder else value
    return f"{flag} {shown}" if log is None else f"{flag} {log}={shown}"
