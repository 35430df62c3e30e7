"""Isolation cycles in a Kafka transactional history, with the version order read from the log.

A history here is transactions that send to and poll the same topic-partitions (Jepsen's ``:txn?``
shape), each with its process, its outcome as the client saw it and its realtime bounds, plus the
final raw log: every record of every key as the brokers' segments hold it at read_uncommitted, with
whether its transaction committed. From them this builds Elle's dependency graph over the committed
transactions and searches it for cycles, then judges each kind of cycle against what Kafka promises.

**The version order is exact.** Jepsen infers each key's order from the offsets its sends were
acknowledged at and its polls returned, and has to make them dense because markers leave gaps; here
the brokers' log is the order: a key's versions are its committed records in offset order. A send
whose value the log does not hold committed is no version (an aborted send, or a lost write that the
lost-write check names). Values are unique per key in the workload, which is what lets a read name
its writer; a value sent twice, committed twice or sent by nobody breaks that, and the edges through
it are not drawn (``not_checked`` says which).

**The nodes are the committed transactions** (Elle's rule: an aborted transaction's effects are
not part of the committed state, and a transaction whose commit was never answered is judged by its
effects). A transaction whose outcome is ``unknown`` is committed when the log holds one of its
sends committed (its COMMIT marker was written), and is not a node otherwise. Its completion is when
the client gave up, not when it committed, so it has no outgoing process or realtime edge: it may
have committed after a later transaction began.

**The edges** (one per source, target and kind; the evidence kept is the first in a fixed order):

- ``ww``: T1 wrote the committed version just before T2's on one key;
- ``wr``: T2 polled a committed value T1 sent;
- ``rw``: T1's highest read of a key was a version, and T2 wrote the next one. Computed, counted and
  searched, but Jepsen's Kafka checker does not draw it, and it is weaker evidence here than in a
  database: a poll is a window of records (bounded by the consumer's position, ``max.poll.records``
  and fetch sizes), not a read of the key's state, so a poll that ended at a version does not show
  that the next version was invisible to it, which is exactly what a rw edge claims. The cycles
  that need it (G-single, G2) are reported, never judged;
- ``process``: one process's transaction completed before its next one began;
- ``realtime``: T1 completed before T2 began. Drawn by a sweep over invokes and completions that
  links each transaction only from the *frontier* (the completed transactions no later-completed
  one follows), so the edges stay near n times the concurrency instead of n squared, and every
  realtime order is still a path of them.

**The cycle search**: per family, Tarjan's strongly connected components of the subgraph of its
kinds, then per component a shortest witness: an edge of the kind every cycle of the family holds
and a breadth-first path back, so a simple cycle. The families are Elle's: ``G0`` (ww only),
``G1c`` (ww and wr, at least one wr; its witness holds a ww edge where the first ones tried do),
``G-single`` (exactly one rw), ``G2`` (rw cycles in a component with no G-single: more than one rw),
and, flagged apart because read_committed forbids it, ``wr-only`` (Elle calls it G1c). A component
with no cycle of a family that has one once process edges are added is ``<family>-process``, once
realtime edges are added too ``<family>-realtime``: an order of time was needed to close it. Each
component is named once per family, with the fewest time edges, and the name is read from the
witness; the counts are those components, exact, and the cases kept are capped.

**The direct checks.** ``G1a``: a poll read a send of a transaction that aborted (the client's abort
returned, or the outcome is unknown and the log holds none of its sends committed) and that the log
does not hold committed. ``G1b``: a poll read a send of a committed transaction from a record the final
log holds uncommitted: a value that was never part of its writer's committed state (a copy from an
attempt the producer's epoch bump aborted, say; the offset read tells the copies apart). Elle's literal G1b, a read of a value that is not its writer's
last write to the key, is not drawn: a Kafka poll returns records, not a state, and one that stops
inside a transaction's sends is an ordinary batch boundary. Both look at every poll, whatever its own
transaction's outcome: what read_committed returns does not depend on the reader committing later.

**What Kafka promises** (:func:`classify`, facts from Jepsen's Kafka checker and Kafka's documents):
writes are not isolated, so G0 in every variant is allowed, and so is G1c that needs a ww edge
(T1 sends to p before T2 does, T2 commits a send that T1 then polls: a legal execution). At
read_committed every wr edge puts its writer's commit before its reader's poll, which comes before
the reader's commit, and a process or realtime edge puts one commit before the next transaction
begins; a cycle of those would put a commit before itself, so wr-only cycles in every variant, G1a
and G1b are anomalies. At read_uncommitted all three are what the level allows. Kafka promises no
serializability: G-single and G2 are ``not-judged``.

What the history does not let this judge (a key the final log does not hold, a read of a value it
does not hold, an ambiguous writer, ...) is listed in ``not_checked`` with the reason and counted,
never dropped; a result with no anomaly and anything there that could hide one is ``unknown``, not
``valid``.
"""

from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Hashable, Iterable, Mapping, Sequence

#: a topic-partition: the key of Elle's model
Key = tuple[str, int]

