"""Fault exposure: what each fault of a run overlapped of the pipeline's work, from the history.

A fault that hit nothing tested nothing. For every executed fault (its window: the harness's
``fault:*`` operation, from invoke to heal) this counts the client transactions in flight when it
started, those whose life overlapped its window by outcome, and the requests the clients sent
during it; per fault kind the same, with each transaction counted once; and the stalls: intervals
with no commit for longer than the campaign's bound, with what each worker was doing then.

A transaction's life runs from its first operation (the send of its outputs) to the completion of
its last (its commit or abort; a transaction that never ended lives until its process's last
recorded moment). A fault the cluster's own record shows did nothing (verifier/fault_effects.py:
a kill with no new incarnation, a cut no broker noticed, a message rule that matched no request, a
latency under which the clients' calls took no longer) is listed per kind (``without_effect``) and
counted nowhere. Both engines report these facts from
the same function (verifier/evidence.py), and a campaign's required exposure
(``[faults.exposure]``) makes a run that fell short ``unknown``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Iterable

#: a transaction's outcome as the history defines it (model.HistoryIndex.txn_outcome), grouped
COMMITTED = ("committed", "offsets-ok")
#: the client requests counted in a fault's window, by the history operation that sends them
REQUESTS = {"send": "produce", "send_offsets": "send_offsets", "commit": "commit", "abort": "abort",
            "commit_offsets": "commit_offsets"}
#: what each worker was doing in a stall: at most this many operations per process are kept
STALL_OPS_PER_PROCESS = 6
#: at most this many stalls are described (the longest); the count and the total cover them all
MAX_STALLS = 12


@dataclass(frozen=True)
class Transaction:
    process: str
    txn_seq: int
    txid: str | None
    began: float
    ended: float
    outcome: str
    #: the client transaction version the coordinator logged (a transaction read from its log)
    client_tv: int | None = None

    @property
    def committed(self) -> bool:
        return self.outcome in COMMITTED

    def overlaps(self, start: float, end: float) -> bool:
        return self.began <= end and self.ended >= start


@dataclass(frozen=True)
class Window:
    """An executed fault: from the harness's invoke to its heal (its operation's completion)."""

    index: int
    kind: str
    target: str
    role: str | None
    start: float
    end: float


def transactions(history: Any) -> list[Transaction]:
    """Every client transaction of the history (``model.HistoryIndex``), with its life."""
    first: dict[tuple[str, int], float] = {}
    last: dict[tuple[str, int], float] = {}
    for op in history.ops:
        seq = (op.get("value") or {}).get("txn_seq")
        if seq is None or op["process"] == "harness":
            continue
        key = (op["process"], seq)
        first[key] = min(first.get(key, op["invoke_time"]), op["invoke_time"])
        done = op["complete_time"] if op["complete_time"] is not None else op["invoke_time"]
        last[key] = max(last.get(key, done), done)
    out = []
    for key, began in first.items():
        outcome = history.txn_outcome.get(key, "unknown")
        ended = last[key]
        if outcome == "unknown" or (key not in history.txn_ends and outcome not in ("offsets-ok", "offsets-fail")):
            # never ended, or its end never answered: it may have acted until its process stopped
            ended = max(ended, history.process_last.get(key[0], ended))
        send = history.txn_ops.get(key) or {}
        out.append(Transaction(key[0], key[1], send.get("txid"), began, ended, outcome))
    return sorted(out, key=lambda t: (t.began, t.process, t.txn_seq))


def logged_transactions(coordinator: Iterable[Any], excluded: set[str] | frozenset[str] = frozenset()) -> list[Transaction]:
    """The transactions the coordinator completed (``coordinator_log.CoordinatorTxn``, as both
    engines segment its log), each living from its start to its Complete* record, in seconds: the
    same evidence for every pipeline, kchaos' workers, Kafka Streams or a user's app (which keeps no
    client history). ``process`` and ``txid`` are the transactional id."""
    out = []
    for c in coordinator:
        if c.completed is None or c.complete_ms is None or c.transactional_id in excluded:
            continue
        began = c.start_ms if c.start_ms is not None and c.start_ms > 0 else c.complete_ms
        out.append(Transaction(c.transactional_id, c.first_offset, c.transactional_id, began / 1000,
                               c.complete_ms / 1000, "committed" if c.completed == "commit" else "aborted",
                               c.client_tv))
    return sorted(out, key=lambda t: (t.ended, t.txid))


def windows(history: Any) -> tuple[list[Window], list[dict[str, Any]]]:
    """The executed faults' windows, and the faults that were attempted but not injected."""
    done, failed = [], []
    end_of_history = max((op["complete_time"] or op["invoke_time"] for op in history.ops), default=0.0)
    for op in history.faults:
        value = op.get("value") or {}
        kind = op["f"].removeprefix("fault:")
        if op["outcome"] != "ok" and op["complete_time"] is not None:
            failed.append({"index": value.get("index"), "kind": kind, "target": value.get("target"),
                           "error": op.get("error")})
            continue
        done.append(Window(int(value.get("index", len(done))), kind, str(value.get("target")),
                           (value.get("resolved") or {}).get("role"), op["invoke_time"],
                           op["complete_time"] if op["complete_time"] is not None else end_of_history))
    return done, failed


