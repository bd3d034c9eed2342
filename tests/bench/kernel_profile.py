"""Where the hash join's compiled kernel spends its time, by function and by source line
(README, "The comparison chain (hash join)").

``python -m tests.bench.kernel_profile [QUERY] [ROUNDS]`` (``QUERY`` a name of
``correlation.CHAIN_QUERIES`` or a query's text, default the comparison chain; 6 rounds) runs
the query on the 1M-event next-match log in this process, with ``perf record`` attached for
the measured rounds, and prints the share of samples per compiled function and per source line of
``pcea_kernel.py`` / ``ordered_kernel.py`` (a line of an inlined helper counts where it is
written, not where it was inlined). Needs Linux ``perf``, binutils' ``nm`` and
``addr2line``, and permission to attach ``perf`` to one's own process.

Why this way: numba's machine code has no symbols ``perf`` can see. The process compiles
the kernel into an empty ``NUMBA_CACHE_DIR`` with ``NUMBA_DEBUGINFO=1`` (a loaded cache keeps
no LLVM module), then writes ``/tmp/perf-PID.map`` (address, size, name: read by ``perf
report``) from each function's object code (``nm -S``) and its address in the process
(``get_pointer_to_function``), and maps each sampled address back into that object code for
``addr2line``. The compile takes 1-3 minutes; debug info may move the figures a few percent.
"""

from __future__ import annotations

import bisect
import collections
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_HERE = Path(__file__).resolve()
_ROOT = _HERE.parents[2]
_SOURCES = ("pcea_kernel.py", "ordered_kernel.py")