OUTCOMES = ("committed", "aborted", "unknown")
#: the dependency kinds, in the order a witness search prefers them when two edges tie
EDGE_KINDS = ("ww", "wr", "rw", "process", "realtime")
ISOLATIONS = ("read_committed", "read_uncommitted")
#: how each judgement is reported (buckets of :func:`check`'s result)
INVALID, ALLOWED, NOT_JUDGED = "invalid", "allowed", "not-judged"
#: cases kept per anomaly name; the counts are exact
MAX_CASES = 20
#: examples kept per not_checked reason; the counts are exact
MAX_EXAMPLES = 10
#: states a witness search may visit in one component for one class before it stops and says so:
#: the search is exact, but a huge component with a constrained class (exactly one rw) could take
#: quadratic time, and an answer that says what it did not decide is better than a hung verifier
SEARCH_BUDGET = 500_000

#: why something was not judged, by reason (:func:`check`'s ``not_checked``)
REASONS = {
    "key-absent-from-log": ("the final log holds nothing for this key (its partition was not read): its sends and polls "
                            "cannot be placed in a version order"),
    "value-absent-from-log": ("a poll read a value the final log does not hold at that key: the read cannot be tied to "
                              "a version (lost-write and inconsistent-offsets are other checks')"),
    "value-without-writer": ("the final log or a poll holds a value no send of the history wrote: without its writer no "
                             "edge into or out of it is drawn"),
    "ambiguous-writer": ("more than one transaction sent this value to this key: a read of it cannot name its writer "
                         "(the workload's values must be unique per key)"),
    "duplicate-in-log": ("the final log holds this value committed at more than one offset (a duplicate, another "
                         "check's anomaly): it has no single place in the version order, so no ww or rw edge is drawn "
                         "through it"),
    "outcome-contradicts-log": ("the client saw this transaction abort, yet the final log holds its sends committed: "
                                "which is true is another check's question, so it is no node and reads of its sends "
                                "are not judged"),
    "own-write-read": ("a transaction polled its own send (precommitted-read, the observers' check): a transaction does "
                       "not depend on itself, so no edge"),
    "offset-mismatch": ("a poll returned a value at an offset where the final log does not hold it (inconsistent-offsets, "
                        "issue 77 item 1): its edge is drawn by value, the offset was not judged here"),
    "search-budget": (f"the witness search for a class stopped after {SEARCH_BUDGET} states in one component: whether "
                      "that component holds a cycle of the class was not decided"),
}


@dataclass(frozen=True)
class Send:
    """A send of ``value`` to ``key`` (topic, partition) inside a transaction."""

    key: Key
    value: Hashable

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _key(self.key))


