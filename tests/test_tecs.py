"""tECS invariants: union gadgets (a)–(d), union-lists, windowed enumeration, compaction."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from cer_cli.engine.enumerate import enumerate_latest_first, enumerate_window
from cer_cli.engine.tecs import BOTTOM, NO_WINDOW, OUTPUT, TECS, UNION


def semantics(t: TECS, n: int) -> Counter:
    """Every full path below ``n`` as (start, start time, sorted marks), by plain recursion."""
    k = t.kind[n]
    if k == BOTTOM:
        return Counter({(t.pos[n], t.mt[n], ()): 1})
    if k == OUTPUT:
        return Counter(
            {
                (s, tm, tuple(sorted(ev + ((t.pos[n], t.lab[n]),)))): c
                for (s, tm, ev), c in semantics(t, t.a[n]).items()
            }
        )
    return semantics(t, t.a[n]) + semantics(t, t.b[n])


def walk(found) -> Counter:
    out = Counter()
    for start, _, p in found:
        ev = []
        while p is not None:
            ev.append((p[0], p[1]))
            p = p[2]
        out[(start, tuple(sorted(ev)))] += 1
    return out


def odepth(t: TECS, n: int) -> int:
    return odepth(t, t.a[n]) + 1 if t.kind[n] == UNION else 0


def safe(t: TECS, n: int) -> bool:
    return t.kind[n] != UNION or (odepth(t, n) == 1 and odepth(t, t.b[n]) <= 2)


def check_invariants(t: TECS) -> None:
    for n in range(len(t)):
        if t.kind[n] == UNION:
            left, right = t.a[n], t.b[n]
            assert left < n and right < n
            assert t.mx[left] >= t.mx[right], "not time-ordered"
            assert t.mx[n] == t.mx[left] and t.mt[n] == t.mt[left]
        elif t.kind[n] == OUTPUT:
            assert t.mx[n] == t.mx[t.a[n]]
        assert odepth(t, n) <= 3, "not 3-bounded"


def build_pool(rng: random.Random, t: TECS, steps: int) -> list[int]:
    """Random safe nodes built only with the tECS operations, respecting their preconditions."""
    pool: list[int] = []
    pos = 0
    for _ in range(steps):
        op = rng.random()
        if op < 0.3 or not pool:
            pool.append(t.new_bottom(pos, pos * 10, pos))
            pos += 1
        elif op < 0.6:
            n = rng.choice(pool)
            pool.append(t.extend(n, pos, rng.randrange(3)))
            pos += 1
        else:
            n1 = rng.choice(pool)
            same = [n for n in pool if t.mx[n] == t.mx[n1]]
            n2 = rng.choice(same)
            u = t.union(n1, n2)
            assert safe(t, u)
            assert semantics(t, u) == semantics(t, n1) + semantics(t, n2)
            pool.append(u)
    return pool


@given(st.randoms(use_true_random=False), st.integers(5, 60))
@settings(max_examples=150, deadline=None)
def test_union_gadgets_keep_nodes_safe_time_ordered_and_3_bounded(rng, steps):
    t = TECS()
    build_pool(rng, t, steps)
    check_invariants(t)


def test_union_gadget_d_orders_right_children():
    t = TECS()
    b0, b1, b2 = (t.new_bottom(i, i, i) for i in range(3))
    top = t.extend(b2, 5, 0)
    n1 = t.union(top, t.extend(b0, 6, 0))  # right max-start 0
    n2 = t.union(t.extend(b2, 7, 0), t.extend(b1, 8, 0))  # right max-start 1 > 0: case (d)
    u = t.union(n1, n2)
    check_invariants(t)
    assert safe(t, u)
    u1 = t.b[u]
    u2 = t.b[u1]
    assert t.mx[t.a[u2]] == 1 and t.mx[t.b[u2]] == 0
    assert semantics(t, u) == semantics(t, n1) + semantics(t, n2)


def test_union_gadget_c():
    t = TECS()
    b0, b1, b2 = (t.new_bottom(i, i, i) for i in range(3))
    n1 = t.union(t.extend(b2, 5, 0), t.extend(b1, 6, 0))
    n2 = t.union(t.extend(b2, 7, 0), t.extend(b0, 8, 0))
    u = t.union(n1, n2)
    check_invariants(t)
    u2 = t.b[t.b[u]]
    assert t.mx[t.a[u2]] == 1 and t.mx[t.b[u2]] == 0


@given(st.randoms(use_true_random=False), st.integers(1, 30))
@settings(max_examples=150, deadline=None)
def test_union_list_insert_and_merge(rng, inserts):
    t = TECS()
    pool = build_pool(rng, t, 40)
    top = max(t.mx[n] for n in pool)
    head = t.extend(t.new_bottom(top + 1, (top + 1) * 10, top + 1), top + 2, 0)
    ul = [head]
    expected = semantics(t, head)
    for _ in range(inserts):
        n = rng.choice(pool)
        t.insert(ul, n)
        expected += semantics(t, n)
        assert t.kind[ul[0]] != UNION
        assert all(t.mx[ul[0]] >= t.mx[m] for m in ul)
        assert all(t.mx[ul[i]] > t.mx[ul[i + 1]] for i in range(1, len(ul) - 1))
        assert all(safe(t, m) for m in ul)
    merged = t.merge(ul)
    assert safe(t, merged)
    assert semantics(t, merged) == expected
    check_invariants(t)


@given(st.randoms(use_true_random=False), st.integers(0, 80))
@settings(max_examples=150, deadline=None)
def test_windowed_enumeration_is_exact_and_ordered(rng, tau):
    t = TECS()
    pool = build_pool(rng, t, 50)
    roots = rng.sample(pool, min(4, len(pool)))
    for root in roots:
        want = Counter({(s, ev): c for (s, tm, ev), c in semantics(t, root).items() if tm >= tau})
        assert walk(enumerate_window(t, root, tau)) == want
    # Several roots at once, latest start first.
    found = list(enumerate_latest_first(t, roots, tau))
    starts = [s for s, _, _ in found]
    assert starts == sorted(starts, reverse=True)
    assert walk(found) == sum((walk(enumerate_window(t, r, tau)) for r in roots), Counter())


def test_enumeration_of_duplicate_free_node_has_no_duplicates():
    t = TECS()
    bottoms = [t.new_bottom(i, i, i) for i in range(4)]
    ul = [t.extend(bottoms[3], 9, 0)]
    for b in reversed(bottoms[:3]):
        t.insert(ul, t.extend(b, 9, 1))
    found = walk(enumerate_window(t, t.merge(ul), NO_WINDOW))
    assert set(found.values()) == {1} and len(found) == 4


@given(st.randoms(use_true_random=False), st.integers(0, 60))
@settings(max_examples=100, deadline=None)
def test_compaction_keeps_windowed_enumerations(rng, tau):
    t = TECS()
    pool = build_pool(rng, t, 60)
    top = max(t.mx[n] for n in pool)
    lists = []
    for _ in range(3):
        head = t.new_bottom(top + 1, (top + 1) * 10, top + 1)
        ul = [head]
        for n in rng.sample(pool, min(5, len(pool))):
            t.insert(ul, n)
        lists.append(ul)
    before = [walk(enumerate_window(t, n, tau)) for ul in lists for n in ul]
    before = [c for c in before if c]
    size = len(t)
    t.compact([(tau, lists)])
    check_invariants(t)
    after = [walk(enumerate_window(t, n, tau)) for ul in lists for n in ul]
    assert after == before
    assert len(t) <= size and t.compactions == 1
    for ul in lists:
        assert all(t.mt[n] >= tau for n in ul)
