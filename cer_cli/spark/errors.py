"""Spark's failures as one ``SparkError``: whose they are (the input's, exit 2, or the
runtime's, exit 1) and one readable line instead of py4j's."""

from __future__ import annotations

import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field

from cer_cli.io.contract import LogError
from cer_cli.query.ast import Span
from cer_cli.query.errors import QueryError


@dataclass
class SparkError(Exception):
    """A failure of a Spark run. ``input_error`` tells whose: ``True`` for the user's input
    (a log that cannot be read, a bad column, a bad master URL: exit code 2), ``False`` for
    the runtime (no Java, no pyspark, a failed job: exit code 1); ``exit_code`` says it."""

    message: str
    hints: list[str] = field(default_factory=list)
    input_error: bool = False
    #: What Spark and py4j said in full (Java stack included): printed with ``--debug``.
    detail: str | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    @property
    def exit_code(self) -> int:
        return 2 if self.input_error else 1

    def render(self) -> str:
        return "\n".join([f"error: {self.message}", *(f"  hint: {h}" for h in self.hints)])

    def __str__(self) -> str:
        return self.render()


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


#: Spark's own failures (not the input's, not cer's): the JVM out of memory, a context
#: stopped under the run (the JVM ended, or was told to), a lost executor or Python worker.
#: Each with what it says and the setting that helps; checked in this order.
_SPARK_FAILURES = (
    (("java.lang.OutOfMemoryError", "Java heap space", "GC overhead limit exceeded"),
     "Spark ran out of memory (Java heap space)"),
    (("MemoryError",), "a Spark task ran out of memory"),
    (("ExecutorLostFailure", "Lost executor", "executor lost"),
     "Spark lost an executor during the run (out of memory, or killed)"),
    (("Python worker exited unexpectedly", "Python worker exited", "worker crashed"),
     "a Python worker of Spark ended during the run (out of memory, or killed)"),
    (("stopped SparkContext", "SparkContext was shut down", "SparkContext has been shutdown",
      "SparkContext is stopped", "Answer from Java side is empty", "Py4JNetworkError",
      "Error while sending or receiving", "SparkContext.dagScheduler()"),
     "Spark stopped before the run ended (its JVM ended or was stopped: often out of memory)"),
)
_STOPPED = _SPARK_FAILURES[-1][1]  # py4j cannot reach the JVM any more: it ended
#: The settings that give Spark more memory: the driver's JVM (which also runs the tasks
#: with a local master), the executors', their Python workers'.
MEMORY_HINTS = [
    "give Spark more memory: --spark-conf spark.driver.memory=4g (a local master runs the"
    " tasks in the driver's JVM), on a cluster --spark-conf spark.executor.memory=4g",
    "rerun with --debug for Spark's own messages",
]


def spark_failure(text: str) -> str | None:
    """What Spark's own failure in ``text`` (a py4j error, a Java stack) was, in words; None
    when it is no failure of Spark itself."""
    return next((said for marks, said in _SPARK_FAILURES if any(m in text for m in marks)),
                None)


def context_stopped() -> bool:
    """Whether the active Spark context has stopped under the run, or its JVM no longer
    answers: a task's JVM out of memory stops the context (Spark's handler of uncaught
    errors), and the action waiting on it then fails with whatever it met on the way (a
    NullPointerException, an "INTERNAL_ERROR ... You hit a bug in Spark"), never the cause.
    False without an active context (none was started: the failure is another one)."""
    try:
        from pyspark import SparkContext

        sc = SparkContext._active_spark_context
    except Exception:  # noqa: BLE001 - no pyspark: no context
        return False
    if sc is None:
        return False
    try:
        return bool(sc._jsc.sc().isStopped())
    except Exception:  # noqa: BLE001 - py4j cannot reach the JVM: it ended
        return True


def spark_error(e: BaseException, master: str | None = None, what: str = "",
                writing: bool = False) -> SparkError:
    """``_spark_error``, keeping py4j's full text for ``--debug``."""
    error = _spark_error(e, master, what, writing)
    error.detail = f"{type(e).__name__}: {e}"
    return error


def _spark_error(e: BaseException, master: str | None = None, what: str = "",
                 writing: bool = False) -> SparkError:
    """A readable ``SparkError`` from whatever Spark or py4j raised: one line, the input's
    failures (unreadable files, unknown hosts) as input errors, Spark's own (``spark_failure``)
    with the settings that help. ``writing``: Spark failed
    writing the output, whose failure it is (exit 1, "cannot write the output", as for a
    local ``-o``), unless an engine in a task found a mistake in the query."""
    text = str(e)
    first = _meaningful(text, type(e).__name__)
    if "PythonException" in text or "Traceback" in text:  # a task's Python failed
        errors = [ln.strip() for ln in text.splitlines() if re.match(r"\s*[\w.]+(Error|Exception):", ln)]
        first = errors[-1] if errors else first
    if "QueryError" in text:  # raised by an engine inside a task
        lines = [ln for ln in text.splitlines() if "QueryError" in ln]
        msg = lines[-1].split("QueryError:", 1)[-1].strip() if lines else first
        return SparkError(f"{what}{msg}", input_error=True)
    failure = spark_failure(text) or (
        _STOPPED if isinstance(e, ConnectionError) or context_stopped() else None)
    if failure is not None:  # Spark itself failed: the hint is a setting, not the input
        return SparkError(f"{what}{failure}", MEMORY_HINTS)
    if writing:
        return SparkError(f"{what}{first}")
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


@contextmanager
def input_errors():
    """The contract's ``LogError`` as Spark's input error (exit code 2), message kept."""
    try:
        yield
    except LogError as e:
        raise SparkError(e.message, e.hints, input_error=True) from None


#: How a task hands a ``QueryError`` to the driver: this mark, then the error as JSON (its
#: message, span, hints and position), in the message of the exception the task raises.
QUERY_ERROR = "cer-query-error:"


def encode_query_error(e: QueryError) -> str:
    """``QUERY_ERROR`` and ``e`` as one line of JSON (``decode_query_error``)."""
    span = None if e.span is None else [e.span.start, e.span.end]
    return QUERY_ERROR + json.dumps({"message": e.message, "span": span, "hints": e.hints,
                                     "position": e.position})


def decode_query_error(text: str) -> QueryError | None:
    """The ``QueryError`` a task encoded into ``text`` (a Spark failure's message, with
    Spark's and py4j's text around it), or None: its caret, hints and position survive,
    so the driver renders it as local mode does."""
    at = text.rfind(QUERY_ERROR)
    if at < 0:
        return None
    try:
        d, _ = json.JSONDecoder().raw_decode(text, at + len(QUERY_ERROR))
    except ValueError:
        return None
    span = None if d["span"] is None else Span(*d["span"])
    return QueryError(d["message"], span, hints=list(d["hints"]), position=d["position"])