def _requests(ops: Iterable[dict[str, Any]], start: float, end: float) -> dict[str, int]:
    counts = {name: 0 for name in REQUESTS.values()}
    for op in ops:
        name = REQUESTS.get(op["f"])
        if name is not None and start <= op["invoke_time"] <= end:
            counts[name] += 1
    return counts


def _overlap(txns: list[Transaction], start: float, end: float) -> dict[str, Any]:
    """What of ``txns`` the window [start, end] overlapped, by outcome."""
    hit = [t for t in txns if t.overlaps(start, end)]
    return {"in_flight_at_start": sum(1 for t in hit if t.began < start <= t.ended),
            "begun": sum(1 for t in hit if start <= t.began <= end),
            "committed": sum(1 for t in hit if t.committed),
            "committed_in_window": sum(1 for t in hit if t.committed and start <= t.ended <= end),
            "aborted": sum(1 for t in hit if t.outcome == "aborted"),
            "commit_failed": sum(1 for t in hit if t.outcome in ("commit-failed", "offsets-fail")),
            "unknown": sum(1 for t in hit if t.outcome not in (*COMMITTED, "aborted", "commit-failed", "offsets-fail"))}


def _phase_times(history: Any) -> tuple[float | None, float | None]:
    """When the workload started (the harness's ``steady`` phase) and when its final reads began."""
    start = end = None
    for op in history.ops:
        if op["process"] == "harness" and op["f"] == "phase":
            phase = (op.get("value") or {}).get("phase")
            if phase == "steady" and start is None:
                start = op["invoke_time"]
            elif phase == "final-reads":
                end = op["invoke_time"]
    return start, end


