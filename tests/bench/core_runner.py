"""Run one query on CORE (the C++ engine, through its Python bindings ``pycer``).

Executed with the interpreter of ``tests/bench/.core-venv`` (Python 3.13, ``pycer`` and
``pyarrow``), never imported by the project::

    .core-venv/bin/python core_runner.py SPEC.json

SPEC has ``log`` (a Parquet file with a ``type`` column), ``stream`` (the stream name the query's
FROM uses), ``query`` (CORE's CEQL text) and optionally ``chunk`` (events per ``send_events``
call). Every other column but datetimes becomes an attribute of every event type (int64 ->
int, float -> double, string -> string, bool -> boolean), in the log's column order.

Prints one JSON object: events, matches (complex events, one output line each), the seconds
spent building the ``PyEvent`` objects (not counted, as CORE's experiments preload the stream),
feeding them (``send_events``: evaluation and enumeration) and collecting the output, the
throughput ``eps`` = events / feed seconds (``eps_with_output`` also counts rendering the output
text, which pycer does lazily in ``get_output``), and the process's peak RSS.

Quirks of ``pycer`` 0.1.6 this works around: ``PyOfflineServer.get_output`` empties the
buffer and sending events after it crashes the process, so the output is collected once, at
the end; the server writes ``logs/logfile*.log`` under the current directory (run it in a
scratch directory).
"""

from __future__ import annotations

import json
import resource
import sys
import time


def main() -> None:
    spec = json.loads(open(sys.argv[1]).read())
    import pyarrow.parquet as pq
    import pycer

    table = pq.read_table(spec["log"])
    kinds = {}
    for f in table.schema:
        t = str(f.type)
        if f.name == "type" or t.startswith("timestamp") or t.startswith("date"):
            continue
        if t.startswith("int") or t.startswith("uint"):
            kinds[f.name] = ("int", pycer.PyIntValue)
        elif t in ("double", "float"):
            kinds[f.name] = ("double", pycer.PyDoubleValue)
        elif t in ("string", "large_string"):
            kinds[f.name] = ("string", pycer.PyStringValue)
        elif t == "bool":
            kinds[f.name] = ("boolean", pycer.PyBoolValue)
    types = table.column("type").to_pylist()
    type_names = list(dict.fromkeys(spec.get("event_types") or sorted(set(types))))
    attrs = ", ".join(f"{n}:{k}" for n, (k, _) in kinds.items())
    decl = (
        f"CREATE STREAM {spec['stream']} {{\n"
        + ",\n".join(f"  EVENT {t} {{ {attrs} }}" for t in type_names)
        + "\n}"
    )
    server = pycer.PyOfflineServer()
    info = server.declare_stream(decl)
    ids = {e.name: e.id for e in info.events_info}
    server.add_query(spec["query"])

    columns = [(table.column(n).to_pylist(), ctor) for n, (_, ctor) in kinds.items()]
    n = len(types)
    chunk = int(spec.get("chunk", 100_000))
    build = feed = 0.0
    for lo in range(0, n, chunk):
        hi = min(n, lo + chunk)
        t0 = time.perf_counter()
        events = [
            pycer.PyEvent(ids[types[i]], [ctor(col[i]) for col, ctor in columns])
            for i in range(lo, hi)
        ]
        t1 = time.perf_counter()
        server.send_events(events)
        t2 = time.perf_counter()
        build += t1 - t0
        feed += t2 - t1
        del events
    t0 = time.perf_counter()
    out = server.get_output()
    output = time.perf_counter() - t0
    matches = out.count("\n")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        json.dumps(
            {
                "events": n,
                "matches": matches,
                "build_s": build,
                "feed_s": feed,
                "output_s": output,
                "eps": n / max(feed, 1e-9),
                "eps_with_output": n / max(feed + output, 1e-9),
                "peak_rss_mb": rss,
                "declaration": decl,
                "sample": out[:200],
            }
        )
    )


if __name__ == "__main__":
    main()