def main(name: str = "comparison chain", rounds: int = 6) -> None:
    if os.environ.get("_CER_PROFILE_CHILD") != "1":  # a fresh process, with numba set up
        cache = tempfile.mkdtemp(prefix="cer-profile-cache-")
        env = dict(os.environ, NUMBA_CACHE_DIR=cache, NUMBA_DEBUGINFO="1", CER_JIT="1",
                   _CER_PROFILE_CHILD="1", PYTHONPATH=str(_ROOT))
        raise SystemExit(subprocess.run([sys.executable, "-m", "tests.bench.kernel_profile",
                                         name, str(rounds)], env=env, cwd=_ROOT).returncode)
    from cer_cli.api import compile_query, read_events
    from cer_cli.engine import driver, jit, pcea_state
    from tests.bench import correlation

    log = read_events([str(correlation.ensure_next_log(_ROOT / "bench-out" / "data",
                                                       correlation.NEXT_SIZE))],
                      batch_size=262_144)
    query = correlation.CHAIN_QUERIES.get(name, name)

    def run() -> int:
        executor = compile_query(query, schema=log.schema).executor()
        return sum(len(b) for b in driver.run_batches(executor, log.batches()))

    started = time.time()
    print(f"compiling and warming up: {run():,} matches, {time.time() - started:.0f} s",
          file=sys.stderr)
    work = Path(tempfile.mkdtemp(prefix="cer-profile-"))
    symbols = _symbols(jit.compiled(*pcea_state.MODULES), work)
    data = work / "perf.data"
    perf = subprocess.Popen(["perf", "record", "-F", "4000", "-p", str(os.getpid()),
                             "-o", str(data)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    time.sleep(1.5)  # perf attaches
    for _ in range(rounds):
        started = time.process_time()
        found = run()
        print(f"round: {found:,} matches, {time.process_time() - started:.3f} s CPU",
              file=sys.stderr)
    perf.send_signal(signal.SIGINT)
    perf.wait()
    ips = subprocess.run(["perf", "script", "-i", str(data), "-F", "ip"], capture_output=True,
                         text=True).stdout.split()
    print("\n".join(report([int(ip, 16) for ip in ips], symbols)))


def _symbols(functions: dict, work: Path) -> list[tuple[int, int, int, Path, str]]:
    """(address, offset in its object file, size, object file, name) of every compiled
    function, written to ``/tmp/perf-PID.map`` too."""
    out = []
    for name, dispatcher in functions.items():
        for cres in dispatcher.overloads.values():
            library = cres.library
            obj = work / f"{name}-{len(out)}.o"
            obj.write_bytes(library._get_compiled_object())
            listing = subprocess.run(["nm", "-S", "--defined-only", str(obj)],
                                     capture_output=True, text=True).stdout
            for line in listing.splitlines():
                parts = line.split()
                if len(parts) != 4 or parts[2] not in "tT":
                    continue
                try:
                    address = library.get_pointer_to_function(parts[3])
                except Exception:  # noqa: BLE001, S112 - a symbol numba did not finalize
                    continue
                if address:
                    out.append((address, int(parts[0], 16), int(parts[1], 16), obj, parts[3]))
    with open(f"/tmp/perf-{os.getpid()}.map", "w") as perf_map:
        perf_map.writelines(f"{a:x} {s:x} {n}\n" for a, _, s, _, n in out)
    return sorted(out)


def _short(symbol: str) -> str:
    """``_update_events`` from numba's mangled name."""
    match = re.search(r"_kernel\d+(\w+?)B\d+v\d+", symbol)
    return match.group(1).lstrip("0123456789") if match else symbol[:40]


def _enclosing() -> dict[str, list[tuple[int, str]]]:
    """Per kernel source, the line each ``def`` starts at, with its name."""
    out = {}
    for source in _SOURCES:
        text = (_ROOT / "cer_cli" / "engine" / source).read_text().splitlines()
        out[source] = [(i, m.group(1)) for i, line in enumerate(text, 1)
                       if (m := re.match(r"def (\w+)", line))]
    return out


def report(ips: list[int], symbols: list[tuple[int, int, int, Path, str]]) -> list[str]:
    """Shares of the samples ``ips``: per compiled function, then per source function (an
    inlined helper by its own name) and per source line."""
    starts = [s[0] for s in symbols]
    per_function: collections.Counter = collections.Counter()
    per_object: dict[Path, collections.Counter] = collections.defaultdict(collections.Counter)
    for ip in ips:
        k = bisect.bisect_right(starts, ip) - 1
        if k >= 0 and ip < symbols[k][0] + symbols[k][2]:
            address, offset, _, obj, name = symbols[k]
            per_function[_short(name)] += 1
            per_object[obj][offset + ip - address] += 1
        else:
            per_function["(outside the kernel)"] += 1
    total = max(len(ips), 1)
    per_line: collections.Counter = collections.Counter()
    for obj, hits in per_object.items():
        offsets = list(hits)
        where = subprocess.run(["addr2line", "-e", str(obj)], capture_output=True, text=True,
                               input="\n".join(hex(o) for o in offsets)).stdout.splitlines()
        for offset, place in zip(offsets, where, strict=False):
            per_line[place.rsplit("/", 1)[-1]] += hits[offset]
    defs = _enclosing()
    per_def: collections.Counter = collections.Counter()
    for place, n in per_line.items():
        source, _, line = place.partition(":")
        owner = "?"
        if source in defs and line.isdigit():
            for start, name in defs[source]:
                if start <= int(line):
                    owner = name
        per_def[owner] += n
    lines = [f"{total:,} samples", "", "compiled function (inlined helpers counted in it):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in per_function.most_common(12)]
    lines += ["", "source function (where the line is written; ? no line info):"]
    lines += [f"  {100 * n / total:5.1f}%  {name}" for name, n in per_def.most_common(15)]
    lines += ["", "source line:"]
    lines += [f"  {100 * n / total:5.1f}%  {place}" for place, n in per_line.most_common(25)]
    return lines


if __name__ == "__main__":
    args = sys.argv[1:]
    main(*(args[:1] or ["comparison chain"]), *([int(args[1])] if len(args) > 1 else []))