@dataclass(frozen=True)
class Poll:
    """What one poll returned of one key: (offset, value) pairs, in the order it returned them."""

    key: Key
    records: tuple[tuple[int, Hashable], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", _key(self.key))
        object.__setattr__(self, "records", tuple((int(o), v) for o, v in self.records))


@dataclass(frozen=True)
class Txn:
    """One client transaction: its micro-operations in the order it made them, its outcome as the
    client saw it (``unknown``: the commit or abort never answered) and its realtime bounds."""

    id: str
    process: str
    outcome: str
    invoke: float
    complete: float
    ops: tuple[Send | Poll, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        if self.outcome not in OUTCOMES:
            raise ValueError(f"transaction {self.id!r}: outcome {self.outcome!r} is not one of {', '.join(OUTCOMES)}")
        if self.complete < self.invoke:
            raise ValueError(f"transaction {self.id!r} completes ({self.complete}) before it is invoked ({self.invoke})")
        bad = [op for op in self.ops if not isinstance(op, (Send, Poll))]
        if bad:
            raise ValueError(f"transaction {self.id!r}: {bad[0]!r} is neither a Send nor a Poll")


@dataclass(frozen=True)
class LogRecord:
    """A data record of the final raw log: its offset, value, and whether its transaction committed."""

    offset: int
    value: Hashable
    committed: bool


@dataclass(frozen=True)
class Edge:
    """A dependency ``source -> target`` of one kind, with its evidence: the key and the values and
    offsets for ww, wr and rw; the times (and the process) for process and realtime."""

    source: str
    target: str
    kind: str
    key: Key | None = None
    facts: tuple[tuple[str, Any], ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"from": self.source, "to": self.target, "kind": self.kind,
                "key": list(self.key) if self.key is not None else None, **dict(self.facts)}

    def explain(self) -> str:
        f = dict(self.facts)
        where = f"{self.key[0]}/{self.key[1]}" if self.key is not None else ""
        if self.kind == "ww":
            return (f"{self.source} sent {f['value']!r} to {where} (offset {f['offset']}) just before {self.target} "
                    f"sent {f['next_value']!r} (offset {f['next_offset']})")
        if self.kind == "wr":
            return f"{self.target} polled {f['value']!r} from {where} (offset {f['offset']}), which {self.source} sent"
        if self.kind == "rw":
            return (f"{self.source} polled {where} up to {f['value']!r} (offset {f['offset']}), and the next committed "
                    f"version, {f['next_value']!r} (offset {f['next_offset']}), is {self.target}'s")
        if self.kind == "process":
            return (f"{self.source} completed ({f['completed']}) before {self.target} began ({f['invoked']}) in "
                    f"process {f['process']}")
        return f"{self.source} completed ({f['completed']}) before {self.target} began ({f['invoked']})"


@dataclass(frozen=True)
class Graph:
    """The dependency graph over the committed transactions: one :class:`Edge` per (source,
    target, kind)."""

    nodes: tuple[str, ...]
    edges: Mapping[tuple[str, str, str], Edge]

    def counts(self) -> dict[str, int]:
        out = {kind: 0 for kind in EDGE_KINDS}
        for _, _, kind in self.edges:
            out[kind] += 1
        return out

    def adjacency(self, kinds: Iterable[str]) -> dict[str, list[Edge]]:
        """Each node's outgoing edges of ``kinds``, in a fixed order (target, then kind)."""
        wanted = set(kinds)
        out: dict[str, list[Edge]] = {n: [] for n in self.nodes}
        for (a, _, kind), edge in self.edges.items():
            if kind in wanted:
                out[a].append(edge)
        for edges in out.values():
            edges.sort(key=lambda e: (e.target, EDGE_KINDS.index(e.kind)))
        return out


@dataclass(frozen=True)
class Analysis:
    """What :func:`analyse` reads from a history: the graph, the direct cases, the counts of what
    was looked at, and what could not be judged."""

    graph: Graph
    direct: Mapping[str, list[dict[str, Any]]]
    checked: Mapping[str, int]
    not_checked: list[dict[str, Any]]


class _Gaps:
    """Collects what was not judged, by reason (and, for the search, by class): exact counts, the
    first examples."""

    def __init__(self) -> None:
        self.count: dict[tuple[str, str], int] = defaultdict(int)
        self.examples: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)

    def add(self, reason: str, cls: str = "", **example: Any) -> None:
        self.count[(reason, cls)] += 1
        if len(self.examples[(reason, cls)]) < MAX_EXAMPLES:
            self.examples[(reason, cls)].append(example)

    def merge(self, entries: Iterable[dict[str, Any]]) -> None:
        for entry in entries:
            key = (entry["reason"], entry.get("class", ""))
            self.count[key] += entry["count"]
            room = MAX_EXAMPLES - len(self.examples[key])
            self.examples[key].extend(entry["examples"][:max(room, 0)])

    def as_list(self) -> list[dict[str, Any]]:
        return [not_checked_entry(reason, self.count[(reason, cls)], self.examples[(reason, cls)], cls)
                for reason, cls in sorted(self.count)]


def not_checked_entry(reason: str, count: int, examples: list[dict[str, Any]], cls: str = "") -> dict[str, Any]:
    """One ``not_checked`` entry: a reason (and, for the search, a class), its exact count, its
    explanation and its first examples (both engines report gaps in this shape)."""
    return {"reason": reason, **({"class": cls} if cls else {}), "count": count, "explanation": REASONS[reason],
            "examples": examples}


def _key(key: Any) -> Key:
    topic, partition = key
    return (str(topic), int(partition))


def _where(key: Key) -> list[Any]:
    return [key[0], key[1]]


# --- the evidence of each edge and direct case, built alike by both engines (verifier/spark/isolation.py) ---


def ww_edge(source: str, target: str, key: Key, value: Any, offset: int, next_value: Any, next_offset: int) -> Edge:
    """``source`` wrote the committed version (``value`` at ``offset``) just before ``target``'s."""
    return Edge(source, target, "ww", key, (("value", value), ("offset", offset), ("next_value", next_value),
                                            ("next_offset", next_offset)))


def wr_edge(source: str, target: str, key: Key, value: Any, offset: int) -> Edge:
    """``target`` polled the committed ``value`` (at ``offset``) that ``source`` sent."""
    return Edge(source, target, "wr", key, (("value", value), ("offset", offset)))


def rw_edge(source: str, target: str, key: Key, value: Any, offset: int, next_value: Any, next_offset: int) -> Edge:
    """``source``'s highest read of ``key`` was ``value`` (at ``offset``), and ``target`` wrote the next version."""
    return Edge(source, target, "rw", key, (("value", value), ("offset", offset), ("next_value", next_value),
                                            ("next_offset", next_offset)))


def process_edge(source: str, target: str, process: str, completed: float, invoked: float) -> Edge:
    return Edge(source, target, "process", None, (("process", process), ("completed", completed), ("invoked", invoked)))


def realtime_edge(source: str, target: str, completed: float, invoked: float) -> Edge:
    return Edge(source, target, "realtime", None, (("completed", completed), ("invoked", invoked)))


def graph_of(nodes: Iterable[str], edges: Iterable[Edge]) -> Graph:
    """The graph of ``nodes`` (sorted) and ``edges``, one per (source, target, kind), the first
    given kept, in a fixed order (source, target, kind)."""
    kept: dict[tuple[str, str, str], Edge] = {}
    for edge in edges:
        kept.setdefault((edge.source, edge.target, edge.kind), edge)
    return Graph(tuple(sorted(nodes)), dict(sorted(kept.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                                              EDGE_KINDS.index(kv[0][2])))))


