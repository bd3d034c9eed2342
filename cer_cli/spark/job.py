"""Run a compiled query on Spark: read the logs, number the events, fan out, merge.

1. **Read.** Spark reads every LOG (a file or a directory, any path or URI it can read:
   CSV with a header, Parquet, NDJSON or a JSON array) and builds the event frame of local
   mode (``cer_cli.events``). Every fact about a log — format, stream name, type and time
   column, column kinds, how time becomes TIME, the schema — is decided by the log
   contract (``cer_cli.io.contract``) that the local reader uses too; Spark types enter it
   through their Arrow types (``_kind``). ROW is the 0-based row in the log (for a
   directory: across its files in path order); integers are widened to 64 bits and floats
   to doubles as polars reads them.
2. **Number.** The union is sorted by (TIME, argument order, ROW), the order of the local
   reader, and POS is the rank in that order: a distributed sort, then per-partition counts
   turned into offsets (``_index``), so no single task sees the whole log.
3. **Fan out** as the plan's ``fanout`` says (see ``cer_cli.plan.fanout`` for why each one is
   exact): the events of each task are sorted by POS and streamed, Arrow batch by Arrow
   batch, into a fresh ``Engine`` (``mapInArrow``); a task of the ``ranges`` plan keeps only
   the matches ending in its own range.
4. **Merge.** Matches carry their end position and their rank within the task; the one
   task that reports a match ending at an event reports it in the engine's order, so sorting
   by (end, rank) gives local mode's order.

The driver ships ``cer_cli`` itself as a zip (``addPyFile``), so executors only need
Python with polars, pyarrow and numpy. Spark and input failures become ``SparkError``.
"""

from __future__ import annotations

import atexit
import logging
import math
import os
import pickle
import re
import shutil
import signal
import sys
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from itertools import accumulate
from pathlib import Path
from typing import TYPE_CHECKING

from cer_cli import signals
from cer_cli.events import POS, ROW, STREAM, TIME, TYPE, Match, Schema
from cer_cli.io import contract
from cer_cli.io.contract import LogError
from cer_cli.io.encoding import partition_json
from cer_cli.io.files import remove_open_parts
from cer_cli.io.output import (
    FRACTION_DIGITS,
    LIST_SEPARATOR,
    MATCH_COLUMNS,
    SECONDS_TEXT,
    UTC_OFFSET,
    VARS_SEPARATOR,
    OutputSpec,
)
from cer_cli.plan import Plan
from cer_cli.plan.fanout import PARTITION, RANGES
from cer_cli.query import ast
from cer_cli.query.errors import QueryError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


WRITE_FORMATS = ("parquet", "csv", "json")
DEFAULT_MASTER = "local[*]"
#: Session settings that make Spark read values as the local reader does.
SESSION_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",  # datetimes without zone are UTC, as in polars
    "spark.sql.timestampType": "TIMESTAMP_NTZ",  # CSV datetimes stay naive, as in polars
    "spark.ui.showConsoleProgress": "false",
}
_ARG = "__cer_arg"
_MID = "__cer_mid"
_FILE = "__cer_file"
_BLOCK = "__cer_block"
_QPOS = "__cer_qpos"  # position in the stream the query sees (after FROM)
_GROUP = "__cer_group"  # engine instance within a Spark partition (the range of `ranges`)
_OWN = "__cer_own"  # the event belongs to its task's own range (not its context)
_KEY = "__cer_key"
#: Spark SQL type of TIME per ``contract.time_storage``.
_TIME_TYPES = {"int64": "long", "float64": "double"}
MATCH_SCHEMA = (
    "end long, seq long, start long, "
    "events array<struct<position: long, vars: array<string>>>, partition binary, "
    "partition_json string"
)


@dataclass
class SparkError(Exception):
    """A failure of a Spark run. ``input_error`` tells whose: ``True`` for the user's input
    (a log that cannot be read, a bad column, a bad master URL: exit code 2), ``False`` for
    the runtime (no Java, no pyspark, a failed job: exit code 1); ``exit_code`` says it."""

    message: str
    hints: list[str] = field(default_factory=list)
    input_error: bool = False

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        return 2 if self.input_error else 1

    def render(self) -> str:
        return "\n".join([f"error: {self.message}", *(f"  hint: {h}" for h in self.hints)])

    def __str__(self) -> str:
        return self.render()


# --------------------------------------------------------------------------- pre-flight

#: The master URL forms Spark accepts (checked before the JVM starts, which otherwise blames
#: JAVA_HOME for a typo or spends minutes retrying an unreachable master).
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://URL, mesos://URL"
_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)(\s*,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]")
CONNECT_TIMEOUT = 3.0
#: Bytes of local log per shuffle partition (``_Run.size_shuffles``): Spark's advisory
#: partition size.
SHUFFLE_BYTES = 64 << 20
#: Prefixes and keys of the Spark settings `--spark-conf` accepts without a warning: a
#: documented allowlist (Spark's own list needs a JVM), common enough for real jobs.
KNOWN_CONF = (
    "spark.executor.", "spark.driver.", "spark.sql.", "spark.default.", "spark.master",
    "spark.app.", "spark.serializer", "spark.network.", "spark.shuffle.", "spark.memory.",
    "spark.local.", "spark.ui.", "spark.dynamicAllocation.", "spark.eventLog.", "spark.jars",
    "spark.submit.", "spark.python.", "spark.pyspark.", "spark.task.", "spark.cores.",
    "spark.hadoop.", "spark.kubernetes.", "spark.yarn.", "spark.files", "spark.kryo",
    "spark.rpc.", "spark.speculation", "spark.storage.", "spark.io.", "spark.broadcast.",
    "spark.scheduler.", "spark.authenticate", "spark.ssl.", "spark.log.", "spark.archives",
    "spark.checkpoint.", "spark.rdd.", "spark.worker.", "spark.deploy.", "spark.kerberos.",
)


def check_master(master: str | None, connect: bool = True) -> None:
    """Refuse (``SparkError``, exit 2) a master URL Spark would not accept, and a
    ``spark://`` master whose host does not resolve or does not answer within
    ``CONNECT_TIMEOUT`` seconds, before any JVM starts."""
    if master is None:
        return
    m = master.strip()
    hints = [f"accepted forms: {MASTER_FORMS}"]
    if _LOCAL_MASTER.fullmatch(m) or m == "yarn":
        return
    if m.startswith(("k8s://", "mesos://")) and len(m.split("://", 1)[1]) > 0:
        return
    if not m.startswith("spark://"):
        raise SparkError(f"bad Spark master URL {master!r}", hints, input_error=True)
    for hostport in m[len("spark://"):].split(","):  # HA masters: spark://h1:p1,h2:p2
        host, sep, port = hostport.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise SparkError(f"bad Spark master URL {master!r}: expected spark://HOST:PORT",
                             hints, input_error=True)
        if connect:
            _reach(master, host.strip("[]"), int(port))


def _reach(master: str, host: str, port: int) -> None:
    import socket

    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        raise SparkError(f"Spark master {master!r}: unknown host {host!r}",
                         ["check the host name of the master URL"], input_error=True) from None
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as e:
        raise SparkError(
            f"Spark master {master!r}: cannot connect to {host}:{port}"
            f" ({e.strerror or type(e).__name__} within {CONNECT_TIMEOUT:g} s)",
            ["check that the master runs and the port is its RPC port (7077 by default)"],
            input_error=True,
        ) from None


def unknown_conf_keys(conf: dict[str, str] | None) -> list[str]:
    """The keys of ``conf`` Spark probably does not know: ``spark.*`` keys outside
    ``KNOWN_CONF`` (a typo is otherwise silently accepted), and keys that are neither
    ``spark.*`` nor this tool's ``cer.*`` (Spark ignores them)."""
    return [k for k in (conf or {})
            if not k.startswith("cer.") and not (k.startswith("spark.") and k.startswith(KNOWN_CONF))]


