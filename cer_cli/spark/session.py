"""The Spark session and the checks before it starts (pre-flight): the master URL, the
settings; a typo costs a second, not a JVM's start-up or minutes of retries."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
import threading
from typing import TYPE_CHECKING

from cer_cli import signals
from cer_cli.spark.errors import SparkError, spark_error
from cer_cli.spark.processes import remove_at_signal, watch
from cer_cli.spark.ship import ship_package

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


DEFAULT_MASTER = "local[*]"
#: Session settings that make Spark read values as the local reader does.
SESSION_DEFAULTS = {
    "spark.sql.session.timeZone": "UTC",  # datetimes without zone are UTC, as in polars
    "spark.sql.timestampType": "TIMESTAMP_NTZ",  # CSV datetimes stay naive, as in polars
    # column names are case-sensitive, as in polars and queries: a log with columns v and V
    # was refused by Spark ("the column v already exists") where local mode read both
    "spark.sql.caseSensitive": "true",
    "spark.ui.showConsoleProgress": "false",
    # Frames a run persists (match rows with a nested list of events) are cached in batches
    # of this many rows, each built in the JVM's heap: at Spark's 10,000, `-o` of 10M events
    # (7M matches) ran the default 1 GB driver heap out of memory on local[2]; 1,000 keeps
    # it within, at no measured cost (142 s either way).
    "spark.sql.inMemoryColumnarStorage.batchSize": "1000",
}
#: The master URL forms Spark accepts (checked before the JVM starts, which otherwise blames
#: JAVA_HOME for a typo or spends minutes retrying an unreachable master).
MASTER_FORMS = "local, local[N], local[*], local[N,F], spark://HOST:PORT, yarn, k8s://URL, mesos://URL"
_LOCAL_MASTER = re.compile(r"local(\[(\d+|\*)(\s*,\s*\d+)?\])?|local-cluster\[\d+,\s*\d+,\s*\d+\]")
CONNECT_TIMEOUT = 3.0
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
    watch()
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
            raise spark_error(e, master=master) from None
        signals.reclaim()  # should a SparkContext have replaced the SIGINT handler all the same
    else:
        spark = active
        for k, v in conf.items():
            if k.startswith("spark.sql."):
                spark.conf.set(k, v)
    spark.sparkContext.setLogLevel(conf.get("cer.logLevel", "FATAL"))
    ship_package(spark)
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


def _own_scratch(conf: dict[str, str]) -> None:
    """Have the JVM and its workers keep their scratch files (``spark-*``, ``blockmgr-*``:
    shuffle and cached blocks, fetched files) in a directory of cer's, unless the user
    chose one (``SPARK_LOCAL_DIRS``, ``spark.local.dir``): a signal SIGKILLs the JVM, whose
    shutdown would have deleted them, and ``processes.end_run`` removes the directory instead."""
    if ("SPARK_LOCAL_DIRS" in os.environ or "spark.local.dir" in conf
            or _in_defaults("spark.local.dir") or "PYSPARK_GATEWAY_PORT" in os.environ):
        return  # the user's choice, or spark-submit's JVM (not below cer: not killed)
    scratch = tempfile.mkdtemp(prefix="cer-spark-")
    atexit.register(shutil.rmtree, scratch, True)
    os.environ["SPARK_LOCAL_DIRS"] = scratch  # the JVM and pyspark's workers read it
    remove_at_signal(scratch)