def _read_evidence(reader: str, writer: str, key: Key, offset: int, value: Any, reader_outcome: str,
                   writer_outcome: str) -> dict[str, Any]:
    return {"reader": reader, "writer": writer, "key": _where(key), "offset": offset, "value": value,
            "reader_outcome": reader_outcome, "writer_outcome": writer_outcome}


def g1a_case(reader: str, writer: str, key: Key, offset: int, value: Any, reader_outcome: str, writer_outcome: str,
             abort_returned: bool, held: bool) -> dict[str, Any]:
    """A G1a case: ``reader`` polled a send of ``writer``, which aborted (``abort_returned``: the
    client's abort returned; else its outcome is unknown and the log holds none of its sends
    committed); ``held``: the final log holds the value (uncommitted), else not at all."""
    why = ("its abort returned" if abort_returned else
           "its outcome is unknown and the final log holds none of its sends committed")
    held_as = "uncommitted" if held else "not at all"
    return {**_read_evidence(reader, writer, key, offset, value, reader_outcome, writer_outcome), "log": held_as,
            "explanation": (f"{reader} polled {value!r} from {key[0]}/{key[1]} (offset {offset}), which {writer} "
                            f"sent; {writer} aborted ({why}), and the final log holds the value {held_as}")}


def g1b_case(reader: str, writer: str, key: Key, offset: int, value: Any, reader_outcome: str,
             writer_outcome: str) -> dict[str, Any]:
    """A G1b case: ``reader`` polled a send of the committed ``writer`` from a record the final log
    holds uncommitted."""
    return {**_read_evidence(reader, writer, key, offset, value, reader_outcome, writer_outcome), "log": "uncommitted",
            "explanation": (f"{reader} polled {value!r} from {key[0]}/{key[1]} (offset {offset}), which {writer} "
                            f"sent; {writer} committed, but the final log holds the record it read uncommitted: it "
                            f"was never part of {writer}'s committed state")}


def _order_edges(members: Sequence[Txn], definite: set[str]) -> list[tuple[str, str]]:
    """The frontier sweep: (a, b) for a completed strictly before b was invoked, drawn only from the
    completed transactions that no later-completed one follows, so that every such order is a path.
    Only ``definite`` transactions complete: the others may have taken effect at any later time."""
    events = sorted([(t.invoke, 0, t.id) for t in members]
                    + [(t.complete, 1, t.id) for t in members if t.id in definite])
    frontier: set[str] = set()
    before: dict[str, frozenset[str]] = {}
    out = []
    for _, completes, tid in events:  # at equal times an invoke comes first: the order is strict
        if completes:
            frontier -= before[tid]
            frontier.add(tid)
        else:
            before[tid] = frozenset(frontier)
            out.extend((p, tid) for p in sorted(frontier))
    return out