def check_output_dir(output: str) -> str:
    """Where ``spark_write`` may write ``output`` (a directory): refuse (exit 2) an existing
    file or non-empty directory before Spark starts; returns the save mode ("overwrite" for
    an existing empty directory, which Spark would otherwise refuse). Paths with a URI scheme
    other than file: are left to Spark."""
    if re.match(r"^[A-Za-z][\w+.-]*://", output) and not output.startswith("file://"):
        return "errorifexists"
    path = Path(output[len("file://"):] if output.startswith("file://") else output)
    if path.is_dir() and not any(path.iterdir()):
        return "overwrite"
    if path.exists() or path.is_symlink():
        what = "a directory that is not empty" if path.is_dir() else "an existing file"
        raise SparkError(f"-o {output}: {what}; Spark writes the matches as a new directory",
                         ["remove it or choose another -o path"], input_error=True)
    if not path.parent.is_dir():  # cannot write the output: exit 1, as for a local -o
        raise SparkError(f"-o {output}: no directory {str(path.parent)!r}",
                         ["create it first or choose another -o path"])
    return "errorifexists"


# --------------------------------------------------------------------------- session


def spark_session(master: str | None = None, conf: dict[str, str] | None = None) -> SparkSession:
    """The active SparkSession (e.g. under spark-submit) or a new one.

    ``master=None`` leaves the choice to Spark (``spark-submit --master``, ``spark.master``
    in ``$SPARK_HOME/conf/spark-defaults.conf``), falling back to ``local[*]``. ``conf``
    entries override ``SESSION_DEFAULTS``. For local masters the executors run this Python
    (``sys.executable``) unless ``PYSPARK_PYTHON`` says otherwise; for a cluster, set
    ``PYSPARK_PYTHON`` or pass ``spark.pyspark.python`` in ``conf``.
    """
    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkError(
            "pyspark is not installed", ["pip install 'cer-cli[spark]' (pyspark 4)"]
        ) from None
    conf = {**SESSION_DEFAULTS, **(conf or {})}
    _stopping.update(pids={}, partial=None)
    signals.guard(SIGNAL_DEADLINE, _stop_processes, _end_run)  # pyspark can hold the main thread
    active = SparkSession.getActiveSession()
    if active is None or (master is not None and active.sparkContext.master != master):
        check_master(master if master is not None else conf.get("spark.master"))
        if active is not None:
            active.stop()
        if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
            raise SparkError(
                "Spark needs Java, and no java was found",
                ["install Java 17 or 21, or set JAVA_HOME"],
            )
        builder = SparkSession.builder.appName("cer match")
        if master is None and "spark.master" not in conf and not _configured_master(SparkConf):
            master = DEFAULT_MASTER
        if master is not None:
            builder = builder.master(master)
        chosen = master or conf.get("spark.master", "")
        python = conf.get("spark.pyspark.python") or (
            sys.executable if chosen.startswith("local") else None
        )
        if python and "PYSPARK_PYTHON" not in os.environ:
            os.environ["PYSPARK_PYTHON"] = python  # pyspark reads the workers' Python here
        for k, v in conf.items():
            builder = builder.config(k, v)
        _own_scratch(conf)
        try:
            spark = _create(builder)
        except Exception as e:
            signals.check()  # a Ctrl-C while the JVM started ends as the signal
            raise _spark_error(e, master=master) from None
        signals.reclaim()  # should a SparkContext have replaced the SIGINT handler all the same
    else:
        spark = active
        for k, v in conf.items():
            if k.startswith("spark.sql."):
                spark.conf.set(k, v)
    spark.sparkContext.setLogLevel(conf.get("cer.logLevel", "FATAL"))
    _ship_package(spark)
    return spark


def _create(builder) -> SparkSession:
    """``builder.getOrCreate()`` in a helper thread: SparkContext installs its own SIGINT
    handler (cancel the jobs from inside the handler, then a KeyboardInterrupt: py4j
    tracebacks) only when created in the main thread, and cer reclaims the signal only after
    ``getOrCreate`` returns. The main thread waits in short joins, so a signal while the JVM
    starts is handled at once."""
    result: dict = {}

    def start() -> None:
        try:
            result["spark"] = builder.getOrCreate()
        except BaseException as e:  # handed to the main thread
            result["error"] = e

    thread = threading.Thread(target=start, name="cer-spark-start", daemon=True)
    thread.start()
    while thread.is_alive():
        thread.join(0.1)
        signals.check()
    if "error" in result:
        raise result["error"]
    return result["spark"]


# --------------------------------------------------------------------------- signals

#: Seconds from a signal to the end of a Spark run, however stuck its main thread is.
SIGNAL_DEADLINE = 1.0
_stopping: dict = {"pids": {}, "partial": None, "scratch": None}