def _doing(history: Any, start: float, end: float) -> dict[str, list[dict[str, Any]]]:
    """Per worker process, the operations that were under way or happened in [start, end]: what the
    history says each was doing in a stall (an operation outstanding through it is the cause most
    often: a send_offsets or commit waiting for a coordinator or a leader)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for op in history.ops:
        process = op["process"]
        # a process gone before the stall (its operation never answered) was doing nothing in it
        if process in ("harness", "seeder") or op["f"] == "poll" or history.process_last.get(process, end) < start:
            continue
        done = op["complete_time"]
        if op["invoke_time"] > end or (done is not None and done < start):
            continue
        entry = {"f": op["f"], "invoked_s": round(op["invoke_time"] - start, 2),
                 "completed_s": None if done is None else round(done - start, 2), "outcome": op["outcome"]}
        seq = (op.get("value") or {}).get("txn_seq")
        if seq is not None:
            entry["txn_seq"] = seq
        if op.get("error"):
            entry["error"] = " ".join(str(op["error"]).split())[:160]
        out[process].append(entry)
    # the longest-running first: what blocked the worker
    return {p: sorted(ops, key=lambda e: -((e["completed_s"] if e["completed_s"] is not None else end - start)
                                             - e["invoked_s"]))[:STALL_OPS_PER_PROCESS]
            for p, ops in sorted(out.items())}


def stalls(history: Any, txns: list[Transaction], bound_s: float, win: list[Window],
           drained: bool = True) -> dict[str, Any]:
    """Intervals with no commit longer than ``bound_s`` while the workload ran: from its start to
    the first commit, between commits, and (when the drain timed out: work was left) from the last
    commit to the final reads. An idle pipeline after its last input is not a stall."""
    start, end = _phase_times(history)
    commits = sorted(t.ended for t in txns if t.committed)
    if start is None:
        start = min((t.began for t in txns), default=None)
    if start is None:
        return {"bound_s": bound_s, "count": 0, "total_s": 0.0, "longest_s": 0.0, "stalls": []}
    points = [start, *[c for c in commits if c >= start]]
    if not drained and end is not None:
        points.append(end)
    found = []
    for a, b in zip(points, points[1:]):
        if b - a > bound_s:
            found.append((a, b))
    described = sorted(found, key=lambda ab: ab[0] - ab[1])[:MAX_STALLS]
    return {"bound_s": bound_s, "count": len(found), "total_s": round(sum(b - a for a, b in found), 1),
            "longest_s": round(max((b - a for a, b in found), default=0.0), 1),
            "stalls": [{"from_s": round(a - start, 1), "to_s": round(b - start, 1), "length_s": round(b - a, 1),
                        "faults": [f"{w.index} {w.kind}:{w.target}" for w in win if w.start <= b and w.end >= a],
                        "workers": _doing(history, a, b)}
                       for a, b in sorted(described)]}


def effective(win: list[Window], effects: dict[int, dict[str, Any]] | None) -> list[Window]:
    """The windows of faults whose effect the cluster's record does not deny (verifier/fault_effects.py):
    a fault seen to take effect, or one no rule judges; one the record shows did nothing tested nothing."""
    return [w for w in win if ((effects or {}).get(w.index) or {}).get("seen") is not False]


def exposure(history: Any, stall_bound_s: float = 10.0, drained: bool = True,
             txns: list[Transaction] | None = None,
             effects: dict[int, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run's fault exposure (see the module's docstring), as results.json's ``facts.exposure``;
    ``txns``: the transactions to measure (default: the client history's; a pipeline without one is
    measured on the coordinator's log, logged_transactions); ``effects``: each fault's effect by
    index (verifier/fault_effects.py): a fault without its effect is listed, not counted."""
    evidence = "client history" if txns is None else "coordinator log"
    txns = transactions(history) if txns is None else txns
    executed, failed = windows(history)
    win = effective(executed, effects)
    ineffective = [w for w in executed if w not in win]
    started, _ = _phase_times(history)
    # a run without a steady phase counts from its first fault (one without its effect too)
    origin = started if started is not None else min((w.start for w in executed), default=0.0)
    client_ops = [op for op in history.ops if op["process"] not in ("harness", "seeder")]
    per_fault = [{"index": w.index, "kind": w.kind, "target": w.target, "role": w.role,
                  "from_s": round(w.start - origin, 1), "window_s": round(w.end - w.start, 1),
                  **_overlap(txns, w.start, w.end), "requests": _requests(client_ops, w.start, w.end),
                  **({"effect": effects[w.index]} if effects and w.index in effects else {})}
                 for w in sorted(executed, key=lambda w: w.start)]
    kinds: dict[str, dict[str, Any]] = {}
    for kind in sorted({w.kind for w in executed}):
        mine = [w for w in win if w.kind == kind]
        hit = [t for t in txns if any(t.overlaps(w.start, w.end) for w in mine)]
        counted = {w.index for w in mine}
        rows = [f for f in per_fault if f["kind"] == kind and f["index"] in counted]
        kinds[kind] = {"faults": len(mine), "window_s": round(sum(w.end - w.start for w in mine), 1),
                       "transactions": len(hit), "committed": sum(1 for t in hit if t.committed),
                       "in_flight_at_start": sum(f["in_flight_at_start"] for f in rows),
                       "committed_in_window": sum(f["committed_in_window"] for f in rows),
                       "commit_failed": sum(1 for t in hit if t.outcome in ("commit-failed", "offsets-fail")),
                       "requests": {r: sum(f["requests"][r] for f in rows) for r in REQUESTS.values()},
                       "without_effect": [w.index for w in ineffective if w.kind == kind]}
    committed = [t for t in txns if t.committed]
    overlapped = [t for t in committed if any(t.overlaps(w.start, w.end) for w in win)]
    return {"evidence": evidence, "transactions": len(txns), "committed": len(committed),
            "committed_overlapping_a_fault": len(overlapped),
            "share_overlapping": round(len(overlapped) / len(committed), 3) if committed else None,
            "kinds": kinds, "faults": per_fault, "not_injected": failed,
            "effects_judged": effects is not None,
            "stalls": stalls(history, txns, stall_bound_s, executed, drained)}