def analyse(txns: Iterable[Txn], log: Mapping[Any, Sequence[LogRecord | tuple[int, Hashable, bool]]]) -> Analysis:
    """The dependency graph of ``txns`` with the version order of ``log`` (per key, its raw records:
    :class:`LogRecord` or (offset, value, committed) triples), the direct G1a and G1b cases, what was
    looked at (``checked``) and what could not be judged (``not_checked``). Independent of the order
    of ``txns`` and of ``log``'s keys; a transaction id given twice is rejected."""
    by_id: dict[str, Txn] = {}
    for t in txns:
        if t.id in by_id:
            raise ValueError(f"transaction id {t.id!r} appears twice: ids name the nodes of the graph")
        by_id[t.id] = t
    ids = sorted(by_id)
    records = {_key(k): sorted((r if isinstance(r, LogRecord) else LogRecord(int(r[0]), r[1], bool(r[2])) for r in rs),
                               key=lambda r: r.offset)
               for k, rs in log.items()}
    order = {k: [r for r in rs if r.committed] for k, rs in records.items()}  # the version order
    position: dict[Key, dict[Any, list[int]]] = {k: defaultdict(list) for k in records}
    for k, versions in order.items():
        for i, r in enumerate(versions):
            position[k][r.value].append(i)
    offsets: dict[Key, dict[Any, set[int]]] = {k: defaultdict(set) for k in records}
    at: dict[Key, dict[int, LogRecord]] = {k: {} for k in records}
    for k, rs in records.items():
        for r in rs:
            offsets[k][r.value].add(r.offset)
            at[k].setdefault(r.offset, r)
    gaps = _Gaps()

    writers: dict[tuple[Key, Any], list[str]] = defaultdict(list)
    for tid in ids:
        for op in by_id[tid].ops:
            if isinstance(op, Send) and tid not in writers[(op.key, op.value)]:
                writers[(op.key, op.value)].append(tid)
    for (k, value), ws in writers.items():
        if len(ws) > 1:
            gaps.add("ambiguous-writer", key=_where(k), value=value, writers=ws)

    def writer(k: Key, value: Any) -> str | None:
        ws = writers.get((k, value), ())
        return ws[0] if len(ws) == 1 else None

    def committed_sends(t: Txn) -> bool:
        return any(isinstance(op, Send) and op.key in order and position[op.key].get(op.value)
                   and writer(op.key, op.value) == t.id for op in t.ops)

    # each transaction's fate: a node when it committed, by the client's word or by the log's
    fate: dict[str, str] = {}
    for tid in ids:
        t = by_id[tid]
        if t.outcome == "committed":
            fate[tid] = "committed"
        elif t.outcome == "aborted":
            fate[tid] = "contradiction" if committed_sends(t) else "aborted"
            if fate[tid] == "contradiction":
                gaps.add("outcome-contradicts-log", txn=tid)
        else:
            fate[tid] = "committed" if committed_sends(t) else "not-committed"
    nodes = tuple(tid for tid in ids if fate[tid] == "committed")
    node_set = set(nodes)
    edges: dict[tuple[str, str, str], Edge] = {}

    def link(edge: Edge) -> None:
        edges.setdefault((edge.source, edge.target, edge.kind), edge)

    def owner(k: Key, value: Any) -> str | None:
        w = writer(k, value)
        return w if w in node_set else None

    checked = {"transactions": len(ids), "committed": len(nodes),
               "committed_from_log": sum(1 for tid in nodes if by_id[tid].outcome == "unknown"),
               "keys": len(records), "versions": sum(len(v) for v in order.values()),
               "sends": 0, "sends_without_version": 0, "polls": 0, "polls_outside_graph": 0, "empty_polls": 0,
               "records_read": 0}
    for tid in ids:
        for op in by_id[tid].ops:
            if isinstance(op, Send):
                checked["sends"] += 1
                if op.key not in records:
                    gaps.add("key-absent-from-log", txn=tid, key=_where(op.key), op="send", value=op.value)
                elif tid in node_set and not position[op.key].get(op.value):
                    checked["sends_without_version"] += 1

    # ww: neighbours in each key's version order, unless one of them is not a single version
    duplicated: dict[Key, set[Any]] = {}
    for k in sorted(order):
        versions = order[k]
        duplicated[k] = {v for v, where in position[k].items() if len(where) > 1}
        for value in sorted(duplicated[k], key=lambda v: position[k][v][0]):
            gaps.add("duplicate-in-log", key=_where(k), value=value,
                     offsets=[versions[i].offset for i in position[k][value]])
        for r in versions:
            if (k, r.value) not in writers:
                gaps.add("value-without-writer", key=_where(k), offset=r.offset, value=r.value, seen="log")
        for a, b in zip(versions, versions[1:]):
            if a.value in duplicated[k] or b.value in duplicated[k]:
                continue
            wa, wb = owner(k, a.value), owner(k, b.value)
            if wa is not None and wb is not None and wa != wb:
                link(ww_edge(wa, wb, k, a.value, a.offset, b.value, b.offset))

    # polls: wr edges into committed readers, the direct checks on every poll
    direct: dict[str, list[dict[str, Any]]] = {"G1a": [], "G1b": []}
    highest: dict[tuple[str, Key], int] = {}
    for tid in ids:
        reader_is_node = tid in node_set
        for op in by_id[tid].ops:
            if not isinstance(op, Poll):
                continue
            checked["polls"] += 1
            checked["polls_outside_graph"] += 0 if reader_is_node else 1
            if op.key not in records:
                gaps.add("key-absent-from-log", txn=tid, key=_where(op.key), op="poll",
                         offsets=[o for o, _ in op.records])
                continue
            if not op.records:
                checked["empty_polls"] += 1
            k = op.key
            for offset, value in op.records:
                checked["records_read"] += 1
                ws = writers.get((k, value), ())
                held = offsets[k].get(value)
                if not ws:
                    if held:
                        gaps.add("value-without-writer", key=_where(k), offset=offset, value=value, seen="poll",
                                 txn=tid)
                    else:
                        gaps.add("value-absent-from-log", txn=tid, key=_where(k), offset=offset, value=value)
                    continue
                if len(ws) > 1:
                    continue  # ambiguous-writer, counted once per value above
                w = ws[0]
                if held and offset not in held:
                    gaps.add("offset-mismatch", txn=tid, key=_where(k), offset=offset, value=value,
                             log_offsets=sorted(held))
                if w == tid:
                    gaps.add("own-write-read", txn=tid, key=_where(k), offset=offset, value=value)
                    continue
                # the copy it read decides (a value sent again after an aborted attempt is in the log twice)
                copy = at[k].get(offset)
                copy = copy if copy is not None and copy.value == value else None
                committed_here = copy.committed if copy is not None else bool(position[k].get(value))
                if fate[w] == "contradiction":
                    continue  # outcome-contradicts-log, counted once per transaction above
                if fate[w] == "aborted" or (fate[w] == "not-committed" and held):
                    direct["G1a"].append(g1a_case(tid, w, k, offset, value, by_id[tid].outcome, by_id[w].outcome,
                                                  abort_returned=fate[w] == "aborted", held=bool(held)))
                    continue
                if not held:
                    gaps.add("value-absent-from-log", txn=tid, key=_where(k), offset=offset, value=value)
                    continue
                if not committed_here:
                    direct["G1b"].append(g1b_case(tid, w, k, offset, value, by_id[tid].outcome, by_id[w].outcome))
                    continue
                if not reader_is_node:
                    continue
                link(wr_edge(w, tid, k, value, offset if copy is not None else order[k][position[k][value][0]].offset))
                if value not in duplicated[k]:
                    place = position[k][value][0]
                    highest[(tid, k)] = max(highest.get((tid, k), place), place)

    # rw: from each committed reader's highest read of a key to the writer of the next version
    for (tid, k), place in sorted(highest.items()):
        versions = order[k]
        if place + 1 < len(versions) and versions[place + 1].value not in duplicated[k]:
            nxt = versions[place + 1]
            w = owner(k, nxt.value)
            if w is not None and w != tid:
                link(rw_edge(tid, w, k, versions[place].value, versions[place].offset, nxt.value, nxt.offset))

    # process and realtime: only a transaction the client saw commit has a known completion
    definite = {tid for tid in nodes if by_id[tid].outcome == "committed"}
    by_process: dict[str, list[Txn]] = defaultdict(list)
    for tid in nodes:
        by_process[by_id[tid].process].append(by_id[tid])
    for process in sorted(by_process):
        for a, b in _order_edges(by_process[process], definite):
            link(process_edge(a, b, process, by_id[a].complete, by_id[b].invoke))
    for a, b in _order_edges([by_id[tid] for tid in nodes], definite):
        link(realtime_edge(a, b, by_id[a].complete, by_id[b].invoke))

    return Analysis(graph_of(nodes, edges.values()), direct, checked, gaps.as_list())


