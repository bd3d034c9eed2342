"""The numba loader: which kernel functions compile, how, and when a run uses them.

A kernel is plain Python marked with ``njit``, ``njit_plain`` or ``njit_inline`` (today the
CEA's, ``engine/kernel.py``). ``compiled(*modules)`` imports numba and compiles copies of the
marked functions of those modules over one copy of their globals in which every marked name
is compiled, so compiled code calls compiled code while the modules' own names stay plain
Python (the tests patch them). numba is imported only when a run asks for it: a run switches
to the compiled functions once it has seen ``JIT_MIN_EVENTS`` events (``kernel_state.
KernelState``), and a log expected to be large starts loading them early, beside its read
(``warm_up_jit``).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import threading
from pathlib import Path

#: numba is imported only when a run asks for the compiled kernel (``compiled``): importing
#: it and loading the cached machine code costs ~1 s, more than a small log takes uncompiled.
HAVE_NUMBA = importlib.util.find_spec("numba") is not None

#: The CEA kernel's module: what ``compiled()`` and ``plain(name)`` mean without one.
KERNEL = "cer_cli.engine.kernel"

#: module -> name -> compile without reference counting? (the functions ``compiled`` compiles)
_JIT: dict[str, dict[str, bool]] = {}
#: (module, name) of the functions numba inlines into their callers (see ``njit_inline``)
_INLINE: set[tuple[str, str]] = set()
#: (module, name) -> the plain function (to tell when a test replaced the name)
_PLAIN: dict[tuple[str, str], object] = {}


def _mark(f, no_nrt: bool):
    _JIT.setdefault(f.__module__, {})[f.__name__] = no_nrt
    _PLAIN[f.__module__, f.__name__] = f
    return f


def njit(f):
    """Mark ``f`` for compilation; the module keeps the plain function (see ``compiled``)."""
    return _mark(f, False)


def njit_plain(f):
    """``njit`` without numba's reference counting (``_nrt=False``): such a function
    cannot allocate, and in exchange pays nothing for the arrays it passes around —
    with counting on, the atomic increments per call cost more than the algorithm."""
    return _mark(f, True)


def njit_inline(f):
    """``njit_plain``, and inlined into its callers (numba's ``inline="always"``): the
    tECS and union-list helpers run several times per event, and an array argument of a
    compiled call is passed as some seven machine words, so a call to ``_add`` with its
    three arrays cost about as much as the node it creates."""
    _INLINE.add((f.__module__, f.__name__))
    return njit_plain(f)


_compiled: dict[tuple[str, ...], dict] = {}
_compiling = threading.Lock()


def compiled(*modules: str) -> dict:
    """The numba-compiled functions of ``modules`` (default: the CEA kernel's) by name,
    compiled with ``cache=True`` on first call, then loaded from numba's cache. Empty
    without numba, or with ``NUMBA_DISABLE_JIT=1``: the plain functions then run (so tests
    can patch them). The marked names of one call's modules must be distinct."""
    key = modules or (KERNEL,)
    with _compiling:
        if key not in _compiled:
            _compiled[key] = _compile_all(key)
    return _compiled[key]


def _compile_all(modules: tuple[str, ...]) -> dict:
    if not HAVE_NUMBA or os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0"):
        return {}
    import types

    import numba

    # copies over one copy of the modules' globals, where every marked name gets compiled
    g: dict = {}
    sources = [__file__]  # this loader's compile options too
    for m in modules:  # importing a module marks its functions
        module = importlib.import_module(m)
        g.update(module.__dict__)
        sources.append(module.__file__)
    stamp = _stamp(sources)
    names = [(m, name) for m in modules for name in _JIT.get(m, {})]
    for m, name in names:
        f = _PLAIN[m, name]
        copy = types.FunctionType(f.__code__, g, name, f.__defaults__, f.__closure__)
        copy.__qualname__, copy.__module__, copy.__doc__ = f.__qualname__, f.__module__, f.__doc__
        opts = {"_nrt": False} if _JIT[m][name] else {}
        if (m, name) in _INLINE:
            opts["inline"] = "always"
        g[name] = numba.njit(cache=True, nogil=True, **opts)(copy)
        _restamp(g[name], stamp)
    return {name: g[name] for _, name in names}


def _stamp(sources: list[str]) -> tuple | None:
    """What a cached function of these modules is valid for: their sources' contents. numba
    stamps a function with its own file's time and size only, so the hash join's entry point
    (``pcea_kernel``), which inlines ``ordered_kernel``'s functions, kept its machine code
    when only ``ordered_kernel.py`` changed (an edit, a ``git pull``): stale code, silently."""
    digest = hashlib.sha256()
    try:
        for path in sources:
            digest.update(path.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    except (OSError, TypeError):  # no readable source (a zipped install): numba's own stamp
        return None
    return ("cer", digest.hexdigest())


def _restamp(dispatcher, stamp: tuple | None) -> None:
    """Give a dispatcher's cache ``stamp`` in place of numba's: an index saved under another
    stamp then counts as empty, and the function compiles again (numba 0.60-0.68 API; if it
    moved, numba's own stamp stays, as before)."""
    if stamp is None:
        return
    cache = getattr(dispatcher, "_cache", None)
    cache_file = getattr(cache, "_cache_file", None)
    if cache_file is not None and hasattr(cache_file, "_source_stamp"):
        cache_file._source_stamp = stamp


#: The kernel's entry point, the function a run calls from Python: numba caches machine code
#: per entry point (the functions it calls are compiled into it), so its cache index says
#: whether a run compiles.
ENTRY = "run_events"

#: Called (once, then cleared) just before a run's first compiled call compiles the kernel
#: rather than loading it from numba's cache (``will_compile``): the CLI says so on stderr.
compile_notice = None


def will_compile(*modules: str) -> bool:
    """Whether the compiled kernel's (of ``modules``: default the CEA's; the hash join's
    ``engine.pcea_state.MODULES``) first call will compile it (13-22 s of CPU): numba's
    cache (``__pycache__`` beside ``kernel.py``, or ``NUMBA_CACHE_DIR``) holds no machine code
    of ``ENTRY`` for this CPU — the first run after an install or upgrade, or a cleared cache.
    Another signature (float times after integer ones) also compiles, and is not foreseen."""
    fns = compiled(*modules)
    if ENTRY not in fns:
        return False
    try:  # numba's cache index (numba 0.60-0.68): {(signature, magic tuple): file}
        from numba.core.registry import cpu_target

        magic = cpu_target.target_context.codegen().magic_tuple()
        index = fns[ENTRY]._cache._cache_file._load_index()
    except Exception:  # noqa: BLE001 - numba's internals moved: say nothing rather than guess
        return False
    return not any(key[1] == magic for key in index)


def compiled_for_run(*modules: str) -> dict:
    """``compiled(*modules)`` for a run about to call it: first ``compile_notice`` when that
    call will compile (``will_compile``)."""
    global compile_notice
    fns = compiled(*modules)
    notice, compile_notice = compile_notice, None
    if notice is not None and will_compile(*modules):
        notice()
    return fns


def readonly(*arrays):
    """``arrays`` as read-only views (no copy). numba types a read-only array (what polars
    hands over without a copy) and a writable one (a copy, or numpy's own) apart, so a
    kernel fed both compiles once per mix: 13-22 s and ~500 MB the first time another path
    (``--jobs``, ``-o``) met the other kind. Its inputs go through this, one type always."""
    out = []
    for a in arrays:
        if a is not None and a.flags.writeable:
            a = a.view()
            a.flags.writeable = False
        out.append(a)
    return out


#: A run switches to the compiled functions once it has seen this many events (before
#: that, plain Python costs less than numba's import and cache load, ~0.5-1 s).
JIT_MIN_EVENTS = 20_000


def jit_forced() -> bool | None:
    """``CER_JIT=1`` / ``CER_JIT=0``: always / never compiled; otherwise ``None`` (by size)."""
    forced = os.environ.get("CER_JIT", "")
    return forced == "1" if forced in ("0", "1") else None


def compiled_from_start(events: int) -> bool:
    """Whether a kernel run whose first slice has ``events`` events runs compiled from it
    (``CER_JIT``, else by size: ``JIT_MIN_EVENTS``; numba installed and not disabled)."""
    forced = jit_forced()
    wanted = forced if forced is not None else events >= JIT_MIN_EVENTS
    return wanted and HAVE_NUMBA and os.environ.get("NUMBA_DISABLE_JIT", "0") in ("", "0")


def plain(name: str, module: str = KERNEL):
    """The plain function marked as ``name`` in ``module`` (to tell when a test replaced
    the module's)."""
    return _PLAIN[module, name]


def warm_up_jit(events: int) -> threading.Thread | None:
    """For a run expected to see ``events`` events: when that is enough for the compiled
    kernel (``JIT_MIN_EVENTS``, unless ``CER_JIT`` decides), start loading it now, in a
    background thread: numba's import and the set-up of its target context (~0.3 s) then
    overlap the reading of the log, during which the main thread mostly waits in polars
    without the GIL. The run itself takes the functions from ``compiled()`` as before (its
    lock makes it wait for this thread, never load twice); a failure here is left for that
    call to meet and report."""
    forced = jit_forced()
    if forced is False or (forced is None and events < JIT_MIN_EVENTS) or not HAVE_NUMBA:
        return None
    thread = threading.Thread(target=_load_jit, name="cer-jit-warm-up", daemon=True)
    thread.start()
    return thread


def _load_jit() -> None:
    try:
        if not compiled():  # numba disabled (NUMBA_DISABLE_JIT)
            return
        # What the first call of a cached function does before it loads its machine code:
        # install numba's typing and lowering registries (numba 0.60-0.68 API).
        from numba.core.compiler_lock import global_compiler_lock
        from numba.core.registry import cpu_target

        with global_compiler_lock:
            cpu_target.typing_context.refresh()
            cpu_target.target_context.refresh()
    except Exception:  # noqa: BLE001, S110 - only a head start; the run loads what it needs
        pass
