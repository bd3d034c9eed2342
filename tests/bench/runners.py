"""Child-process measurements, run with the project's interpreter (one process per run, so
that peak RSS belongs to that run alone)::

    python -m tests.bench.runners engine  WORKLOAD LOG [--stream S]
    python -m tests.bench.runners polars  WORKLOAD LOG

``engine`` times `cer`'s engine alone: the log is read into an event frame first (timed
separately), then every match of ``plan(query).run`` is counted. ``polars`` is the "limit"
baseline: read the columns the query reads and evaluate its atomic predicates (type tests and
unary filters) with polars, with no pattern matching. Each prints one JSON object; a run that
cannot be done prints ``{"error": "..."}`` and exits 0 so the harness can report the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
import traceback


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _workload(name: str):
    from tests.bench.workloads import all_workloads

    for w in all_workloads():
        if w.name == name:
            return w
    raise SystemExit(f"unknown workload {name!r}")


def engine(name: str, log: str, query_text: str | None) -> dict:
    w = _workload(name)
    try:
        from cer_cli.io.read import read_events
        from cer_cli.plan import plan
        from cer_cli.query.parser import parse
    except Exception as e:  # the engine is not there (yet)
        return {"error": f"import failed: {type(e).__name__}: {e}"}
    try:
        t0 = time.perf_counter()
        query = parse(query_text or w.cer, "<bench>")
        try:  # the checks may annotate the query; they are part of the pipeline when present
            from cer_cli.query.checks import check_query

            check_query(query)
        except ImportError:
            pass
        t1 = time.perf_counter()
        frame = read_events([f"{w.stream}={log}"]).frame()
        # warm up: load the compiled kernel (numba's cache) outside the timed part, as
        # CORE's figure leaves out building its server and query. A 1,000-event run is
        # below the size at which a run switches to the compiled kernel
        # (``jit.JIT_MIN_EVENTS``), and numba loads a function's cached code only at its
        # first call, so the warm-up forces the compiled kernel (``CER_JIT=1``) and compacts
        # once; without it the timed part paid numba's import and cache load (~0.4 s). The
        # timed run keeps cer's own choice (a log under JIT_MIN_EVENTS runs uncompiled).
        saved = os.environ.get("CER_JIT")
        os.environ["CER_JIT"] = "1"
        try:
            warm = plan(query).executor()
            for _ in warm.run(frame.head(1000)):
                pass
            if getattr(warm, "_k", None) is not None:
                warm._k.compact()
        finally:
            if saved is None:
                del os.environ["CER_JIT"]
            else:
                os.environ["CER_JIT"] = saved
        t2 = time.perf_counter()
        matches = 0
        engine = plan(query).executor()
        columnar = getattr(engine, "run_batches", None)
        if columnar is not None:  # the output as MatchBatch columns, as the writers use it
            for batch in columnar(frame):
                matches += len(batch)
        else:
            for _ in engine.run(frame):
                matches += 1
        t3 = time.perf_counter()
    except Exception as e:
        tb = traceback.extract_tb(e.__traceback__)[-1]
        where = f"{tb.filename.rsplit('/', 1)[-1]}:{tb.lineno}"
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} ({where})"}
    n = frame.height
    return {
        "events": n,
        "matches": matches,
        "compile_s": t1 - t0,
        "read_s": t2 - t1,
        "engine_s": t3 - t2,
        "eps": n / max(t3 - t2, 1e-9),
        "peak_rss_mb": _rss_mb(),
    }


def polars_limit(name: str, log: str) -> dict:
    import polars as pl

    w = _workload(name)
    t0 = time.perf_counter()
    lf = pl.scan_parquet(log).select(w.columns)
    exprs = [pl.len().alias("events")] + [
        a.sum().alias(f"atom{i}") for i, a in enumerate(w.atoms)
    ]
    out = lf.select(exprs).collect()
    t1 = time.perf_counter()
    n = int(out["events"][0])
    return {
        "events": n,
        "atom_counts": [int(out[f"atom{i}"][0]) for i in range(len(w.atoms))],
        "seconds": t1 - t0,
        "eps": n / max(t1 - t0, 1e-9),
        "peak_rss_mb": _rss_mb(),
    }


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=["engine", "polars"])
    p.add_argument("workload")
    p.add_argument("log")
    p.add_argument("--query-file", help="query text to use instead of the workload's")
    a = p.parse_args(argv)
    if a.what == "engine":
        text = open(a.query_file).read() if a.query_file else None
        result = engine(a.workload, a.log, text)
    else:
        result = polars_limit(a.workload, a.log)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