def strongly_connected(adjacency: Mapping[str, Iterable[str]]) -> list[tuple[str, ...]]:
    """Tarjan's strongly connected components (iterative: a long chain of transactions would
    overflow Python's stack), each sorted, the list sorted by its first member."""
    succ = {n: sorted(set(targets)) for n, targets in adjacency.items()}
    for targets in list(succ.values()):
        for t in targets:
            succ.setdefault(t, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[tuple[str, ...]] = []
    for root in sorted(succ):
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(succ[root]))]
        while work:
            node, it = work[-1]
            descended = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(succ[nxt])))
                    descended = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if descended:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(tuple(sorted(component)))
    return sorted(out)


#: the cycle families, as Elle names them, and the suffixes that say an order of time closed one
FAMILIES = ("G0", "wr-only", "G1c", "G-single", "G2")
SUFFIXES = ("", "-process", "-realtime")
#: every name a cycle can have, and its family
FAMILY_OF = {f"{family}{suffix}": family for family in FAMILIES for suffix in SUFFIXES}
CLASSES = tuple(FAMILY_OF)


@dataclass(frozen=True)
class _Plan:
    """How one family is searched at one level of time edges: the components of the ``kinds``
    subgraph that no component named by a ``blocked`` family touches; in each, a cycle through an
    edge of ``start`` (the kind every cycle of the family holds; any edge when None) whose rest uses
    ``path``; a witness holding ``prefer`` is looked for first."""

    family: str
    suffix: str
    kinds: frozenset[str]
    start: str | None
    path: frozenset[str]
    blocked: tuple[str, ...]
    prefer: str | None = None


def _plans() -> tuple[_Plan, ...]:
    base = {"G0": ({"ww"}, None, {"ww"}, ("G0",), None),
            "wr-only": ({"wr"}, None, {"wr"}, ("wr-only",), None),
            "G1c": ({"ww", "wr"}, "wr", {"ww", "wr"}, ("G1c",), "ww"),
            "G-single": ({"ww", "wr", "rw"}, "rw", {"ww", "wr"}, ("G-single",), None),
            "G2": ({"ww", "wr", "rw"}, "rw", {"ww", "wr", "rw"}, ("G-single", "G2"), None)}
    time = {"": set(), "-process": {"process"}, "-realtime": {"process", "realtime"}}
    return tuple(_Plan(family, suffix, frozenset(kinds | time[suffix]), start, frozenset(path | time[suffix]),
                       blocked, prefer)
                 for suffix in SUFFIXES for family, (kinds, start, path, blocked, prefer) in base.items())


#: each level of time edges after the one before, so that a component a level names needed that level
_PLANS = _plans()


class _OverBudget(Exception):
    pass


def _name(cycle: Sequence[Edge]) -> tuple[str, str]:
    """A witness's name from what it is made of (and Elle's name for it)."""
    kinds = {e.kind for e in cycle}
    rw = sum(1 for e in cycle if e.kind == "rw")
    family = ("G-single" if rw == 1 else "G2" if rw else "G1c" if {"ww", "wr"} <= kinds else
              "wr-only" if "wr" in kinds else "G0")
    suffix = "-realtime" if "realtime" in kinds else "-process" if "process" in kinds else ""
    return family + suffix, ("G1c" if family == "wr-only" else family) + suffix


