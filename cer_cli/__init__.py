"""cer — complex event recognition over event logs (CEQL queries on CSV / Parquet / NDJSON)."""

import sys as _sys

__version__ = "0.1.0"

#: DataFrame API names and the errors it raises, loaded on first use so that ``import
#: cer_cli`` (the CLI's first import) stays cheap: polars, numba and the compiler load only
#: when one is used.
_LAZY = {"match": "cer_cli.frames", "count": "cer_cli.frames",
         "QueryError": "cer_cli.query.errors", "LogError": "cer_cli.io.contract"}


def __getattr__(name):
    """``cer_cli.match`` and ``cer_cli.count`` (``cer_cli.frames``), ``QueryError`` and
    ``LogError``, imported on first use."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'cer_cli' has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_LAZY])


def _quiet_interrupt(kind, value, tb, _default=_sys.excepthook):
    """Ctrl-C that arrives before the entry point has installed its handlers (while Python
    imports this package's first modules) still ends with one line and exit 130."""
    if issubclass(kind, KeyboardInterrupt):
        import os

        _sys.stderr.write("interrupted\n")
        _sys.stderr.flush()
        os._exit(130)
    _default(kind, value, tb)


# Only when this package is the program (`python -m cer_cli` while it is being located, or
# the `cer` script), never when a library user imports it.
if _sys.argv[:1] == ["-m"] or _sys.argv[0].rsplit("/", 1)[-1] == "cer":
    _sys.excepthook = _quiet_interrupt
