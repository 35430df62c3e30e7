"""The isolation-cycle checker (verifier/isolation/cycles.py) on tiny hand-written histories, one per
class, and on generated ones: a serial history has no cycle, a wr edge turned backwards in one makes
a cycle the checker names, and the answer does not depend on the order it is given."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kchaos.verifier.isolation.cycles import (CLASSES, EDGE_KINDS, MAX_CASES, LogRecord, Poll, Send, Txn, analyse,
                                              check, classify, find_cycles)

X, Y, Z = ("x", 0), ("y", 0), ("z", 1)


def T(tid: str, *ops, p: str | None = None, outcome: str = "committed", at: tuple[float, float] = (0.0, 10.0)) -> Txn:
    """A transaction: concurrent with every other one and in a process of its own unless told."""
    return Txn(tid, p or f"p-{tid}", outcome, at[0], at[1], ops)


def send(key, value) -> Send:
    return Send(key, value)


def poll(key, *records) -> Poll:
    return Poll(key, records)


def names(result: dict) -> set[str]:
    return {*result["anomalies"], *result["allowed"], *result["not_judged"]}


def kinds_of(case: dict) -> list[str]:
    return [s["kind"] for s in case["steps"]]


# --- one history per class -------------------------------------------------------------------------


def test_a_write_cycle_is_g0_and_allowed():
    # Jepsen's g0 shape: each writes both keys, and the two keys' orders disagree
    t1 = T("T1", send(X, "a"), send(Y, "a"))
    t2 = T("T2", send(X, "b"), send(Y, "b"))
    log = {X: [(0, "a", True), (1, "b", True)], Y: [(0, "b", True), (1, "a", True)]}
    result = check([t1, t2], log)
    assert result["valid"] == "valid" and result["anomalies"] == {}
    (case,) = result["allowed"]["G0"]
    assert case["cycle"] == ["T1", "T2", "T1"] and kinds_of(case) == ["ww", "ww"]
    assert [(s["key"], s["offset"], s["next_offset"]) for s in case["steps"]] == [(["x", 0], 0, 1), (["y", 0], 0, 1)]
    assert result["judgements"]["G0"]["verdict"] == "allowed" and result["edges"]["ww"] == 2


def test_a_cycle_of_ww_and_wr_is_g1c_and_allowed():
    # T1's send to x precedes T2's; T1 polled the y that T2 committed: legal, writes are not isolated
    t1 = T("T1", send(X, "a"), poll(Y, (0, "c")))
    t2 = T("T2", send(X, "b"), send(Y, "c"))
    result = check([t1, t2], {X: [(0, "a", True), (1, "b", True)], Y: [(0, "c", True)]})
    assert result["valid"] == "valid"
    (case,) = result["allowed"]["G1c"]
    assert sorted(kinds_of(case)) == ["wr", "ww"] and case["elle"] == "G1c"
    assert "wr-only" not in names(result) and "G0" not in names(result)


def test_a_cycle_of_wr_edges_only_is_an_anomaly_at_read_committed():
    # Jepsen's g1c-pure-wr shape: each read what the other wrote
    t1 = T("T1", send(X, "a"), poll(Y, (0, "b")))
    t2 = T("T2", send(Y, "b"), poll(X, (0, "a")))
    log = {X: [(0, "a", True)], Y: [(0, "b", True)]}
    result = check([t1, t2], log)
    assert result["valid"] == "invalid" and result["anomaly_types"] == ["wr-only"]
    (case,) = result["anomalies"]["wr-only"]
    assert case["elle"] == "G1c" and kinds_of(case) == ["wr", "wr"] and case["cycle"] == ["T1", "T2", "T1"]
    assert "T2 polled 'a' from x/0 (offset 0), which T1 sent" in case["explanation"]
    assert "G1c" not in names(result)  # a G1c witness of wr edges only is the wr-only family's
    # read_uncommitted returns writes before they commit: the same cycle is what that level allows
    loose = check([t1, t2], log, isolation="read_uncommitted")
    assert loose["valid"] == "valid" and list(loose["allowed"]) == ["wr-only"]


def test_one_anti_dependency_is_g_single_reported_but_not_judged():
    # read skew: T1 read x before T2's version of it, and read T2's y
    t0 = T("T0", send(X, "a"), at=(0, 1))
    t1 = T("T1", poll(X, (0, "a")), poll(Y, (0, "d")), at=(2, 10))
    t2 = T("T2", send(X, "b"), send(Y, "d"), at=(3, 9))
    log = {X: [(0, "a", True), (1, "b", True)], Y: [(0, "d", True)]}
    result = check([t0, t1, t2], log)
    assert result["valid"] == "valid" and result["anomalies"] == {}
    (case,) = result["not_judged"]["G-single"]
    assert sorted(kinds_of(case)) == ["rw", "wr"] and case["cycle"] == ["T1", "T2", "T1"]
    assert {"value": "a", "offset": 0, "next_value": "b", "next_offset": 1}.items() <= case["steps"][0].items()
    # Jepsen's Kafka checker draws no rw: without it there is no cycle at all
    plain = check([t0, t1, t2], log, kinds=("ww", "wr", "process", "realtime"))
    assert names(plain) == set() and plain["edges"]["rw"] == 1 and "rw" not in plain["searched"]


def test_two_anti_dependencies_are_g2():
    # write skew: each read the other's key before the other's version of it
    t0 = T("T0", send(X, "x0"), send(Y, "y0"), at=(0, 1))
    t1 = T("T1", poll(X, (0, "x0")), send(Y, "y1"), at=(2, 10))
    t2 = T("T2", poll(Y, (0, "y0")), send(X, "x1"), at=(3, 9))
    log = {X: [(0, "x0", True), (2, "x1", True)], Y: [(0, "y0", True), (2, "y1", True)]}
    result = check([t0, t1, t2], log)
    (case,) = result["not_judged"]["G2"]
    assert kinds_of(case) == ["rw", "rw"] and "G-single" not in names(result) and result["valid"] == "valid"


def test_a_read_of_an_aborted_send_is_g1a():
    writer = T("W", send(X, "a"), outcome="aborted")
    gone = T("U", send(Y, "u"), outcome="unknown")  # outcome unknown, nothing of it committed
    reader = T("R", poll(X, (0, "a")), poll(Y, (0, "u")))
    result = check([writer, gone, reader], {X: [(0, "a", False)], Y: [(0, "u", False)]})
    assert result["valid"] == "invalid" and result["counts"]["G1a"] == 2
    cases = result["anomalies"]["G1a"]
    assert [(c["writer"], c["log"]) for c in cases] == [("W", "uncommitted"), ("U", "uncommitted")]
    assert "W aborted (its abort returned)" in cases[0]["explanation"]
    assert check([writer, gone, reader], {X: [(0, "a", False)], Y: [(0, "u", False)]},
                 isolation="read_uncommitted")["valid"] == "valid"


def test_a_read_of_a_committed_writers_uncommitted_record_is_g1b():
    # W's first attempt at "a" was aborted (offset 0), its committed copy is at 2: R read the first
    writer = T("W", send(X, "a"))
    reader = T("R", poll(X, (0, "a")))
    result = check([writer, reader], {X: [(0, "a", False), (2, "a", True)]})
    (case,) = result["anomalies"]["G1b"]
    assert (case["reader"], case["writer"], case["offset"], case["log"]) == ("R", "W", 0, "uncommitted")
    assert result["edges"]["wr"] == 0  # what R read was never part of W's committed state
    # the committed copy is an ordinary read
    assert check([writer, T("R", poll(X, (2, "a")))], {X: [(0, "a", False), (2, "a", True)]})["valid"] == "valid"


def test_a_cycle_only_process_order_closes_is_named_for_it():
    # T1 read what T2 sent, though T2 began after T1 completed in the same process
    t1 = T("T1", poll(Y, (0, "b")), p="p", at=(0, 1))
    t2 = T("T2", send(Y, "b"), p="p", at=(2, 3))
    result = check([t1, t2], {Y: [(0, "b", True)]})
    assert result["anomaly_types"] == ["wr-only-process"] and result["valid"] == "invalid"
    (case,) = result["anomalies"]["wr-only-process"]
    assert kinds_of(case) == ["process", "wr"] and case["elle"] == "G1c-process"
    assert "wr-only" not in names(result) and "wr-only-realtime" not in names(result)
    # a write cycle closed the same way is Kafka's behaviour
    w1 = T("T1", send(X, "a"), p="p", at=(0, 1))
    w2 = T("T2", send(X, "b"), p="p", at=(2, 3))
    assert list(check([w1, w2], {X: [(0, "b", True), (1, "a", True)]})["allowed"]) == ["G0-process"]


def test_a_cycle_only_realtime_order_closes_is_named_for_it():
    t1 = T("T1", poll(Y, (0, "b")), p="p1", at=(0, 1))
    t2 = T("T2", send(Y, "b"), p="p2", at=(2, 3))
    result = check([t1, t2], {Y: [(0, "b", True)]})
    assert result["anomaly_types"] == ["wr-only-realtime"]
    (case,) = result["anomalies"]["wr-only-realtime"]
    assert kinds_of(case) == ["realtime", "wr"] and case["steps"][0]["completed"] == 1
    # invoked as the other completed is not after it: no order, no cycle
    t2_at_once = T("T2", send(Y, "b"), p="p2", at=(1, 3))
    assert check([t1, t2_at_once], {Y: [(0, "b", True)]})["valid"] == "valid"


def test_a_clean_serial_history_has_no_cycle():
    t1 = T("T1", send(X, "a"), send(Y, "b"), p="p1", at=(0, 1))
    t2 = T("T2", poll(X, (0, "a")), poll(Y, (1, "b")), send(X, "c"), p="p2", at=(2, 3))
    t3 = T("T3", poll(X, (0, "a"), (2, "c")), poll(Y, (1, "b")), send(Y, "d"), p="p1", at=(4, 5))
    log = {X: [(0, "a", True), (2, "c", True)], Y: [(1, "b", True), (3, "d", True)]}  # markers between
    result = check([t1, t2, t3], log)
    assert result["valid"] == "valid" and names(result) == set() and result["not_checked"] == []
    # rw: T2 read y up to b, and T3 wrote the next y; a reader's own next version is no edge
    assert result["edges"] == {"ww": 2, "wr": 3, "rw": 1, "process": 1, "realtime": 2}
    assert result["checked"]["committed"] == 3 and result["checked"]["records_read"] == 5


# --- what is and is not judged -----------------------------------------------------------------------


def test_what_the_history_does_not_let_it_judge_is_listed_and_makes_it_unknown():
    t1 = T("T1", send(X, "a"), poll(Z, (0, "q")))              # z/1 was not read at the end
    t2 = T("T2", poll(X, (0, "a"), (1, "ghost")))             # a value the log does not hold
    t3 = T("T3", send(Y, "dup"))
    log = {X: [(0, "a", True)], Y: [(0, "dup", True), (1, "dup", True)]}  # a duplicate
    result = check([t1, t2, t3], log)
    assert result["valid"] == "unknown" and names(result) == set()
    reasons = {e["reason"]: e["count"] for e in result["not_checked"]}
    assert reasons == {"key-absent-from-log": 1, "value-absent-from-log": 1, "duplicate-in-log": 1}
    (absent,) = [e for e in result["not_checked"] if e["reason"] == "key-absent-from-log"]
    assert absent["examples"] == [{"txn": "T1", "key": ["z", 1], "op": "poll", "offsets": [0]}]
    assert result["edges"]["wr"] == 1  # what could be judged still was


def test_a_duplicate_in_the_log_draws_no_write_cycle_of_its_own():
    t1, t2 = T("T1", send(X, "a")), T("T2", send(X, "b"))
    result = check([t1, t2], {X: [(0, "a", True), (1, "b", True), (2, "a", True)]})
    assert names(result) == set() and result["edges"]["ww"] == 0
    assert [e["reason"] for e in result["not_checked"]] == ["duplicate-in-log"]


def test_an_unknown_outcome_is_settled_by_the_log_and_orders_nothing_after_it():
    # its commit may have landed after T2 began: no realtime edge from it, only into it
    t0 = T("T0", send(Y, "y"), p="p0", at=(0, 0.5))
    t1 = T("T1", send(X, "a"), outcome="unknown", p="p1", at=(1, 2))
    t2 = T("T2", poll(X, (0, "a")), p="p1", at=(3, 4))
    result = check([t0, t1, t2], {X: [(0, "a", True)], Y: [(0, "y", True)]})
    assert result["checked"]["committed_from_log"] == 1 and result["checked"]["committed"] == 3
    graph = analyse([t0, t1, t2], {X: [(0, "a", True)], Y: [(0, "y", True)]}).graph
    assert sorted((a, b, k) for a, b, k in graph.edges if k in ("process", "realtime")) == [
        ("T0", "T1", "realtime"), ("T0", "T2", "realtime")]
    # and one whose sends never committed is no node
    assert check([t1, t2], {X: [(0, "a", False)]})["checked"]["committed"] == 1


def test_realtime_edges_are_a_frontier_not_every_pair():
    serial = [T(f"T{i:03d}", send(X, f"v{i}"), at=(2 * i, 2 * i + 1)) for i in range(150)]
    log = {X: [(i, f"v{i}", True) for i in range(150)]}
    assert check(serial, log)["edges"]["realtime"] == 149
    concurrent = [T(f"T{i:03d}", send(X, f"v{i}"), at=(0, 100)) for i in range(150)]
    assert check(concurrent, log)["edges"]["realtime"] == 0


def test_cases_are_capped_and_counts_exact():
    txns, log = [], {}
    for i in range(MAX_CASES + 5):  # that many separate G0 pairs, each on its own keys
        kx, ky = (f"x{i}", 0), (f"y{i}", 0)
        txns += [T(f"A{i:02d}", send(kx, "a"), send(ky, "a")), T(f"B{i:02d}", send(kx, "b"), send(ky, "b"))]
        log[kx] = [(0, "a", True), (1, "b", True)]
        log[ky] = [(0, "b", True), (1, "a", True)]
    result = check(txns, log)
    assert result["counts"]["G0"] == MAX_CASES + 5 and len(result["allowed"]["G0"]) == MAX_CASES


def test_every_name_is_judged_as_kafka_documents():
    judged = {name: classify(name)[0] for name in (*CLASSES, "G1a", "G1b")}
    assert {n for n, v in judged.items() if v == "invalid"} == {
        "wr-only", "wr-only-process", "wr-only-realtime", "G1a", "G1b"}
    assert {n for n, v in judged.items() if v == "allowed"} == {
        "G0", "G0-process", "G0-realtime", "G1c", "G1c-process", "G1c-realtime"}
    assert {n for n, v in judged.items() if v == "not-judged"} == {
        "G-single", "G-single-process", "G-single-realtime", "G2", "G2-process", "G2-realtime"}
    assert all(classify(n, "read_uncommitted")[0] != "invalid" for n in (*CLASSES, "G1a", "G1b"))
    with pytest.raises(ValueError):
        classify("G1d")


def test_a_history_it_cannot_read_is_refused_when_built():
    with pytest.raises(ValueError, match="outcome"):
        Txn("T1", "p", "ok", 0, 1)
    with pytest.raises(ValueError, match="before it is invoked"):
        Txn("T1", "p", "committed", 2, 1)
    with pytest.raises(ValueError, match="appears twice"):
        check([T("T1"), T("T1")], {})


# --- generated histories ------------------------------------------------------------------------------


def serial_history(rng: random.Random) -> tuple[list[Txn], dict]:
    """Transactions one after another, each polling the newest committed records of a key (never its
    own sends, which are not committed yet), some aborted, some unknown (the log settles them)."""
    keys = [X, Y, Z][: rng.randint(1, 3)]
    log: dict = {k: [] for k in keys}
    next_offset = {k: 0 for k in keys}
    txns, counter = [], 0
    for i in range(rng.randint(1, 8)):
        outcome = rng.choice(["committed", "committed", "committed", "aborted", "unknown"])
        ops, written = [], []
        for _ in range(rng.randint(1, 4)):
            k = rng.choice(keys)
            if rng.random() < 0.5:
                log[k].append([next_offset[k], f"v{counter}", False])
                next_offset[k] += 1
                written.append((k, log[k][-1]))
                ops.append(Send(k, f"v{counter}"))
                counter += 1
            else:
                newest = [(o, v) for o, v, c in log[k] if c]
                m = rng.randint(1, len(newest)) if newest else 0
                ops.append(Poll(k, newest[len(newest) - m:]))
        fate = outcome == "committed" or (outcome == "unknown" and rng.random() < 0.5)
        for _, record in written:
            record[2] = fate
        for k in {k for k, _ in written}:
            next_offset[k] += 1  # the marker
        txns.append(Txn(f"T{i:02d}", f"p{rng.randrange(3)}", outcome, 10.0 * i, 10.0 * i + 5, ops))
    return txns, {k: [LogRecord(o, v, c) for o, v, c in rs] for k, rs in log.items()}


def tangled_history(rng: random.Random) -> tuple[list[Txn], dict]:
    """Overlapping transactions, each key's log a shuffle of its sends, polls of any of its records:
    every kind of cycle and direct anomaly, and own-write reads, for the properties of the answer."""
    keys = [X, Y, Z][: rng.randint(1, 3)]
    specs, sends, counter = [], defaultdict(list), 0
    for i in range(rng.randint(2, 9)):
        outcome = rng.choice(["committed", "committed", "committed", "aborted", "unknown"])
        fate = outcome == "committed" or (outcome == "unknown" and rng.random() < 0.5)
        start = rng.randint(0, 40)
        ops = []
        for _ in range(rng.randint(1, 4)):
            k = rng.choice(keys)
            if rng.random() < 0.5:
                ops.append(("send", k, f"v{counter}"))
                sends[k].append((f"v{counter}", fate))
                counter += 1
            else:
                ops.append(("poll", k, None))
        specs.append((f"T{i:02d}", f"p{rng.randrange(3)}", outcome, start, start + rng.randint(0, 15), ops))
    log = {k: [LogRecord(2 * n, v, c) for n, (v, c) in enumerate(rng.sample(sends[k], len(sends[k])))] for k in keys}
    txns = []
    for tid, process, outcome, invoke, complete, ops in specs:
        built = [Send(k, value) if op == "send" else
                 Poll(k, sorted((r.offset, r.value) for r in rng.sample(log[k], min(len(log[k]), rng.randint(0, 3)))))
                 for op, k, value in ops]
        txns.append(Txn(tid, process, outcome, invoke, complete, built))
    return txns, log


#: one drawn seed per history: Hypothesis then spends its time on the checker, not on thousands of
#: tiny draws (which its health check flagged as slow input generation on a loaded machine)
SEEDS = st.integers(0, 2**32 - 1)


@settings(max_examples=60)
@given(SEEDS)
def test_a_serial_history_has_no_cycle_of_any_kind(seed):
    txns, log = serial_history(random.Random(seed))
    result = check(txns, log)
    assert names(result) == set() and result["valid"] == "valid", result
    assert find_cycles(analyse(txns, log).graph, EDGE_KINDS) == ({}, [])


@settings(max_examples=60)
@given(SEEDS)
def test_a_wr_edge_turned_backwards_makes_a_cycle_the_checker_names(seed):
    """Take a wr edge a -> b of a serial history (b read a's send), remove b's reads of a's sends and
    let a read one of b's committed sends instead: the edge now points back in time, and only it
    does, so every wr-only cycle must hold it, and one closed by process or realtime order exists."""
    rnd = random.Random(seed)
    for _ in range(50):  # about half of the serial histories have such an edge: the next one that does
        txns, log = serial_history(rnd)
        by_id = {t.id: t for t in txns}
        committed = {(k, r.value): r.offset for k, rs in log.items() for r in rs if r.committed}
        candidates = []
        for (a, b, kind) in analyse(txns, log).graph.edges:
            theirs = [op for op in by_id[b].ops if isinstance(op, Send) and (op.key, op.value) in committed]
            if kind == "wr" and by_id[a].outcome == "committed" and theirs:
                candidates.append((a, b, theirs))
        if candidates:
            break
    assert candidates
    a, b, theirs = rnd.choice(candidates)
    written_by_a = {(op.key, op.value) for op in by_id[a].ops if isinstance(op, Send)}
    b_ops = [Poll(op.key, [r for r in op.records if (op.key, r[1]) not in written_by_a]) if isinstance(op, Poll) else op
             for op in by_id[b].ops]
    target = rnd.choice(theirs)
    a_ops = [*by_id[a].ops, Poll(target.key, [(committed[(target.key, target.value)], target.value)])]
    changed = [Txn(t.id, t.process, t.outcome, t.invoke, t.complete,
                   a_ops if t.id == a else b_ops if t.id == b else t.ops) for t in txns]
    result = check(changed, log)
    assert result["valid"] == "invalid", result
    wr_only = [c for name, cases in result["anomalies"].items() if name.startswith("wr-only") for c in cases]
    assert wr_only and all(any(s["kind"] == "wr" and (s["from"], s["to"]) == (b, a) for s in c["steps"])
                           for c in wr_only)


@settings(max_examples=60)
@given(SEEDS)
def test_the_answer_is_deterministic_and_independent_of_the_input_order(seed):
    rnd = random.Random(seed)
    txns, log = tangled_history(rnd)
    first = check(txns, log)
    assert check(txns, log) == first
    shuffled = list(txns)
    rnd.shuffle(shuffled)
    keys = list(log)
    rnd.shuffle(keys)
    assert check(shuffled, {k: list(reversed(log[k])) for k in keys}) == first


@settings(max_examples=60)
@given(SEEDS)
def test_every_witness_is_a_simple_cycle_of_the_graph_named_by_what_it_holds(seed):
    txns, log = tangled_history(random.Random(seed))
    graph = analyse(txns, log).graph
    result = check(txns, log)
    for bucket in ("anomalies", "allowed", "not_judged"):
        for name, cases in result[bucket].items():
            for case in cases:
                if "steps" not in case:
                    continue
                steps, cycle = case["steps"], case["cycle"]
                assert cycle[0] == cycle[-1] and len(set(cycle[:-1])) == len(cycle) - 1
                assert [s["from"] for s in steps] == cycle[:-1] and [s["to"] for s in steps] == cycle[1:]
                assert all((s["from"], s["to"], s["kind"]) in graph.edges for s in steps)
                held, rw = set(kinds_of(case)), kinds_of(case).count("rw")
                family = ("G-single" if rw == 1 else "G2" if rw else "G1c" if {"ww", "wr"} <= held
                          else "wr-only" if "wr" in held else "G0")
                suffix = "-realtime" if "realtime" in held else "-process" if "process" in held else ""
                assert name == family + suffix


def test_a_long_serial_chain_is_checked_quickly_without_recursion():
    n = 1500  # past Python's recursion limit: Tarjan's search is iterative
    rng = random.Random(7)
    txns = [T(f"T{i:04d}", send(X, f"v{i}"), *([poll(X, (i - 1, f"v{i - 1}"))] if i else []),
              p=f"p{rng.randrange(4)}", at=(2 * i, 2 * i + 1)) for i in range(n)]
    result = check(txns, {X: [(i, f"v{i}", True) for i in range(n)]})
    assert result["valid"] == "valid" and result["edges"]["ww"] == n - 1 and result["edges"]["wr"] == n - 1


def _simple_cycles(graph) -> list[list[set[str]]]:
    """Every simple cycle of a small graph, by brute force, as the kinds each of its steps may take."""
    kinds: dict = defaultdict(set)
    for a, b, kind in graph.edges:
        kinds[(a, b)].add(kind)
    succ: dict = defaultdict(set)
    for a, b in kinds:
        succ[a].add(b)
    out = []
    for start in graph.nodes:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in succ[node]:
                if nxt == start:
                    out.append([kinds[(path[i], path[(i + 1) % len(path)])] for i in range(len(path))])
                elif nxt > start and nxt not in path:
                    stack.append((nxt, [*path, nxt]))
    return out


@settings(max_examples=60)
@given(SEEDS)
def test_the_search_finds_a_family_exactly_when_brute_force_does(seed):
    """The families whose search the module calls exact, against every simple cycle of the graph:
    wr-only (the one that decides the verdict) and G0 in any variant, and G-single (one step rw, the
    others not)."""
    txns, log = tangled_history(random.Random(seed))
    cycles = _simple_cycles(analyse(txns, log).graph)
    expected = set()
    for steps in cycles:
        if all(s & {"wr", "process", "realtime"} for s in steps):
            expected.add("wr-only")
        if all(s & {"ww", "process", "realtime"} for s in steps):
            expected.add("G0")
        if any("rw" in s and all(o - {"rw"} for o in steps[:i] + steps[i + 1:]) for i, s in enumerate(steps)):
            expected.add("G-single")
    result = check(txns, log)
    found = {name.removesuffix("-process").removesuffix("-realtime") for name in names(result)}
    assert found & {"wr-only", "G0", "G-single"} == expected