def _path(source: str, target: str, inside: Mapping[str, list[Edge]], kinds: frozenset[str],
          spent: list[int]) -> list[Edge] | None:
    """A shortest path ``source`` to ``target`` over edges of ``kinds`` (breadth-first, so simple)."""
    parent: dict[str, Edge | None] = {source: None}
    queue = deque([source])
    while queue:
        node = queue.popleft()
        for e in inside[node]:
            if e.kind not in kinds or e.target in parent:
                continue
            parent[e.target] = e
            spent[0] += 1
            if spent[0] > SEARCH_BUDGET:
                raise _OverBudget()
            if e.target == target:
                path, node = [], target
                while (edge := parent[node]) is not None:
                    path.append(edge)
                    node = edge.source
                return path[::-1]
            queue.append(e.target)
    return None


def _witness(component: set[str], adjacency: Mapping[str, list[Edge]], plan: _Plan) -> list[Edge] | None:
    """The shortest cycle of ``plan`` in ``component`` through the first start edge, in a fixed
    order, that closes one (or, with ``prefer``, the first such cycle that holds that kind, else the
    first found): a start edge a -> b and a shortest path b -> a, a simple cycle."""
    inside = {n: [e for e in adjacency[n] if e.target in component] for n in sorted(component)}
    starts = [e for n in sorted(component) for e in inside[n] if plan.start is None or e.kind == plan.start]
    spent = [0]
    first = None
    for start in starts:
        try:
            rest = _path(start.target, start.source, inside, plan.path, spent)
        except _OverBudget:
            if first is not None:
                return first
            raise
        if rest is None:
            continue
        cycle = [start, *rest]
        at = min(range(len(cycle)), key=lambda i: cycle[i].source)  # shown from its smallest id
        cycle = cycle[at:] + cycle[:at]
        if plan.prefer is None or any(e.kind == plan.prefer for e in cycle):
            return cycle
        first = first or cycle
    return first


def find_cycles(graph: Graph, kinds: Iterable[str] = EDGE_KINDS) -> tuple[dict[str, list[dict[str, Any]]],
                                                                             list[dict[str, Any]]]:
    """Every family's cycles over the edge ``kinds`` searched (a plan that needs a kind not searched
    is skipped): per name, one case per component that holds one, and what the search could not
    decide (``not_checked`` entries, per class).

    Each family is searched on the components of its kinds, then with process edges added, then
    with realtime edges too, each level leaving alone the components an earlier one named. So a
    family's cycles all hold its start kind (G1c a wr edge, G-single and G2 a rw edge), one start
    edge and a breadth-first path make a simple cycle, and a cycle a later level finds needs that
    level's edges (else the level before would have named its component): the search is exact where
    Elle's definitions are (G1c: at least one wr, its witness with a ww edge when the first ones
    tried hold one; G2: a rw cycle in a component that holds no G-single, so more than one rw), and
    the name is read from the witness itself. A G1c witness of wr edges only is the wr-only family's,
    reported there."""
    kinds = set(kinds)
    gaps = _Gaps()
    found: dict[str, list[dict[str, Any]]] = {}
    named: dict[str, set[str]] = defaultdict(set)  # per family, the transactions of the components it named
    for plan in _PLANS:
        if not plan.kinds <= kinds:
            continue
        adjacency = graph.adjacency(plan.kinds)
        for component in strongly_connected({n: [e.target for e in es] for n, es in adjacency.items()}):
            members = set(component)
            if len(component) < 2 or any(named[f] & members for f in plan.blocked):
                continue  # no self-edges are drawn
            try:
                cycle = _witness(members, adjacency, plan)
            except _OverBudget:
                gaps.add("search-budget", cls=plan.family + plan.suffix, component=len(component), first=component[0])
                continue
            if cycle is None:
                continue
            named[plan.family].update(members)
            name, elle = _name(cycle)
            if plan.family == "G1c" and name.startswith("wr-only"):
                continue
            ids = [e.source for e in cycle]
            found.setdefault(name, []).append({
                "explanation": f"{name}: a cycle of {len(ids)} transactions, {' -> '.join([*ids, ids[0]])}: "
                               + "; ".join(e.explain() for e in cycle),
                "elle": elle, "cycle": [*ids, ids[0]], "steps": [e.as_dict() for e in cycle],
                "component": len(component)})
    return dict(sorted(found.items())), gaps.as_list()