def overlapping_share(history: Any, kinds: Iterable[str], txns: list[Transaction] | None = None,
                      effects: dict[int, dict[str, Any]] | None = None) -> float | None:
    """The share of the run's committed transactions (``txns``, default the client history's) whose
    life overlapped a window of ``kinds`` (of a fault not shown to have done nothing)."""
    wanted = set(kinds)
    win = [w for w in effective(windows(history)[0], effects) if w.kind in wanted]
    committed = [t for t in (transactions(history) if txns is None else txns) if t.committed]
    if not committed:
        return None
    return sum(1 for t in committed if any(t.overlaps(w.start, w.end) for w in win)) / len(committed)


def shortfall(measured: dict[str, Any], required: Any, history: Any,
              txns: list[Transaction] | None = None, effects: dict[int, dict[str, Any]] | None = None) -> list[str]:
    """What the run's exposure lacks against the campaign's ``[faults.exposure]`` (``required``:
    faults.spec.ExposureSpec), each as a phrase naming the kind and the figure (and the faults the
    cluster's record shows did nothing); [] when none."""
    short = []
    for kind, n in sorted(required.committed.items()):
        got = (measured["kinds"].get(kind) or {}).get("committed", 0)
        if got < n:
            row = measured["kinds"].get(kind) or {}
            faults, idle = row.get("faults", 0), row.get("without_effect") or []
            short.append(f"{kind}: {got} committed transactions overlapped its {faults} windows, {n} required"
                         + (f" ({len(idle)} more {kind} without its effect in the cluster's record: fault "
                            f"{', '.join(map(str, idle))}; {_why(measured, idle[0])})" if idle else ""))
    if required.share is not None and required.committed:
        share = overlapping_share(history, required.committed, txns, effects)
        if share is None or share < required.share:
            short.append(f"{'no' if share is None else f'{share:.0%} of the'} committed transactions overlapped a "
                         f"{'/'.join(sorted(required.committed))} window, {required.share:.0%} required")
    return short


def floor_shortfall(measured: dict[str, Any], floor: float) -> list[str]:
    """Without a ``[faults.exposure]`` table: each executed kind whose windows overlapped fewer than
    ``floor`` committed transactions per fault of the kind (or whose every fault did nothing, by
    the cluster's record), as a phrase with the figure; [] when none."""
    short = []
    for kind, row in sorted(measured["kinds"].items()):
        faults, idle = row.get("faults", 0), row.get("without_effect") or []
        need = math.ceil(floor * faults)
        if faults and row["committed"] < need:
            short.append(f"{kind}: {row['committed']} committed transactions under its {faults} windows, {need} required")
        elif not faults and idle:
            short.append(f"{kind}: its {len(idle)} faults without their effect in the cluster's record "
                         f"({_why(measured, idle[0])})")
    return short


def _why(measured: dict[str, Any], index: int) -> str:
    row = next((f for f in measured["faults"] if f["index"] == index), {})
    return (row.get("effect") or {}).get("evidence", "no effect recorded")


def summary_line(measured: dict[str, Any] | None) -> str:
    """One line for the nightly, JUnit and the index: per kind the committed transactions its
    windows overlapped, the share of the run's committed transactions under a fault, the stalls."""
    if not measured:
        return "exposure: not measured"
    kinds = ", ".join(f"{k} {v['committed']} in {v['faults']}" for k, v in sorted(measured["kinds"].items()))
    share = measured.get("share_overlapping")
    stalled = measured.get("stalls") or {}
    idle = sum(len(v.get("without_effect") or []) for v in measured["kinds"].values())
    return (f"exposure: committed transactions under each kind's faults: {kinds or 'no fault executed'}; "
            f"{'-' if share is None else f'{share:.0%}'} of {measured['committed']} committed overlapped a fault"
            + (f"; {idle} faults without their effect in the cluster's record, not counted" if idle else "")
            + (f"; {stalled['count']} stalls over {stalled['bound_s']:g}s (longest {stalled['longest_s']:g}s)"
               if stalled.get("count") else ""))