def _own_scratch(conf: dict[str, str]) -> None:
    """Have the JVM and its workers keep their scratch files (``spark-*``, ``blockmgr-*``:
    shuffle and cached blocks, fetched files) in a directory of cer's, unless the user
    chose one (``SPARK_LOCAL_DIRS``, ``spark.local.dir``): a signal SIGKILLs the JVM, whose
    shutdown would have deleted them, and ``_end_run`` removes the directory instead."""
    if ("SPARK_LOCAL_DIRS" in os.environ or "spark.local.dir" in conf
            or _in_defaults("spark.local.dir") or "PYSPARK_GATEWAY_PORT" in os.environ):
        return  # the user's choice, or spark-submit's JVM (not below cer: not killed)
    scratch = tempfile.mkdtemp(prefix="cer-spark-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["SPARK_LOCAL_DIRS"] = scratch  # the JVM and pyspark's workers read it
    _stopping["scratch"] = scratch


def _stop_processes() -> None:
    """On a signal (``signals.guard``): SIGKILL every process below cer (the JVM, pyspark's
    daemon and its Python workers, which would compute on after cer exits). The main
    thread's pending py4j calls then fail at once instead of waiting for the job. SIGKILL,
    not SIGTERM: a JVM shutting down with a job running prints Java stack traces. Logging
    is switched off: py4j logs the lost connection with tracebacks, some through the root
    logger (cer itself does not log); so are the tracebacks of pyspark's threads that lose
    the JVM (its accumulator server prints them as a ``socketserver``)."""
    logging.disable(logging.CRITICAL)
    threading.excepthook = lambda args: None
    try:
        from pyspark import SparkContext

        server = getattr(SparkContext._active_spark_context, "_accumulatorServer", None)
        if server is not None:
            server.handle_error = lambda request, address: None
    except Exception:
        pass
    _kill_processes()


def _end_run() -> None:
    """Before a signal's exit: SIGKILL what is still below cer, then remove what the run
    was writing and the JVM's scratch files (the JVM is gone, it writes no more)."""
    _kill_processes()
    remove_open_parts()
    if _stopping["partial"] is not None:
        _remove_partial(*_stopping["partial"])
    if _stopping["scratch"] is not None:
        shutil.rmtree(_stopping["scratch"], ignore_errors=True)


def _kill_processes() -> None:
    """SIGKILL every process below cer, and those found below it before (a process whose
    parent died moves to init)."""
    _stopping["pids"].update(_descendants())
    for pid, start in list(_stopping["pids"].items()):
        fields = _stat(pid)
        if fields is not None and fields[19] == start and fields[0] not in "ZX":  # not reused
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def _stat(pid: int) -> list[str] | None:
    """Fields of ``/proc/PID/stat`` after the command name: state, ppid, ..."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode("ascii", "replace")
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def _descendants() -> dict[int, str]:
    """Every process below this one (Linux ``/proc``; elsewhere none), pid -> start time."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return {}
    children: dict[int, list[int]] = {}
    started: dict[int, str] = {}
    for pid in pids:
        fields = _stat(pid)
        if fields and len(fields) > 19:
            children.setdefault(int(fields[1]), []).append(pid)
            started[pid] = fields[19]
    found: dict[int, str] = {}
    todo = [os.getpid()]
    while todo:
        for kid in children.get(todo.pop(), ()):
            if kid not in found:
                found[kid] = started[kid]
                todo.append(kid)
    return found


def _remove_partial(output: str, mode: str) -> None:
    """Remove what an interrupted ``spark_write`` left of ``output``: the directory, or its
    content if it existed (empty) before the run. Local paths only."""
    if re.match(r"^[A-Za-z][\w+.-]*://", output) and not output.startswith("file://"):
        return
    path = Path(output[len("file://"):] if output.startswith("file://") else output)
    if mode != "overwrite":
        shutil.rmtree(path, ignore_errors=True)
        return
    try:
        entries = list(path.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def _configured_master(spark_conf_cls) -> bool:
    """Whether spark-submit or spark-defaults.conf already chose a master."""
    if os.environ.get("MASTER") or _in_defaults("spark.master"):
        return True
    return "--master" in os.environ.get("PYSPARK_SUBMIT_ARGS", "")


def _in_defaults(key: str) -> bool:
    """Whether ``$SPARK_CONF_DIR`` or ``$SPARK_HOME/conf``'s spark-defaults.conf sets ``key``."""
    home = os.environ.get("SPARK_CONF_DIR") or (
        os.path.join(os.environ["SPARK_HOME"], "conf") if os.environ.get("SPARK_HOME") else None
    )
    if home and os.path.isfile(os.path.join(home, "spark-defaults.conf")):
        with open(os.path.join(home, "spark-defaults.conf"), encoding="utf-8") as f:
            return any(line.split()[:1] == [key] for line in f)
    return False


_shipped: dict[str, str] = {}


def _ship_package(spark: SparkSession) -> None:
    """Zip ``cer_cli`` once per process and add it to the executors' Python path, unless
    the executors are local Python processes that import this very ``cer_cli`` anyway.

    Skipping the zip there matters beyond shipping it: Spark copies it into a new directory
    per application, so the workers compiled every module from source and numba, whose
    cache is keyed by the source's directory, recompiled the kernel (~20 s) in every
    Python worker of every run; the installed package has its ``__pycache__`` and numba
    cache, warm from local runs."""
    sc = spark.sparkContext
    if _shipped.get("app") == sc.applicationId:
        return
    if sc.master.startswith("local") and _workers_import_this():
        _shipped["app"] = sc.applicationId
        return
    root = Path(__file__).resolve().parents[1]
    path = _shipped.get("zip")
    if path is None:
        folder = tempfile.mkdtemp(prefix="cer-spark-")
        # Executors fetch the zip while the application runs: removed when this process ends.
        atexit.register(shutil.rmtree, folder, True)
        path = os.path.join(folder, "cer_cli.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for f in sorted(root.rglob("*")):
                if f.is_file() and "__pycache__" not in f.parts and f.suffix in (".py", ".lark"):
                    z.write(f, Path("cer_cli") / f.relative_to(root))
        _shipped["zip"] = path
    sc.addPyFile(path)
    _shipped["app"] = sc.applicationId


def _workers_import_this() -> bool:
    """Whether a fresh process of the local executors' Python (``PYSPARK_PYTHON``), with
    their environment and working directory (this process's), imports ``cer_cli`` from
    where this one was imported."""
    if "workers" not in _shipped:
        import subprocess

        python = os.environ.get("PYSPARK_PYTHON") or sys.executable
        code = "import importlib.util as u; s = u.find_spec('cer_cli'); print(s and s.origin)"
        try:
            out = subprocess.run([python, "-c", code], capture_output=True, text=True,
                                 timeout=30).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            out = ""
        here = str(Path(__file__).resolve().parents[1] / "__init__.py")
        _shipped["workers"] = "yes" if out and os.path.realpath(out) == os.path.realpath(here) else ""
    return _shipped["workers"] == "yes"


#: Java exceptions and Spark error classes that mean the input cannot be read (a path, a
#: host, a file's format or permissions): the user's to fix, exit code 2.
_INPUT_FAILURES = (
    "FAILED_READ_FILE", "CANNOT_READ_FILE_FOOTER", "UnknownHostException", "ConnectException",
    "FileNotFoundException", "AccessControlException", "AccessDeniedException",
    "Permission denied", "UnsupportedFileSystemException", "No FileSystem for scheme",
    "is not a Parquet file", "INVALID_PATH", "UNABLE_TO_INFER_SCHEMA", "MALFORMED_RECORD",
)
_JAVA_EXCEPTION = re.compile(r"^:?\s*(?:Caused by: )?([\w$]+\.)*([\w$]*(?:Exception|Error)):\s*(.+)$")


def _meaningful(text: str, default: str) -> str:
    """The first line of a py4j error that says what went wrong: py4j's "An error occurred
    while calling o35.parquet." names only the call, the Java exception's message follows
    (without its class, error-class tag and SQLSTATE)."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines:
        return default
    if not lines[0].startswith("An error occurred while calling"):
        return lines[0]
    for ln in lines[1:]:
        m = _JAVA_EXCEPTION.match(ln)
        if m:
            msg = re.sub(r"^\[[A-Z_.]+\]\s*", "", m.group(3))
            msg = re.sub(r"\s*SQLSTATE: \w+$", "", msg)
            return msg if m.group(2) in ("SparkException", "AnalysisException") else (
                f"{m.group(2)}: {msg}" if not msg.startswith(m.group(2)) else msg)
    return lines[0]


def _spark_error(e: BaseException, master: str | None = None, what: str = "") -> SparkError:
    """A readable ``SparkError`` from whatever Spark or py4j raised: one line, the input's
    failures (unreadable files, unknown hosts) as input errors."""
    text = str(e)
    first = _meaningful(text, type(e).__name__)
    if "PythonException" in text or "Traceback" in text:  # a task's Python failed
        errors = [ln.strip() for ln in text.splitlines() if re.match(r"\s*[\w.]+(Error|Exception):", ln)]
        first = errors[-1] if errors else first
    if "QueryError" in text:  # raised by an engine inside a task
        lines = [ln for ln in text.splitlines() if "QueryError" in ln]
        msg = lines[-1].split("QueryError:", 1)[-1].strip() if lines else first
        return SparkError(f"{what}{msg}", input_error=True)
    if "Master" in text and ("parse" in text or "URL" in text):
        return SparkError(
            f"bad Spark master URL {master!r}",
            ["use local[*], local[N], spark://HOST:PORT, yarn or k8s://..."],
            input_error=True,
        )
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway" in text:
        return SparkError(
            "could not start Spark's JVM", ["check JAVA_HOME and that Java 17+ runs"]
        )
    if "PATH_NOT_FOUND" in text or "does not exist" in text:
        return SparkError(f"{what}{first}", ["check the path or URI of the log"], input_error=True)
    if any(marker in text for marker in _INPUT_FAILURES):
        return SparkError(f"{what}{first}", ["check the path, host and format of the log"],
                          input_error=True)
    if type(e).__name__ == "AnalysisException":
        return SparkError(f"{what}{first}", input_error=True)
    return SparkError(f"{what}Spark failed: {first}", ["rerun with --debug for details"])


# --------------------------------------------------------------------------- reading


@contextmanager
def _input():
    """The contract's ``LogError`` as Spark's input error (exit code 2), message kept."""
    try:
        yield
    except LogError as e:
        raise SparkError(e.message, e.hints, input_error=True) from None


def _col(name: str):
    """Column ``name`` taken literally (a dot or space in a log's column name is no path)."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


@dataclass(frozen=True)
class _Source:
    name: str
    path: str
    format: str


def _source(spec: str, fmt: str | None) -> _Source:
    """``path`` or ``NAME=path`` and its format, as the contract says; a directory without
    a known extension has the format all its files share."""
    name, path = contract.split_log_arg(spec)
    members: list[str] = []
    if fmt is None and os.path.isdir(path):
        members = [p.name for p in Path(path).iterdir() if p.is_file()]
    with _input():
        fmt = contract.log_format(path, fmt, members)
    return _Source(contract.stream_name(name, path), path, fmt)


def _load(spark: SparkSession, src: _Source, schema=None) -> DataFrame:
    """The log as Spark reads it; a CSV with the types Spark infers, or ``schema``."""
    r = spark.read
    try:
        if src.format == "csv" and schema is not None:
            return r.schema(schema).options(header=True).csv(src.path)
        if src.format == "csv":
            return r.options(header=True, inferSchema=True).csv(src.path)
        if src.format == "parquet":
            return r.parquet(src.path)
        df = r.json(src.path)
        if src.format == "json" and df.columns == ["_corrupt_record"]:
            df = r.option("multiLine", True).json(src.path)  # a JSON array, not NDJSON
        return df
    except Exception as e:
        raise _spark_error(e, what=f"cannot read {src.path} as {src.format}: ") from None


def _kind(dtype) -> str | None:
    """The contract's kind of a Spark type, read off the Arrow type Spark gives it."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return contract.kind_of(to_arrow_type(dtype, timezone="UTC"))
    except Exception:  # types Arrow cannot carry (intervals, variants) are unusable
        return None


@dataclass
class _Log:
    """A loaded log and the contract's decision on it (``contract.LogDecision``), which the
    Spark reader interprets: its frame has the kinds the decision says. ``time_values``: what
    the schema pass (or ``_judge_times``) learnt of its time values, for ``judge_times``."""

    src: _Source
    df: DataFrame
    decision: contract.LogDecision
    time_values: contract.TimeValues | None = None

    @property
    def index(self) -> int:
        return self.decision.index

    @property
    def type_column(self) -> str | None:
        return self.decision.type_column

    @property
    def time_column(self) -> str | None:
        return self.decision.time_column

    @property
    def by_files(self) -> bool:
        """Whether ROW counts rows of files (a DataFrame, or an empty log read as nulls, has
        none: its ROW is its rank in partition order)."""
        return self.src.format != FRAME and not self.decision.empty


#: The format of an in-memory log (a user's DataFrame, ``_frame_log``), as in ``io.read``.
FRAME = "frame"


def _open(spark, specs: list[str], type_column, log_format, time=None) -> list[_Log]:
    """Load the logs and have the contract decide how each is read (``contract.decide``),
    as the local reader does.

    `cer match --spark` opens the same logs twice (``spark_schema``, then the run): the
    last opening is reused while the application and the local files' sizes and times are
    the same, because a CSV's ``inferSchema`` is a Spark job that reads the whole file."""
    if not specs:
        raise SparkError("no event log given", input_error=True)
    key = (spark.sparkContext.applicationId, tuple(specs), type_column, log_format, time,
           tuple(_stamp(contract.split_log_arg(s)[1]) for s in specs))
    if None not in key[-1] and _opened.get("key") == key:
        return _opened["logs"]
    loaded = []
    for spec in specs:
        src = _source(spec, log_format)
        loaded.append((src, _load(spark, src)))
    logs = _decide(spark, loaded, type_column, time)
    _opened.update(key=key, logs=logs)
    return logs


_opened: dict = {}


def _stamp(path: str) -> tuple | None:
    """Size and modification time of a local file or directory's files (None for a URI or
    a path this process cannot see: never reused then)."""
    if re.match(r"^[A-Za-z][\w+.-]*://", path) and not path.startswith("file://"):
        return None
    p = Path(path[len("file://"):] if path.startswith("file://") else path)
    try:
        files = sorted(p.rglob("*")) if p.is_dir() else [p]
        return tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files if f.is_file())
    except OSError:
        return None


def _input_bytes(specs: list[str]) -> int | None:
    """Total size of the logs when they are all local (None when one is not)."""
    total = 0
    for spec in specs:
        stamp = _stamp(contract.split_log_arg(spec)[1])
        if not stamp:
            return None
        total += sum(s for _, s, _ in stamp)
    return total


def _frame_log(df: DataFrame, stream: str, type_column, time=None) -> list[_Log]:
    """A user's DataFrame as the one log ``<stream>`` (named as ``io.read.read_frame``
    names an in-memory log), with the contract's decisions of a file log."""
    return _decide(df.sparkSession, [(_Source(stream, f"<{stream}>", FRAME), df)], type_column,
                   time)


def _seen(index: int, src: _Source, df: DataFrame) -> contract.LogDecision:
    """What the Spark reader sees of a log, for ``contract.decide``: its columns' kinds
    (through their Arrow types) and type names, and, when the kinds may be a guess from no
    value (``contract.untyped``), whether it has a row (one small job)."""
    fields = df.schema.fields
    kinds = {f.name: _kind(f.dataType) for f in fields}
    seen = contract.LogDecision(src.path, src.name, kinds,
                                types={f.name: f.dataType.simpleString() for f in fields},
                                format=src.format, index=index)
    if contract.untyped(src.format, kinds):
        try:
            seen = replace(seen, empty=not df.take(1))
        except Exception as e:
            raise _spark_error(e, what=f"cannot read {src.path} as {src.format}: ") from None
    return seen


def _decide(spark, loaded: list[tuple[_Source, DataFrame]], type_column, time) -> list[_Log]:
    """The contract's decisions on loaded logs (files or a DataFrame), each log's frame made
    to have the kinds decided: an empty log's columns null, a time column of texts that
    Spark's CSV inference typed as timestamps read again as text."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    with _input():
        seen = [_seen(i, src, df) for i, (src, df) in enumerate(loaded)]
        decided = contract.decide(seen, type_column, time)
    logs = []
    for (src, df), d in zip(loaded, decided, strict=True):
        if d.empty:
            df = df.select(*(F.lit(None).alias(c) for c in df.columns))
        elif d.time_kind == "str" and not isinstance(df.schema[d.time_column].dataType,
                                                     T.StringType):
            fields = [T.StructField(f.name, T.StringType()) if f.name == d.time_column else f
                      for f in df.schema.fields]
            df = _load(spark, src, T.StructType(fields))
        logs.append(_Log(src, df, d))
    return logs


def _with_rows(spark, df: DataFrame) -> DataFrame:
    """ROW: the row's rank in the log, files in path order, rows in file order.

    Rows of one file block are read consecutively by one task, so the rank is the block's
    offset (rows of earlier blocks) plus the row's distance from the block's first row.
    """
    from pyspark.sql import functions as F

    df = df.select(
        "*",
        F.col("_metadata.file_path").alias(_FILE),
        F.col("_metadata.file_block_start").alias(_BLOCK),
        F.monotonically_increasing_id().alias(_MID),
    )
    blocks = sorted(df.groupBy(_FILE, _BLOCK).agg(F.min(_MID), F.count("*")).collect())
    offsets = list(accumulate((b[3] for b in blocks), initial=0))
    base = spark.createDataFrame(
        [(b[0], b[1], off - b[2]) for b, off in zip(blocks, offsets, strict=False)],
        f"{_FILE} string, {_BLOCK} long, base long",
    )
    joined = df.join(F.broadcast(base), [_FILE, _BLOCK])
    return joined.withColumn(ROW, F.col(_MID) + F.col("base")).drop(_FILE, _BLOCK, _MID, "base")


def _time_expr(d: contract.LogDecision):
    """TIME of a log as its decision ``d`` says (``contract.time_kind``): numbers as they
    are, or with a unit as ns since the epoch (null beyond int64, as locally); datetimes
    (texts parsed by ``_parse_time``) as ns since the epoch (Spark keeps microseconds). NaN
    is null."""
    from pyspark.sql import functions as F

    col = _col(d.time_column)
    kind = d.time_kind
    if kind in ("int", "float"):
        ok = col.isNotNull()
        if kind == "float":
            ok = ok & ~F.isnan(col) & (F.abs(col) != float("inf"))
        if d.time_unit is None:
            return F.when(ok, col)
        ok = ok & (F.abs(col) <= contract.unit_bound(d.time_unit))
        factor = F.lit(contract.TIME_UNITS[d.time_unit]).cast("long")
        if kind == "int":  # try_: ANSI mode may evaluate the product even where not ok
            return F.when(ok, F.try_multiply(col.cast("long"), factor))
        return F.when(ok, F.round(col.cast("double") * factor).cast("long"))
    if kind == "str":
        col = _parse_time(col, d.time_format)
    return F.unix_micros(col.cast("timestamp_ltz")) * 1000


def _time_value(d: contract.LogDecision, time):
    """The log's time column as the event frame shows it when the decision reads it as
    datetimes: parsed texts (UTC instants when ``time_zoned``), or numbers with a unit as the
    timestamps of ``time``, the log's TIME in ns."""
    from pyspark.sql import functions as F

    if d.time_kind == "str":
        return _parse_time(_col(d.time_column), d.time_format, d.time_zoned)
    return F.timestamp_micros(F.floor(time / 1000)).cast("timestamp_ntz")


#: strftime directive -> Java DateTimeFormatter pattern, for --time-format on Spark.
_JAVA_PATTERN = {"Y": "yyyy", "y": "yy", "m": "MM", "d": "dd", "H": "HH", "M": "mm",
                 "S": "ss", "f": "SSSSSS", "z": "xx", "b": "MMM", "B": "MMMM", "I": "hh",
                 "p": "a", "j": "DDD", "%": "%"}


def _java_pattern(fmt: str) -> str:
    """``--time-format`` (strftime) as a Java pattern: literal text quoted, directives
    translated; a directive without a translation is an input error, not a guess."""
    out, i = [], 0
    while i < len(fmt):
        ch = fmt[i]
        if ch == "%" and i + 1 < len(fmt):
            d = fmt[i + 1]
            if d not in _JAVA_PATTERN:
                raise SparkError(f"--time-format {fmt!r}: %{d} is not supported with --spark",
                                 ["supported: " + " ".join("%" + k for k in _JAVA_PATTERN)],
                                 input_error=True)
            out.append(_JAVA_PATTERN[d] if d != "%" else "'%'")
            i += 2
            continue
        out.append("''" if ch == "'" else (f"'{ch}'" if ch.isalpha() else ch))
        i += 1
    return "".join(out)


def _parse_time(col, fmt: str | None = None, zoned: bool = False):
    """Time texts as naive timestamps, or ``zoned`` as UTC instants (Spark's TIMESTAMP),
    null when unreadable, as the local reader parses them: with ``fmt`` by it, else only
    ``contract.ISO_TIME`` values; an offset or Z is honoured, a naive value is UTC (the
    session's zone)."""
    from pyspark.sql import functions as F

    kind = "timestamp_ltz" if zoned else "timestamp_ntz"
    if fmt is not None:
        return F.try_to_timestamp(col, F.lit(_java_pattern(fmt))).cast(kind)
    text = F.trim(col)
    # Spark's cast reads neither +0100 (ISO's basic form) nor HH:MM before an offset, which
    # polars reads: written as +01:00 and HH:MM:00 first
    seconds = F.regexp_replace(text, r"^(\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2})(Z|[+-].*)$",
                               "$1:00$2")
    iso = F.when(text.rlike(contract.ISO_TIME),
                 F.regexp_replace(seconds, r"([+-]\d{2})(\d{2})$", "$1:$2"))
    return iso.try_cast("timestamp_ltz").cast(kind)


@dataclass
class _Events:
    """The event frame on Spark: ``frame`` (columns of the logs + RESERVED, ordered
    partitions), the log's own ``columns``, the ``time_column``, ``n`` events."""

    frame: DataFrame
    columns: list[str]
    time_column: str | None
    n: int | None  # None for a lazy run: counted only when a ``ranges`` plan needs it
    logs: list[_Log]

    @property
    def time_columns(self) -> tuple[str, ...]:
        """The logs' time columns, each once (``OutputSpec.time_columns``)."""
        return tuple(dict.fromkeys(g.time_column for g in self.logs if g.time_column))


class _Run:
    """Holds what a run persisted, to release it at the end.

    A ``lazy`` run (``cer_cli.spark.match``) builds its result without any action: it
    persists nothing (a lazy result has no end at which to unpersist), numbers rows by a
    join with per-partition counts instead of collecting them, and reports bad rows by
    ``raise_error`` when the result is computed instead of by a look-up up front."""

    def __init__(self, spark: SparkSession, lazy: bool = False) -> None:
        self.spark = spark
        self.lazy = lazy
        self.cached: list[DataFrame] = []
        self.restore: dict[str, str] = {}

    def size_shuffles(self, specs: list[str]) -> None:
        """Shuffle into as many partitions as the logs need, not Spark's fixed 200: every
        sort and repartition of a run is a stage of that many tasks, and AQE cannot
        coalesce the persisted ones (``canChangeCachedPlanOutputPartitioning``). On the
        3,000-event bench log those stages took ~12 of ~22 s on 2 cores. The setting is
        left alone when the user gave it (``--spark-conf``, spark-defaults, a session
        that changed it) or a log is not a local file, and restored by ``close``."""
        key = "spark.sql.shuffle.partitions"
        if self.lazy or self.spark.sparkContext.getConf().contains(key):
            return
        current = self.spark.conf.get(key, "200")
        size = _input_bytes(specs)
        if current != "200" or size is None:
            return
        parallelism = self.spark.sparkContext.defaultParallelism
        self.restore[key] = current
        self.spark.conf.set(key, str(max(parallelism, math.ceil(size / SHUFFLE_BYTES))))

    def persist(self, df: DataFrame) -> DataFrame:
        if self.lazy:
            return df
        df = df.persist()
        self.cached.append(df)
        return df

    def close(self) -> None:
        for df in self.cached:
            df.unpersist()
        for k, v in self.restore.items():
            self.spark.conf.set(k, v)

    def rank(self, df: DataFrame, name: str, *order) -> tuple[DataFrame, int | None]:
        """Number the rows 0.. in ``order``. A lazy run ranks in one window: numbering a
        sorted frame by partition offsets reads the sort twice, and each read samples its
        own range bounds (seeded by the RDD's id), so offsets and rows would disagree."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        if not self.lazy:
            return self.index(df.orderBy(*order), name)
        return df.withColumn(name, F.row_number().over(Window.orderBy(*order)) - 1), None

    def index(self, df: DataFrame, name: str) -> tuple[DataFrame, int | None]:
        """Number the rows 0.. in partition order: per-partition counts become offsets
        (the count is None for a lazy run, which never collects them)."""
        from pyspark.sql import functions as F

        if self.lazy:
            return _number(df, name), None
        df = self.persist(df.withColumn(_MID, F.monotonically_increasing_id()))
        pid = F.shiftright(F.col(_MID), 33)  # monotonically_increasing_id's partition bits
        counts = dict(df.groupBy(pid.alias("p")).count().collect())
        nparts = df.rdd.getNumPartitions()
        offsets = list(accumulate((counts.get(p, 0) for p in range(nparts)), initial=0))
        table = F.array(*(F.lit(o).cast("long") for o in offsets[:-1]))
        value = F.element_at(table, (pid + 1).cast("int")) + F.col(_MID) - F.shiftleft(pid, 33)
        return df.withColumn(name, value).drop(_MID), offsets[-1]

    def events(self, specs, type_column, time_column, fmt) -> _Events:
        self.size_shuffles(specs)
        return self.event_frame(_open(self.spark, specs, type_column, fmt, time_column))

    def event_frame(self, logs: list[_Log]) -> _Events:
        """The event frame of opened logs (files or a DataFrame): TYPE, STREAM, TIME, ROW
        and the widened columns, numbered by POS in the local reader's order."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        tc = next((g.time_column for g in logs if g.time_column), None)
        _judge_times(logs)
        with _input():
            time_kind = contract.event_time_kind([g.decision for g in logs])
        time_type = _TIME_TYPES[contract.time_storage(time_kind or "int")]
        frames, columns = [], []
        for g in logs:
            d = g.decision
            # a DataFrame has no files: ROW is its rank in the frame's partition order
            df = _with_rows(self.spark, g.df) if g.by_files else self.index(g.df, ROW)[0]
            widened = []
            ttime = F.lit(None) if d.time_column is None else _time_expr(d)
            for f in g.df.schema.fields:
                c = _col(f.name)
                if f.name == d.time_column and d.reads_time_as_datetime:
                    c = _time_value(d, ttime)
                elif isinstance(f.dataType, T.ByteType | T.ShortType | T.IntegerType):
                    c = c.cast("long")
                elif isinstance(f.dataType, T.FloatType):
                    c = c.cast("double")
                if f.name != d.type_column:
                    widened.append(c.alias(f.name))
                    if f.name not in columns:
                        columns.append(f.name)
            etype = F.lit(g.src.name) if d.type_column is None else _col(d.type_column)
            frames.append(df.select(
                *widened,
                etype.cast("string").alias(TYPE),
                F.lit(g.src.name).alias(STREAM),
                ttime.cast(time_type).alias(TIME),
                F.col(ROW),
                F.lit(d.index).cast("long").alias(_ARG),
            ))
        union = frames[0]
        try:
            for f in frames[1:]:
                union = union.unionByName(f, allowMissingColumns=True)
        except Exception as e:
            raise _spark_error(e, what="the logs have incompatible columns: ") from None
        frame, n = self.rank(union, POS, F.col(TIME).asc_nulls_first(), _ARG, ROW)
        if self.lazy:
            return _Events(_fail_on_bad_rows(frame, logs, tc).drop(_ARG), columns, tc, n, logs)
        bad = frame.filter(F.col(TYPE).isNull() | (F.col(TIME).isNull() if tc else F.lit(False)))
        row = bad.select(_ARG, ROW, F.col(TYPE).isNull().alias("t")).limit(1).collect()
        if row:
            g = logs[row[0][0]]
            if row[0][2]:
                raise SparkError(f"{g.src.path}: data row {row[0][1]} (0-based): no event type"
                                 f" in column {g.type_column!r}", input_error=True)
            raise _time_error(self.spark, g)
        return _Events(frame.drop(_ARG), columns, tc, n, logs)


def _number(df: DataFrame, name: str) -> DataFrame:
    """``_Run.index`` without an action: the per-partition counts stay a (small) frame whose
    running sum, broadcast and joined back by partition id, gives each row its offset."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    pid, off = "__cer_pid", "__cer_off"
    df = df.withColumn(_MID, F.monotonically_increasing_id())
    df = df.withColumn(pid, F.shiftright(F.col(_MID), 33))
    counts = df.groupBy(pid).count()
    offsets = counts.select(pid, (F.sum("count").over(Window.orderBy(pid)) - F.col("count"))
                            .alias(off))
    value = F.col(off) + F.col(_MID) - F.shiftleft(F.col(pid), 33)
    return (df.join(F.broadcast(offsets), pid).withColumn(name, value)
            .drop(_MID, pid, off))


def _fail_on_bad_rows(frame: DataFrame, logs: list[_Log], tc: str | None) -> DataFrame:
    """The lazy run's check of ``_Run.event_frame``: an event without a type, or without a
    readable time when the logs have a time column, fails the job that computes it."""
    from pyspark.sql import functions as F

    def where(what: str):
        paths = F.array(*(F.lit(g.src.path) for g in logs))
        path = F.element_at(paths, (F.col(_ARG) + 1).cast("int"))
        return F.concat(path, F.lit(": data row "), F.col(ROW).cast("string"),
                        F.lit(f" (0-based): {what}"))

    cols = {}
    types = ", ".join(repr(g.type_column) for g in logs if g.type_column) or "none"
    cols[TYPE] = F.when(F.col(TYPE).isNull(),
                        F.raise_error(where(f"no event type in column {types}"))
                        ).otherwise(F.col(TYPE))
    if tc is not None:
        cols[TIME] = F.when(F.col(TIME).isNull(),
                            F.raise_error(where(f"no readable time in column {tc!r}"))
                            ).otherwise(F.col(TIME))
    return frame.withColumns(cols)


def _time_error(spark, g: _Log) -> SparkError:
    """The contract's error for the log's first unreadable time (for texts: the value the
    contract blames, so ``0,soon`` blames ``soon``), worded as the local reader words it."""
    from pyspark.sql import functions as F

    d = g.decision
    raw = _col(d.time_column).cast("string")
    numbered = _with_rows(spark, g.df) if g.by_files else _Run(spark).index(g.df, ROW)[0]
    rows = (numbered.filter(_time_expr(d).isNull())
            .select(F.col(ROW), raw.alias("raw")).orderBy(ROW).limit(10_000).collect())
    bad = rows[0][0]
    if d.time_kind == "str" and d.time_format is None:
        bad = contract.blame_time((r[0], r[1]) for r in rows) or bad
    value = next(r[1] for r in rows if r[0] == bad)
    e = contract.bad_time(f"{g.src.path}: data row {bad} (0-based)", d.time_column, value,
                          d.time_format, d.time_unit)
    return SparkError(e.message, e.hints, input_error=True)


def spark_schema(
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    time_column: str | None = None,
    fmt: str | None = None,
) -> Schema:
    """The logs' ``Schema`` computed by Spark (for logs the driver cannot read locally),
    as ``contract.build_schema`` defines it."""
    spark = spark_session(master, conf)
    return _schema(_open(spark, logs, type_column, fmt, time_column))


def _schema(opened: list[_Log]) -> Schema:
    """The ``Schema`` of opened logs: one small aggregation (a row per event type), which
    also learns the logs' ``time_values`` (and so the contract's verdicts on them)."""
    from pyspark.sql import functions as F

    decisions = [g.decision for g in opened]
    with _input():
        tc = next((g.time_column for g in opened if g.time_column), None)
        kinds = contract.column_kinds(decisions, tc)
    present = []
    try:
        for g in opened:
            usable = contract.attribute_columns(g.decision, kinds)
            flags = [F.max(_col(c).isNotNull().cast("int")).alias(f"c{i}")
                     for i, c in enumerate(usable)]
            etype = F.lit(g.src.name) if g.type_column is None else _col(g.type_column)
            # a log of types only has no attribute to flag (agg needs one expression)
            flags = (flags + _time_facts(g)) or [F.lit(0).alias("none")]
            rows = g.df.groupBy(etype.cast("string").alias(TYPE)).agg(*flags).collect()
            present.append({r[TYPE]: {c: bool(r[f"c{i}"]) for i, c in enumerate(usable)}
                            for r in rows})
            g.time_values = _time_values(g, rows)
    except SparkError:
        raise
    except Exception as e:
        raise _spark_error(e) from None
    with _input():
        fits = _judge(opened)
        return contract.build_schema([g.decision for g in opened], present, kinds, tc, fits)


_LOW, _HIGH, _ZONED = "__cer_time_low", "__cer_time_high", "__cer_time_zoned"


def _time_facts(g: _Log) -> list:
    """Aggregations for ``contract.TimeValues``, as the local reader's ``_time_facts``: the
    least and greatest finite value of a numeric time column (Spark orders NaN above
    every number, polars skips it: both skip it here), whether a time column of ISO texts
    holds one with an offset."""
    from pyspark.sql import functions as F

    d = g.decision
    if d.time_column is None:
        return []
    col, kind = _col(d.time_column), d.time_kind
    if kind in ("int", "float"):
        x = col if kind == "int" else F.when(~F.isnan(col) & (F.abs(col) != float("inf")), col)
        return [F.min(x).alias(_LOW), F.max(x).alias(_HIGH)]
    if kind == "str" and d.time_format is None:
        return [F.max(F.trim(col).rlike(contract.ISO_ZONED_TIME).cast("int")).alias(_ZONED)]
    return []


def _time_values(g: _Log, rows) -> contract.TimeValues:
    """The log's ``TimeValues`` from rows carrying ``_time_facts`` (per event type)."""
    d = g.decision
    facts = [r.asDict() for r in rows]
    lows = [f[_LOW] for f in facts if f.get(_LOW) is not None]
    highs = [f[_HIGH] for f in facts if f.get(_HIGH) is not None]
    zoned = None
    if d.time_kind == "str":
        zoned = (contract.zoned_format(d.time_format) if d.time_format is not None
                 else any(f.get(_ZONED) for f in facts))
    return contract.TimeValues(min(lows, default=None), max(highs, default=None), zoned)


def _judge(logs: list[_Log]) -> dict[str, str]:
    """``contract.judge_times`` on the logs' ``time_values``: their decisions updated, the
    epoch units that fit returned."""
    decisions, fits = contract.judge_times([g.decision for g in logs],
                                           [g.time_values for g in logs])
    for g, d in zip(logs, decisions, strict=True):
        g.decision = d
    return fits


def _judge_times(logs: list[_Log]) -> None:
    """The time values' verdicts for logs whose schema Spark did not compute (``_schema``
    learns them): one row per log."""
    if all(g.time_values is not None for g in logs):
        return
    try:
        for g in logs:
            if g.time_values is None:
                facts = _time_facts(g)
                g.time_values = _time_values(g, [g.df.agg(*facts).first()] if facts else [])
    except Exception as e:
        raise _spark_error(e) from None
    with _input():
        _judge(logs)


# --------------------------------------------------------------------------- tasks


def _task(compiled: Plan):
    """The ``mapInArrow`` function: batches sorted by (GROUP, POS) -> match rows.

    It ships the whole plan and builds executors with ``compiled.executor()``, so a task
    evaluates exactly as local mode does.
    A fresh engine starts at every new GROUP; a match is kept when it ends at or after the
    group's first OWN event (events before it are the context of a ``ranges`` task).
    """
    names = [g[0] for g in compiled.query.partition_by]

    def run(batches):
        import polars as pl
        import pyarrow as pa

        schema = None
        group, engine, lo, seq = None, None, None, 0
        for batch in batches:
            frame = pl.from_arrow(batch)
            out: list[dict] = []
            for part in frame.partition_by(_GROUP, maintain_order=True):
                g = part[_GROUP][0]
                if engine is None or g != group:
                    group, engine, lo = g, compiled.executor(), None
                own = part.filter(pl.col(_OWN))[POS]
                if lo is None and own.len():
                    lo = own[0]
                events = part.drop(_GROUP, _OWN, _QPOS, strict=False)
                for m in engine.run(events):
                    if lo is not None and m.end >= lo:
                        out.append({
                            "end": m.end, "seq": seq, "start": m.start,
                            "events": [{"position": p, "vars": list(v)} for p, v in m.events],
                            "partition": None if m.partition is None else pickle.dumps(m.partition),
                            "partition_json": partition_json(m.partition, names),
                        })
                        seq += 1
            if schema is None:
                schema = pa.schema([
                    ("end", pa.int64()), ("seq", pa.int64()), ("start", pa.int64()),
                    ("events", pa.list_(pa.struct([("position", pa.int64()),
                                                   ("vars", pa.list_(pa.string()))]))),
                    ("partition", pa.binary()), ("partition_json", pa.string()),
                ])
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    return run


def _wtime(query: ast.Query, ev: _Events):
    """The window time column and bound of a time or attribute window."""
    from pyspark.sql import functions as F

    w = query.within
    if isinstance(w, ast.DurationWindow):
        if ev.time_column is None:
            raise QueryError("WITHIN with a duration needs a time column in the log", w.span)
        return F.col(TIME), w.nanoseconds
    assert isinstance(w, ast.AttributeWindow)
    if w.attr not in ev.frame.columns:
        raise QueryError(f"WITHIN {w.amount} [{w.attr}]: no attribute {w.attr!r} in the log", w.span)
    return F.col(w.attr), w.amount


def _tasks(run: _Run, compiled: Plan, ev: _Events, ranges: int | None) -> DataFrame:
    """The events of every task, partitioned and sorted by (GROUP, POS), with OWN."""
    from pyspark.sql import functions as F

    q, plan = compiled.query, compiled.fanout
    frame = ev.frame
    if q.streams is not None:
        frame = frame.filter(F.col(STREAM).isin(list(q.streams)))
    nparts = ranges or run.spark.sparkContext.defaultParallelism
    if plan.kind == PARTITION:
        keys = []
        for i, group in enumerate(plan.partition_by):
            present = [F.col(a) for a in group if a in frame.columns]
            keys.append((F.coalesce(*present) if present else F.lit(None)).alias(f"{_KEY}{i}"))
        names = [f"{_KEY}{i}" for i in range(len(keys))]
        keyed = frame.select("*", *keys).dropna(subset=names)
        return (keyed.repartition(nparts, *names).drop(*names)
                .withColumns({_GROUP: F.lit(0), _OWN: F.lit(True)})
                .sortWithinPartitions(POS))
    if plan.kind != RANGES:
        return (frame.repartition(1).withColumns({_GROUP: F.lit(0), _OWN: F.lit(True)})
                .sortWithinPartitions(POS))
    if q.streams is not None:
        # eager: ev.frame's partitions are already in POS order
        frame, n = run.rank(frame, _QPOS, POS) if run.lazy else run.index(frame, _QPOS)
    else:
        frame, n = frame.withColumn(_QPOS, F.col(POS)), ev.n
    if n is None:  # a lazy run: the ranges need the number of events
        n = frame.count()
    r = max(1, min(nparts, n))
    size = math.ceil(n / r) if n else 1
    starts = [k * size for k in range(r)]
    if isinstance(q.within, ast.EventsWindow):
        context = [max(0, p - q.within.count) for p in starts]
    else:
        wt, bound = _wtime(q, ev)
        qpos = F.col(_QPOS)
        first = frame.agg(*(F.min(F.when(qpos >= p, wt)) for p in starts)).first()
        reach = frame.agg(*(
            F.min(F.when(wt >= F.lit(t) - bound, qpos)) if t is not None else F.lit(p)
            for t, p in zip(first, starts, strict=True)
        )).first()
        # One event more than needed: every pair of neighbours is then inside one task,
        # so the engines check the whole stream's time order, as local mode does.
        context = [max(0, min(p - 1, p if c is None else c)) for c, p in zip(reach, starts,
                                                                             strict=True)]
    lo = F.array(*(F.lit(c).cast("long") for c in context))
    hi = F.array(*(F.lit(p).cast("long") for p in [*starts[1:], max(n, 1)]))
    qpos = F.col(_QPOS)
    owners = F.filter(
        F.sequence(F.lit(0), F.lit(r - 1)),
        lambda k: (F.element_at(lo, k + 1) <= qpos) & (qpos < F.element_at(hi, k + 1)),
    )
    pieces = frame.withColumn(_GROUP, F.explode(owners))
    own = qpos >= F.element_at(F.array(*(F.lit(p).cast("long") for p in starts)), F.col(_GROUP) + 1)
    return (pieces.withColumn(_OWN, own).repartitionByRange(r, _GROUP)
            .sortWithinPartitions(_GROUP, POS))


def _matches(run: _Run, compiled: Plan, ev: _Events, ranges: int | None) -> DataFrame:
    tasks = _tasks(run, compiled, ev, ranges)
    # Persisted: sorting by end samples its input first, which would run the engines twice.
    return run.persist(tasks.mapInArrow(_task(compiled), MATCH_SCHEMA))


def output_spec(ev: _Events, shape: str = "long", variables=()) -> OutputSpec:
    """The ``OutputSpec`` of matches over the event frame ``ev`` (``variables``: the wide
    shape's, ``query.scope.wide_variables``'s)."""
    return OutputSpec(shape, tuple(ev.columns), ev.time_columns).with_variables(variables)


def _shaped(run: _Run, matches: DataFrame, ev: _Events, spec: OutputSpec, csv: bool = False
            ) -> tuple[DataFrame, int | None]:
    """The matches in ``spec``'s shape as local mode writes them (``OutputSpec.columns``),
    ordered by (match, position) in the long shape, by match in the wide one; and the match
    count (None for a lazy run). ``csv``: vars joined with ``VARS_SEPARATOR``, the wide
    shape's lists as JSON text, as the local CSV writer writes them."""
    numbered, total = _numbered(run, matches, ev)
    columns = spec.columns()
    sources = list(dict.fromkeys(c.source for c in columns if c.of == "event"))
    alias = {src: f"__cer_e{i}" for i, src in enumerate(sources)}  # names free of clashes
    events = ev.frame.select(*(_col(src).alias(alias[src]) for src in sources))
    if spec.shape == "long":
        return _long(numbered, events, columns, alias, csv), total
    return _wide(numbered, events, columns, alias, spec, csv), total


def _long(numbered: DataFrame, events: DataFrame, columns, alias, csv: bool) -> DataFrame:
    """One row per match x event; a match without reported events keeps one row with null
    event columns, as locally (``io.shapes``)."""
    from pyspark.sql import functions as F

    rows = numbered.select(*(F.col(c) for c in MATCH_COLUMNS if c != "partition"),
                           F.col("partition_json").alias("partition"),
                           F.explode_outer("events").alias("__cer_ev"))
    rows = rows.select("*", F.col("__cer_ev.position").alias(alias[POS]),
                       F.col("__cer_ev.vars").alias("__cer_vars"))
    joined = rows.join(events, alias[POS], "left")
    out = []
    for c in columns:
        if c.of == "match":
            out.append(F.col(c.source).alias(c.name))
        elif c.of == "vars":
            v = F.col("__cer_vars")
            out.append((F.array_join(v, VARS_SEPARATOR) if csv else v).alias(c.name))
        else:
            out.append(F.col(alias[c.source]).alias(c.name))
    position = next(c.name for c in columns if c.of == "event" and c.source == POS)
    return joined.select(*out).orderBy("match", position)


def _wide(numbered: DataFrame, events: DataFrame, columns, alias, spec: OutputSpec, csv: bool
          ) -> DataFrame:
    """One row per match; a variable that may bind several events has array columns in
    stream order (``csv``: JSON text, as the local CSV writer writes lists)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    out = numbered.select(*(F.col(c) for c in MATCH_COLUMNS if c != "partition"),
                          F.col("partition_json").alias("partition"))
    fields = list(alias.values())  # POS first: sorting the structs sorts by position
    fields.sort(key=lambda n: n != alias[POS])
    bound = (numbered.select("match", F.explode("events").alias("__cer_ev"))
             .select("match", F.col("__cer_ev.position").alias(alias[POS]),
                     F.explode("__cer_ev.vars").alias("__cer_var"))
             .join(events, alias[POS]))
    kinds = dict(zip(events.columns, (f.dataType for f in events.schema.fields), strict=True))
    for var, many in spec.variables or ():
        mine = [c for c in columns if c.variable == var]
        sub = bound.filter(F.col("__cer_var") == var)
        if many:
            sub = sub.groupBy("match").agg(
                F.sort_array(F.collect_list(F.struct(*fields))).alias("__cer_s"))
            cols = [F.col("__cer_s").getField(alias[c.source]) for c in mine]
            if csv:
                cols = [_json_list(_iso(x, T.ArrayType(kinds[alias[c.source]])))
                        for x, c in zip(cols, mine, strict=True)]
        else:
            cols = [F.col(alias[c.source]) for c in mine]
        sub = sub.select("match", *(x.alias(c.name) for x, c in zip(cols, mine, strict=True)))
        out = out.join(sub, "match", "left")
    return out.select(*(_col(c.name) for c in columns)).orderBy("match")


def _numbered(run: _Run, matches: DataFrame, ev: _Events) -> tuple[DataFrame, int | None]:
    """One row per match, numbered in local mode's order (end, then the engine's), with
    start_time / end_time: the TIME of its first and last event in the common type of the
    logs' time columns (``OutputSpec.time_columns``), as local outputs show them."""
    from pyspark.sql import functions as F

    numbered, total = run.rank(matches, "match", "end", "seq")
    dtype = _time_type(ev)
    for side in ("start", "end"):
        if dtype is None:
            numbered = numbered.withColumn(f"{side}_time", F.lit(None).cast("string"))
            continue
        when = ev.frame.select(F.col(POS).alias(side),
                               _match_time(F.col(TIME), dtype).alias(f"{side}_time"))
        numbered = numbered.join(when, side, "left")
    return numbered, total


def _time_type(ev: _Events):
    """The common Spark type of the logs' time columns (None without any): what Spark
    makes of ``coalesce`` over them, as ``EventLookup.time_dtype`` does locally."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    cols = [_col(c) for c in ev.time_columns if c in ev.frame.columns]
    if not cols:
        return None
    try:
        return ev.frame.select(F.coalesce(*cols)).schema.fields[0].dataType
    except Exception:  # no common type: UTC instants
        return T.TimestampType()


def _match_time(time, dtype):
    """TIME (ns since the epoch for datetimes, else a number) as a value of ``dtype``."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.TimestampType | T.TimestampNTZType | T.DateType):
        return F.timestamp_micros(F.floor(time / 1000)).cast(dtype)
    return time.cast(dtype)


def _local_text(df: DataFrame) -> DataFrame:
    """``df`` with its datetimes (also inside arrays) as the text local CSV and JSONL write,
    for Spark's text writers, which print ``.000`` and a zone of their own."""
    return df.select(*(_iso(_col(f.name), f.dataType).alias(f.name) for f in df.schema.fields))


def _iso(col, dtype):
    """A datetime column as the ``io.output`` text rule says (Python's ``isoformat``):
    seconds, then microseconds only when not zero; Spark's zoned TIMESTAMP (UTC in cer's
    sessions) ends in ``UTC_OFFSET``. Other columns as they are."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(dtype, T.ArrayType):
        if isinstance(dtype.elementType, (T.TimestampType, T.TimestampNTZType)):
            return F.transform(col, lambda x: _iso(x, dtype.elementType))
        return col
    if not isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return col
    seconds = F.date_format(col, _java_pattern(SECONDS_TEXT))
    micros = F.date_format(col, "S" * FRACTION_DIGITS)
    text = F.when(micros == "0" * FRACTION_DIGITS, seconds).otherwise(
        F.concat(seconds, F.lit("."), micros))
    return F.concat(text, F.lit(UTC_OFFSET)) if isinstance(dtype, T.TimestampType) else text


def _json_list(col):
    """An array column as the JSON text local CSV writes (``io.output``: items as JSON,
    ``LIST_SEPARATOR`` between them)."""
    from pyspark.sql import functions as F

    items = F.transform(col, lambda x: F.regexp_extract(F.to_json(F.array(x)), r"^\[(.*)\]$", 1))
    return F.when(col.isNotNull(),
                  F.concat(F.lit("["), F.array_join(items, LIST_SEPARATOR), F.lit("]")))


# --------------------------------------------------------------------------- entry points


def spark_match(
    compiled: Plan,
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    time_column: str | None = None,
    ranges: int | None = None,
    fmt: str | None = None,
) -> Iterator[Match]:
    """Every match of ``compiled`` over ``logs``, computed on Spark and streamed back to
    the driver in local mode's order (end position, then the engine's order).

    ``ranges`` is the number of tasks (default: Spark's default parallelism); ``fmt``
    forces the logs' format. Raises ``SparkError`` (or ``QueryError`` for a window the
    logs cannot serve)."""
    spark = spark_session(master, conf)
    run = _Run(spark)
    try:
        ev = run.events(logs, type_column, time_column, fmt)
        rows = _matches(run, compiled, ev, ranges).orderBy("end", "seq").toLocalIterator()
        for r in rows:
            yield Match(
                r["start"], r["end"],
                tuple((e["position"], tuple(e["vars"])) for e in r["events"]),
                None if r["partition"] is None else pickle.loads(r["partition"]),
            )
    except (SparkError, QueryError):
        raise
    except Exception as e:
        raise _spark_error(e) from None
    finally:
        run.close()


def spark_count(
    compiled: Plan,
    logs: list[str],
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    time_column: str | None = None,
    ranges: int | None = None,
    fmt: str | None = None,
) -> int:
    """The number of matches ``spark_match`` would stream, counted by Spark: without the
    sort by end position (a sampling job and a shuffle) and the one job per partition
    that streaming the matches back to the driver takes."""
    spark = spark_session(master, conf)
    run = _Run(spark)
    try:
        ev = run.events(logs, type_column, time_column, fmt)
        return _matches(run, compiled, ev, ranges).count()
    except (SparkError, QueryError):
        raise
    except Exception as e:
        raise _spark_error(e) from None
    finally:
        run.close()


def spark_write(
    compiled: Plan,
    logs: list[str],
    output: str,
    fmt: str = "parquet",
    *,
    master: str | None = None,
    conf: dict[str, str] | None = None,
    type_column: str | None = None,
    time_column: str | None = None,
    ranges: int | None = None,
    log_format: str | None = None,
    mode: str = "errorifexists",
    shape: str = "long",
    variables=(),
) -> int:
    """Have Spark write the long shape of local mode (``OutputSpec.columns``) as a
    ``parquet``, ``csv`` (vars joined with ``VARS_SEPARATOR``) or ``json`` directory,
    ordered by (match, position) (``_shaped``, shared with ``cer_cli.spark.match``). ``mode``
    is Spark's save mode. ``shape="wide"`` writes the wide shape instead (its
    ``variables`` are ``query.scope.wide_variables``'s). Returns the match count."""
    if fmt == "jsonl":
        fmt = "json"
    if fmt not in WRITE_FORMATS:
        raise SparkError(f"Spark cannot write {fmt!r}", ["formats: " + ", ".join(WRITE_FORMATS)],
                         input_error=True)
    spark = spark_session(master, conf)
    run = _Run(spark)
    try:
        ev = run.events(logs, type_column, time_column, log_format)
        found = _matches(run, compiled, ev, ranges)
        long, total = _shaped(run, found, ev, output_spec(ev, shape, variables), fmt == "csv")
        if fmt in ("csv", "json"):
            long = _local_text(long)
        writer = long.write.mode(mode)
        if fmt == "csv":  # quotes doubled inside quoted fields (RFC 4180), as local CSV does
            writer = writer.option("header", True).option("escape", '"')
        _stopping["partial"] = (output, mode)  # until saved, a signal's exit removes it
        try:
            writer.format(fmt).save(output)
        except Exception:
            signals.check()  # failed because of a signal: keep it marked for removal
            _stopping["partial"] = None
            raise
        _stopping["partial"] = None
        return total
    except (SparkError, QueryError):
        raise
    except Exception as e:
        raise _spark_error(e, what=f"cannot write {output}: ") from None
    finally:
        run.close()