def classify(name: str, isolation: str = "read_committed") -> tuple[str, str]:
    """How Kafka's documented behaviour judges an anomaly ``name`` (one of :data:`CLASSES`, ``G1a``
    or ``G1b``) for consumers at ``isolation``: (``invalid``, ``allowed`` or ``not-judged``, why).
    The one place these judgements live, so that a second engine cannot judge a name differently."""
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    committed = isolation == "read_committed"
    if name in CLASSES:
        family = FAMILY_OF[name]
        if family == "G0":
            return ALLOWED, ("Kafka does not isolate writes: the sends of concurrent transactions interleave in each "
                             "partition, so their orders may disagree across partitions (Jepsen allows G0 in every "
                             "variant)")
        if family == "G1c":
            return ALLOWED, ("the cycle holds a ww edge, and Kafka does not isolate writes: T1 sends to a partition "
                             "before T2 does, T2 commits a send that T1 then polls, T1 commits, all legal (Jepsen "
                             "allows G1c when it draws ww edges)")
        if family == "wr-only":
            if committed:
                return INVALID, ("at read_committed a wr edge puts its writer's commit before its reader's poll, and so "
                                 "before the reader's commit; a process or realtime edge puts a commit before the next "
                                 "transaction begins: around this cycle a transaction committed before itself")
            return ALLOWED, "read_uncommitted returns sends before their transactions commit: reads may form a circle"
        return NOT_JUDGED, ("Kafka promises no serializability, and a rw edge from a poll is weak evidence (a poll is "
                            "a window of records, not a key's state): reported, not judged")
    if name == "G1a":
        if committed:
            return INVALID, "read_committed never returns the records of a transaction that aborted"
        return ALLOWED, "read_uncommitted returns the records of transactions that later abort"
    if name == "G1b":
        if committed:
            return INVALID, ("read_committed returns a transaction's records once they commit; a record the log holds "
                             "only uncommitted was never committed")
        return ALLOWED, "read_uncommitted returns records that never commit"
    raise ValueError(f"{name!r} is no anomaly this checker names")


def check(txns: Iterable[Txn], log: Mapping[Any, Sequence[LogRecord | tuple[int, Hashable, bool]]],
          isolation: str = "read_committed", kinds: Iterable[str] = EDGE_KINDS,
          max_cases: int = MAX_CASES) -> dict[str, Any]:
    """The isolation check of a history (the module's docstring), as data, Elle's way:
    :func:`judge` of :func:`analyse`'s graph, direct cases and gaps."""
    searched = _searched(isolation, kinds)
    return judge(analyse(txns, log), isolation, searched, max_cases)


def _searched(isolation: str, kinds: Iterable[str]) -> list[str]:
    if isolation not in ISOLATIONS:
        raise ValueError(f"isolation {isolation!r} is not one of {', '.join(ISOLATIONS)}")
    wanted = set(kinds)
    if wanted - set(EDGE_KINDS):
        raise ValueError(f"edge kinds {sorted(wanted - set(EDGE_KINDS))} are not among {', '.join(EDGE_KINDS)}")
    return [k for k in EDGE_KINDS if k in wanted]


def judge(analysis: Analysis, isolation: str = "read_committed", kinds: Iterable[str] = EDGE_KINDS,
          max_cases: int = MAX_CASES) -> dict[str, Any]:
    """The judgement of an :class:`Analysis`, whichever engine built it (:func:`analyse`, or the
    Spark engine's query, verifier/spark/isolation.py): ``valid``, the cases per name in
    ``anomalies`` (``anomaly_types``: their names), ``allowed`` or ``not_judged`` as :func:`classify`
    judges them at ``isolation`` (at most ``max_cases`` each; ``counts`` exact; ``judgements``: each
    name's verdict and why), the edges per kind (all computed; ``searched``: the kinds the cycle
    search used; Jepsen's default is without rw), what was looked at (``checked``) and what was not
    (``not_checked``, with reasons).

    ``valid`` is ``invalid`` when an anomaly Kafka forbids was found, else ``unknown`` when something
    not judged could hide one (any gap in the history's evidence; a search that stopped on a class
    judged invalid), else ``valid``: what was not observed is never valid."""
    searched = _searched(isolation, kinds)
    cycles, undecided = find_cycles(analysis.graph, searched)
    buckets: dict[str, dict[str, list[dict[str, Any]]]] = {INVALID: {}, ALLOWED: {}, NOT_JUDGED: {}}
    counts: dict[str, int] = {}
    judgements: dict[str, dict[str, str]] = {}
    for name, cases in [*analysis.direct.items(), *cycles.items()]:
        if not cases:
            continue
        verdict, why = classify(name, isolation)
        buckets[verdict][name] = cases[:max_cases]
        counts[name] = len(cases)
        judgements[name] = {"verdict": verdict, "why": why}
    gaps = _Gaps()
    gaps.merge(analysis.not_checked)
    gaps.merge(undecided)
    not_checked = gaps.as_list()
    hiding = [e for e in not_checked if e["reason"] != "search-budget" or classify(e["class"], isolation)[0] == INVALID]
    valid = "invalid" if buckets[INVALID] else "unknown" if hiding else "valid"
    return {"valid": valid, "isolation": isolation, "anomaly_types": sorted(buckets[INVALID]),
            "anomalies": buckets[INVALID], "allowed": buckets[ALLOWED], "not_judged": buckets[NOT_JUDGED],
            "counts": dict(sorted(counts.items())), "judgements": dict(sorted(judgements.items())),
            "edges": analysis.graph.counts(), "searched": searched, "checked": dict(analysis.checked),
            "not_checked": not_checked}
