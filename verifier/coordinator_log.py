"""What the transaction coordinator's own log says about each client transaction.

The client history says what every client asked for and was told; ``__transaction_state`` says
what the coordinator did. A client transaction is sound only if the two agree: it is carried by
exactly one *coordinator transaction* (Ongoing ... -> Prepare* -> Complete*) that holds its
outputs and its offset commit, and that transaction ends because that client asked it to.
KAFKA-17754 breaks this without the end state showing it (docs/findings.md F1): a late EndTxn
ends the transaction open at that moment, the client's offsets then open a second one, and the
two halves of one client transaction end separately. A crash between them loses or doubles
inputs, whatever the client decided.

Three steps, each one definition for both engines:

1. :func:`coordinator_transactions` segments one transactional id's records (log order) into
   coordinator transactions. The Python reference runs it on its decoded log; the Spark job runs
   it on the executors, per transactional id (``applyInPandas``), and collects the summaries
   (one row per coordinator transaction, as many as the client transactions the driver already
   holds).
2. :func:`client_transactions` reads each client transaction's window from the history: from
   its first ``send`` (just after ``begin_transaction``, before any request that could open a
   coordinator transaction) to the completion of its end (commit or abort).
3. :func:`judge` attributes each coordinator transaction to the client transaction of the same
   transactional id and producer epoch whose window it started in, and names the cases.

Attribution uses the coordinator's ``txnStartTimestamp`` and the history's clock. On a cluster
kchaos starts they are the same machine's wall clock (CLOCK_EPS_MS covers the millisecond
rounding of the log). On one it did not start, the run measured the brokers' clocks against its
own (clusters/clock_probe.py, ``clock.json``): the coordinator's times are shifted onto the
harness's clock (:func:`on_harness_clock`) and every comparison widened by the measured tolerance
(``eps``); without a measurement the check is not made (verifier/evidence.py ``broker_clock``).
"""

from __future__ import annotations

import bisect
import json
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable

from kchaos.faults.kinds import FENCES_TRANSACTIONAL_ID, MOVES_BROKER_CLOCK, kinds_with
from kchaos.verifier.checks import explain

#: the history (float seconds) and the coordinator (whole milliseconds) read one clock
CLOCK_EPS_MS = 2
#: a coordinator-initiated abort is due once a transaction is older than its timeout; the
#: coordinator checks every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``
TIMEOUT_SLACK_MS = 50
#: how long a request of a process that stopped mid-call (killed during ``init_transactions``) may
#: still reach the coordinator after its last recorded moment: Kafka's default
#: ``request.timeout.ms``. Before this bound, such an init excused every later abort of its id.
STOPPED_REQUEST_GRACE_MS = 30_000
#: records of a coordinator transaction kept as evidence
EVIDENCE_RECORDS = 12
OPEN = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")

#: the columns of a coordinator transaction, in order (the Spark job's applyInPandas schema)
COORDINATOR_TXN_SCHEMA = ("transactional_id STRING, producer_id BIGINT, epoch INT, start_ms BIGINT, timeout_ms INT, "
                          "client_tv INT, partitions STRING, prepared STRING, prepare_ms BIGINT, prepare_epoch INT, "
                          "completed STRING, complete_ms BIGINT, fenced BOOLEAN, log_partition INT, first_offset BIGINT, "
                          "records STRING, reprepared STRING, reprepare_ms BIGINT, reprepare_epoch INT")


@dataclass
class CoordinatorTxn:
    """One transaction as the coordinator recorded it: from the record that opened it (an
    Ongoing after Empty or Complete*, or a Prepare* with no Ongoing before it) to its Complete*."""

    transactional_id: str
    producer_id: int
    epoch: int                       # the producer epoch of its first record
    start_ms: int                    # txnStartTimestamp: when its first partition was added
    timeout_ms: int
    client_tv: int                   # the client transaction version the coordinator recorded
    partitions: list[str] = field(default_factory=list)   # "topic-p", sorted
    prepared: str | None = None      # "commit" | "abort": its Prepare* record
    prepare_ms: int | None = None
    prepare_epoch: int | None = None
    completed: str | None = None     # "commit" | "abort": its Complete* record
    complete_ms: int | None = None
    fenced: bool = False             # a PrepareEpochFence record: the coordinator fenced the producer
    log_partition: int = -1
    first_offset: int = -1
    #: its records as evidence: [offset, status, epoch, last_update_ms], at most EVIDENCE_RECORDS
    records: list[list[Any]] = field(default_factory=list)
    #: a Prepare* of the other kind after ``prepared`` (a PrepareAbort after a PrepareCommit whose
    #: append the coordinator abandoned), when it was written and at which epoch
    reprepared: str | None = None
    reprepare_ms: int | None = None
    reprepare_epoch: int | None = None

    def row(self) -> tuple[Any, ...]:
        """As a row of COORDINATOR_TXN_SCHEMA (lists as JSON)."""
        return (self.transactional_id, self.producer_id, self.epoch, self.start_ms, self.timeout_ms, self.client_tv,
                json.dumps(self.partitions), self.prepared, self.prepare_ms, self.prepare_epoch, self.completed,
                self.complete_ms, self.fenced, self.log_partition, self.first_offset, json.dumps(self.records),
                self.reprepared, self.reprepare_ms, self.reprepare_epoch)

    @classmethod
    def from_row(cls, row: Any) -> "CoordinatorTxn":
        d = row.asDict() if hasattr(row, "asDict") else dict(row)
        d["partitions"] = json.loads(d["partitions"])
        d["records"] = json.loads(d["records"])
        return cls(**d)

    def outcome(self) -> str:
        return self.completed or (f"prepared-{self.prepared}" if self.prepared else "open")

    def decision(self) -> str:
        """What the coordinator decided: its Complete*, else its last Prepare* (a Prepare* is the
        point of no return), else ``open``."""
        return self.completed or self.reprepared or self.prepared or "open"

    def evidence(self) -> dict[str, Any]:
        out = asdict(self)
        out["log"] = f"__transaction_state-{self.log_partition}"
        out["outcome"] = self.outcome()
        return out


def _names(partitions: dict[str, list[int]] | None) -> set[str]:
    return {f"{topic}-{p}" for topic, ps in (partitions or {}).items() for p in ps}


def coordinator_records(txn_log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Python reference's decoded log (``{partition, offset, entry}``) as the records
    :func:`coordinator_transactions` reads."""
    return [{"partition": r["partition"], "offset": r["offset"], "transactional_id": e.transactional_id,
             "producer_id": e.producer_id, "producer_epoch": e.producer_epoch, "status": e.status,
             "partitions": e.partitions, "last_update_ms": e.last_update_ms, "start_ms": e.start_ms,
             "timeout_ms": e.timeout_ms, "client_transaction_version": e.client_transaction_version}
            for r in txn_log for e in (r["entry"],)]


def _begun_again(current: CoordinatorTxn, r: dict[str, Any]) -> bool:
    """An Ongoing with a new start that continues ``current``: the coordinator gave up on the
    append of ``current``'s Ongoing (it timed out waiting for replicas: "transition failed due to
    COORDINATOR_NOT_AVAILABLE, resetting pending state"), so its memory went back to Empty while
    the record stayed in the log and was committed later; the client's retries began the
    transaction again and added its partitions again (Kafka 4.0.0, a follower killed:
    hunt-epoch-rollover seed 2, docs/findings.md F5). Same producer id and epoch, nothing prepared
    or fenced in between: one transaction, whose partitions are the union. Were a partition of the
    forgotten record never added again, it would get no marker and stay pinned: the
    hanging-transaction check's case, not this one's."""
    return (current.prepared is None and not current.fenced and r["producer_id"] == current.producer_id
            and r["producer_epoch"] == current.epoch)


def coordinator_transactions(records: Iterable[dict[str, Any]]) -> list[CoordinatorTxn]:
    """Segment decoded ``__transaction_state`` records into coordinator transactions. Records:
    dicts with ``partition, offset, transactional_id, producer_id (None: tombstone),
    producer_epoch, status, partitions, last_update_ms, start_ms, timeout_ms,
    client_transaction_version``, of any transactional ids, in any order (sorted here into log
    order per id). A state written again (a retried append, a coordinator reloading its log) is
    one step; a transaction with no partition (a TV2 abort of an empty transaction) is kept, with
    none."""
    by_id: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        by_id[r["transactional_id"]].append(r)
    out: list[CoordinatorTxn] = []
    for txid, recs in by_id.items():
        current: CoordinatorTxn | None = None
        for r in sorted(recs, key=lambda r: (r["partition"], r["offset"])):
            status = r["status"] if r["producer_id"] is not None else "Tombstone"
            if current is not None and current.completed is None and status in OPEN:
                same = (r["start_ms"] in (current.start_ms, -1) or status != "Ongoing"
                        or _begun_again(current, r))
                if not same:  # a new transaction began without the old one completing: close it here
                    current = None
            if status in OPEN and (current is None or current.completed is not None):
                start = r["start_ms"] if r["start_ms"] is not None and r["start_ms"] >= 0 else r["last_update_ms"]
                current = CoordinatorTxn(txid, r["producer_id"], r["producer_epoch"], start, r["timeout_ms"],
                                         r.get("client_transaction_version") or 0, log_partition=r["partition"],
                                         first_offset=r["offset"])
                out.append(current)
            if current is None or (current.completed is not None and status not in OPEN):
                continue  # Empty, Dead, a tombstone, or a Complete* written again
            if len(current.records) < EVIDENCE_RECORDS:
                current.records.append([r["offset"], status, r["producer_epoch"], r["last_update_ms"]])
            current.partitions = sorted(set(current.partitions) | _names(r.get("partitions")))
            current.client_tv = max(current.client_tv, r.get("client_transaction_version") or 0)
            if status == "PrepareEpochFence":
                current.fenced = True
            elif status in ("PrepareCommit", "PrepareAbort") and current.prepared is None:
                current.prepared = "commit" if status == "PrepareCommit" else "abort"
                current.prepare_ms, current.prepare_epoch = r["last_update_ms"], r["producer_epoch"]
            elif status in ("PrepareCommit", "PrepareAbort") and current.reprepared is None:
                kind = "commit" if status == "PrepareCommit" else "abort"
                if kind != current.prepared:
                    current.reprepared, current.reprepare_ms, current.reprepare_epoch = (
                        kind, r["last_update_ms"], r["producer_epoch"])
            elif status in ("CompleteCommit", "CompleteAbort"):
                current.completed = "commit" if status == "CompleteCommit" else "abort"
                current.complete_ms = r["last_update_ms"]
            elif status in ("Empty", "Dead", "Tombstone"):
                current = None  # the id was re-initialised or expired mid-transaction: it ends unfinished
    return out


@dataclass(frozen=True)
class ClientTxn:
    """One client transaction, from the history: its window on the shared clock (ms)."""

    process: str
    seq: int
    txid: str
    epoch: int | None                 # the producer epoch the client held when it began
    start_ms: float                   # its first send's invoke time
    end_f: str | None                 # "commit" | "abort" | None: how the client first asked to end it
    end_invoke_ms: float | None       # when it first asked (a commit, or an abort after a failed commit)
    end_complete_ms: float | None     # when its last end operation completed
    outcome: str                      # HistoryIndex.txn_outcome
    #: when the client gave the transaction up without asking to end it: an operation of it
    #: failed or ended unknown, or the process exited (a closing producer aborts what is open)
    gave_up_ms: float | None = None
    #: when it first asked to commit (None: it never did; nothing else commits a transaction)
    commit_invoke_ms: float | None = None
    #: until when a request of its process could still reach the coordinator (its last recorded
    #: moment and a request's timeout), and when its process was told it was fenced (its own
    #: requests are refused from then on)
    acted_until_ms: float | None = None
    fenced_ms: float | None = None


def client_transactions(history: Any) -> list[ClientTxn]:
    """The history's transactional client transactions (a ``send`` with a transactional id), and
    the seeder's (:func:`seeder_transactions`)."""
    out = seeder_transactions(history)
    for key, send in history.txn_ops.items():
        if not send.get("txid"):
            continue
        ends = history.txn_ends.get(key) or []
        first, last = (ends[0], ends[-1]) if ends else (None, None)
        failed = [t for t in (history.txn_failed.get(key),
                              next((t for t in history.process_exits.get(key[0], []) if t >= send["invoke_time"]), None))
                  if t is not None]
        # a transaction with no recorded end closes at its process's last recorded moment: nothing
        # of it happened later (left open, it would own every later coordinator transaction of its id)
        ended = (last["complete_time"] or last["invoke_time"]) if last else history.process_last.get(key[0])
        commit = history.commit_requested(key)
        last_moment = history.process_last.get(key[0])
        fenced = next((op["invoke_time"] for op in history.fenced_ops.get(key[0], [])
                       if op["invoke_time"] >= send["invoke_time"]), None)
        out.append(ClientTxn(key[0], key[1], send["txid"], send.get("epoch"), send["invoke_time"] * 1000,
                             first["f"] if first else None, first["invoke_time"] * 1000 if first else None,
                             ended * 1000 if ended is not None else None,
                             history.txn_outcome.get(key, "unknown"), min(failed) * 1000 if failed else None,
                             commit * 1000 if commit is not None else None,
                             last_moment * 1000 + STOPPED_REQUEST_GRACE_MS if last_moment is not None else None,
                             fenced * 1000 if fenced is not None else None))
    return out


def seeder_transactions(history: Any) -> list[ClientTxn]:
    """The seeder's transactions as client transactions, one per ``seed`` operation: its window is
    the operation's (invoke to completion), and since the seeder records no mark before its
    ``commit_transaction``, its invoke stands for both its request to end and to commit (a batch
    it aborts on purpose never asks to commit). So a commit prepared before it asked cannot be
    seen; what its client saw against what the coordinator recorded, and what the log lacks, can.
    An operation the history stops inside is left out: its coordinator transaction begins after
    its invoke, the history's last moment, so no window of it is known (the gap is the evidence
    rules' to name: the seeder's own count against its history)."""
    out = []
    for key, op in history.seeder_txns.items():
        if not op.get("txid") or op["complete_time"] is None:
            continue
        invoked, ended = op["invoke_time"] * 1000, op["complete_time"] * 1000
        asks_commit = not op["value"].get("abort")
        out.append(ClientTxn(
            key[0], key[1], op["txid"], op.get("epoch"), start_ms=invoked, end_f="commit" if asks_commit else "abort",
            end_invoke_ms=invoked, end_complete_ms=ended, outcome=history.seeder_outcome(key),
            gave_up_ms=ended if op["outcome"] != "ok" else None, commit_invoke_ms=invoked if asks_commit else None,
            acted_until_ms=history.process_last[key[0]] * 1000 + STOPPED_REQUEST_GRACE_MS))
    return out


def on_harness_clock(coordinator: list[CoordinatorTxn], shift_ms: float) -> list[CoordinatorTxn]:
    """The coordinator transactions with their times moved from the brokers' clock (``shift_ms``
    ahead of the harness's) onto the harness's."""
    if not shift_ms:
        return coordinator
    return [replace(ct, start_ms=ct.start_ms - shift_ms,
                    prepare_ms=None if ct.prepare_ms is None else ct.prepare_ms - shift_ms,
                    complete_ms=None if ct.complete_ms is None else ct.complete_ms - shift_ms) for ct in coordinator]


#: harness-clock windows (ms) and the ``__transaction_state`` partitions whose stamps they affect
#: (None: every partition)
Skew = list[tuple[float, float, "frozenset[int] | None"]]


def _hit(partitions: "frozenset[int] | None", partition: int | None) -> bool:
    return partitions is None or partition is None or partition in partitions


def in_skew(ms: float, partition: int | None, skewed: Skew | None) -> bool:
    """Whether a stamp ``ms`` (harness clock) of a ``__transaction_state`` partition's coordinator
    falls in one of the ``skewed`` windows of that partition: a clock fault may have moved it."""
    return any(lo <= ms <= hi and _hit(parts, partition) for lo, hi, parts in skewed or ())


def stamped_in_skew(ct: CoordinatorTxn, skewed: Skew | None) -> bool:
    """Whether ``ct``'s start was stamped by a clock a clock fault had moved: its partition's
    coordinator in one of the ``skewed`` windows."""
    return in_skew(ct.start_ms, ct.log_partition, skewed)


def outside_skew(coordinator: list[CoordinatorTxn], clients: list[ClientTxn],
                 skewed: Skew | None) -> tuple[list[CoordinatorTxn], list[ClientTxn], dict[str, int]]:
    """What can be placed in time while brokers' clocks were moved on purpose (clock faults):
    ``skewed`` are harness-clock windows (ms) in which the coordinators of some transaction-log
    partitions stamped with a moved clock. A coordinator transaction of such a partition stamped
    inside one, and a client transaction of such a partition's transactional id overlapping one,
    are set aside (counted, not judged): their attribution would rest on a clock that was wrong
    by design. A transactional id's partition is read from its coordinator transactions; an id
    with none is set aside with any window."""
    if not skewed:
        return coordinator, clients, {}
    partition_of = {ct.transactional_id: ct.log_partition for ct in coordinator if ct.log_partition >= 0}
    kept_ct = [ct for ct in coordinator if not stamped_in_skew(ct, skewed)]

    def overlaps(c: ClientTxn) -> bool:
        end = c.end_complete_ms if c.end_complete_ms is not None else float("inf")
        return any(c.start_ms <= hi and lo <= end and _hit(parts, partition_of.get(c.txid)) for lo, hi, parts in skewed)

    kept_c = [c for c in clients if not overlaps(c)]
    return kept_ct, kept_c, {"coordinator_transactions": len(coordinator) - len(kept_ct),
                             "client_transactions": len(clients) - len(kept_c)}


#: beyond a clock fault's own window: the library's re-read of the offset (kchaos/runtime/faketime.py,
#: measured up to 3 s) and a transaction timeout that the moved clock brought forward
CLOCK_SKEW_MARGIN_MS = 5_000
#: how far a moved clock may be from the offset its fault set: the fault proves the change on the
#: broker to within this (faults/kinds/clock.py ``APPLIED_WITHIN_MS``)
CLOCK_OFFSET_SLACK_MS = 1_000


@dataclass(frozen=True)
class ClockMove:
    """One clock fault of the history: while it lasted (harness clock, ms; ``end_ms`` infinite when
    never healed), the range of offsets it applied (ms; the clock read true before the broker took
    the first up), and the ``__transaction_state`` partitions its targets may have led meanwhile
    (None: not known, every partition)."""

    start_ms: float
    end_ms: float
    lo_ms: float
    hi_ms: float
    partitions: "frozenset[int] | None"


def _led(detail: dict[str, Any] | None) -> "frozenset[int] | None":
    led = (detail or {}).get("transaction_log_partitions")
    return frozenset(led) if isinstance(led, list) else None


def clock_moves(history: Any) -> list[ClockMove]:
    """The history's clock faults (kinds with MOVES_BROKER_CLOCK). Their partitions are those the
    targets led when the fault resolved them and when it healed (faults/kinds/clock.py records
    both); a fault that recorded only one of them (a run before the heal's record, a fault never
    healed) may have moved any partition's coordinator: None. A leadership that came and went
    between the two is not seen; :func:`match_by_epoch` still places what it stamped."""
    out = []
    for op in history.faults:
        if not (op["f"].startswith("fault:") and op["f"].removeprefix("fault:") in kinds_with(MOVES_BROKER_CLOCK)):
            continue
        value = op.get("value") or {}
        detail = (value.get("resolved") or {}).get("detail") or {}
        heal = value.get("heal") or {}
        first = detail.get("first_offset_s") or 0.0
        lo, hi = heal.get("offset_range_s") or [min(0.0, first), max(0.0, first)]
        at_resolve, at_heal = _led(detail), _led(heal)
        parts = at_resolve | at_heal if at_resolve is not None and at_heal is not None else None
        end = op["complete_time"] * 1000 if op.get("complete_time") else float("inf")
        out.append(ClockMove(op["invoke_time"] * 1000, end, lo * 1000, hi * 1000, parts))
    return out


def _moved_stamp(ct: CoordinatorTxn, c: ClientTxn, moves: list[ClockMove], eps: float) -> bool:
    """Whether a clock fault that lasted while client transaction ``c`` ran could have stamped
    ``ct``'s start: that stamp less an offset the fault applied (none, before the broker took it
    up; or one of its range, within CLOCK_OFFSET_SLACK_MS) falls in ``c``'s window."""
    end = c.end_complete_ms if c.end_complete_ms is not None else float("inf")
    slack = eps + CLOCK_OFFSET_SLACK_MS
    for m in moves:
        if c.start_ms > m.end_ms + CLOCK_SKEW_MARGIN_MS or end < m.start_ms - CLOCK_SKEW_MARGIN_MS:
            continue
        if (c.start_ms - slack <= ct.start_ms <= end + slack
                or c.start_ms + m.lo_ms - slack <= ct.start_ms <= end + m.hi_ms + slack):
            return True
    return False


def _on_time(ct: CoordinatorTxn, c: ClientTxn, moves: list[ClockMove], eps: float) -> bool:
    """Whether ``ct``'s stamps read the harness's clock: its start and Prepare* lie in ``c``'s
    window, and no clock fault that lasted then applied an offset (other than none) smaller than
    that window, which alone could have moved a stamp within it. Then the checks that compare
    times are made on it as on any transaction attributed by time."""
    end = c.end_complete_ms if c.end_complete_ms is not None else float("inf")
    stamps = [ms for ms in (ct.start_ms, ct.prepare_ms, ct.reprepare_ms) if ms is not None]
    if not all(c.start_ms - eps <= ms <= end + eps for ms in stamps):
        return False
    for m in moves:
        if c.start_ms <= m.end_ms + CLOCK_SKEW_MARGIN_MS and m.start_ms - CLOCK_SKEW_MARGIN_MS <= end:
            if min((abs(x) for x in (m.lo_ms, m.hi_ms) if x), default=float("inf")) <= end - c.start_ms + 2 * eps:
                return False
    return True


def match_by_epoch(coordinator: list[CoordinatorTxn], clients: list[ClientTxn], history: Any,
                   moves: list[ClockMove], candidates: set[int], unheld: set[tuple[str, int]],
                   eps: float = CLOCK_EPS_MS) -> tuple[dict[int, ClientTxn], list[ClientTxn]]:
    """What a moved clock kept time from placing, placed by producer epoch: (index in
    ``coordinator`` -> client transaction, and the client transactions no coordinator transaction
    has the epoch of). Under KIP-890's protocol (TV2) the coordinator bumps the producer epoch at
    every transaction's end, so one (transactional id, producer id, producer epoch) opens one
    transaction. The epoch speaks for a client transaction only when its client ran TV2 and
    recorded its producer id and epoch itself (``txn_v2`` true in its ``send``: the Java
    producer's transaction manager, franz-go's EndTxn answer) and no other client transaction
    recorded the same three. Then, while a clock fault lasted (``moves``; none: nothing here):

    - matched: a client transaction holding nothing by time (``unheld``) and the only coordinator
      transaction with its three, recorded at client transaction version 2 or more, that no
      client window holds (``candidates``), when the fault's offsets explain its stamp
      (:func:`_moved_stamp`);
    - absent: a client transaction holding nothing whose three no coordinator transaction has,
      on any partition, at any time (a moved clock moves stamps; it writes no record away).

    Anything else stays as it was: set aside, or unheld (judged)."""
    def client_key(c: ClientTxn) -> tuple[str, int, int] | None:
        send = history.txn_ops.get((c.process, c.seq)) or {}
        if send.get("txn_v2") is not True or send.get("pid") is None or c.epoch is None:
            return None
        return (c.txid, int(send["pid"]), int(c.epoch))

    if not moves:
        return {}, []
    by_client: dict[tuple[str, int, int], list[ClientTxn]] = defaultdict(list)
    for c in clients:
        key = client_key(c)
        if key is not None:
            by_client[key].append(c)
    by_ct: dict[tuple[str, int, int], list[int]] = defaultdict(list)
    for i, ct in enumerate(coordinator):
        if ct.producer_id is not None:
            by_ct[(ct.transactional_id, ct.producer_id, ct.epoch)].append(i)
    matched, absent = {}, []
    for key, cs in by_client.items():
        if len(cs) != 1 or (cs[0].process, cs[0].seq) not in unheld:
            continue
        c, found = cs[0], by_ct.get(key) or []
        if not found:
            absent.append(c)
        elif (len(found) == 1 and found[0] in candidates and coordinator[found[0]].client_tv >= 2
              and _moved_stamp(coordinator[found[0]], c, moves, eps)):
            matched[found[0]] = c
    return matched, absent


@dataclass
class Placed:
    """The coordinator and client transactions the checks judge, which client transaction each
    coordinator transaction belongs to (``owner``, by index in ``coordinator``), the ones placed
    by their epoch whose stamps may have been moved (``by_epoch``, not :func:`_on_time`: the
    checks that compare times skip them), and what stays set aside (``aside``,
    :func:`outside_skew`'s counts)."""

    coordinator: list[CoordinatorTxn]
    clients: list[ClientTxn]
    owner: dict[int, ClientTxn]
    by_epoch: set[int]
    aside: dict[str, int]
    #: how many coordinator transactions :func:`match_by_epoch` placed (moved stamps or not)
    epoch_matched: int = 0


def place(coordinator: list[CoordinatorTxn], history: Any, eps: float = CLOCK_EPS_MS,
          skewed: Skew | None = None) -> Placed:
    """Attribution under clock faults, one path for :func:`judge` and the coordinator's decisions:
    what the skew windows leave placeable is attributed by time (:func:`attribute`); then what
    neither time nor the windows placed (a client transaction holding nothing, set aside or not,
    and a coordinator transaction no client window holds, set aside or not) is matched by epoch
    where the protocol makes the epoch unique (:func:`match_by_epoch`) and judged, as is a set
    aside client transaction whose epoch no coordinator transaction has (it holds none, whatever
    the clocks). Only what neither places stays set aside."""
    clients = client_transactions(history)
    kept_ct, kept_c, aside = outside_skew(coordinator, clients, skewed)
    owner = attribute(kept_ct, kept_c, eps)  # by index in kept_ct, which leads the list judged
    owned = {id(kept_ct[i]) for i in owner}
    held = {(c.process, c.seq) for i, c in owner.items() if kept_ct[i].partitions}
    unheld = {(c.process, c.seq) for c in clients} - held
    candidates = {i for i, ct in enumerate(coordinator) if id(ct) not in owned}
    moves = clock_moves(history)
    epoch_owner, absent = match_by_epoch(coordinator, clients, history, moves, candidates, unheld, eps)
    kept_ids, kept_keys = {id(ct) for ct in kept_ct}, {(c.process, c.seq) for c in kept_c}
    restored_ct = [coordinator[i] for i in sorted(epoch_owner) if id(coordinator[i]) not in kept_ids]
    restored_c = [c for c in [*epoch_owner.values(), *absent] if (c.process, c.seq) not in kept_keys]
    final_ct = kept_ct + restored_ct
    position = {id(ct): i for i, ct in enumerate(final_ct)}
    by_epoch = set()
    for i, c in epoch_owner.items():
        owner[position[id(coordinator[i])]] = c
        if not _on_time(coordinator[i], c, moves, eps):
            by_epoch.add(position[id(coordinator[i])])
    if aside:
        aside = {"coordinator_transactions": aside["coordinator_transactions"] - len(restored_ct),
                 "client_transactions": aside["client_transactions"] - len(restored_c)}
    return Placed(final_ct, kept_c + restored_c, owner, by_epoch, aside, len(epoch_owner))


def attribute(coordinator: list[CoordinatorTxn], clients: list[ClientTxn],
              eps: float = CLOCK_EPS_MS) -> dict[int, ClientTxn]:
    """Index in ``coordinator`` -> the client transaction it belongs to: same transactional id,
    a producer epoch the client held (when both are known), and the latest client window that
    had started by the coordinator transaction's start and had not yet ended. A producer's
    transactions never overlap, so within one (id, epoch) the latest start is the only candidate;
    across epochs (a zombie and its successor on one id) the epoch decides. Unattributed: a
    coordinator transaction no client window holds (an app without history, a request that
    arrived after its client had moved on)."""
    by_id: dict[str, list[ClientTxn]] = defaultdict(list)
    for c in clients:
        by_id[c.txid].append(c)
    for txns in by_id.values():
        txns.sort(key=lambda c: c.start_ms)
    starts = {txid: [c.start_ms for c in txns] for txid, txns in by_id.items()}
    owner: dict[int, ClientTxn] = {}
    for i, ct in enumerate(coordinator):
        txns = by_id.get(ct.transactional_id)
        if not txns:
            continue
        at = bisect.bisect_right(starts[ct.transactional_id], ct.start_ms + eps)
        # the windows open at its start, latest first (a process's own never overlap; a zombie's
        # and its successor's do)
        open_then = [c for c in reversed(txns[:at])
                     if c.end_complete_ms is None or ct.start_ms <= c.end_complete_ms + eps]
        if not open_then:
            continue
        # the epoch the client recorded is a hint, not a key: librdkafka bumps its epoch itself
        # (KIP-360) and the worker learns it from its log a little later
        owner[i] = next((c for c in open_then if c.epoch is not None and c.epoch == ct.epoch), open_then[0])
    return owner


def _fence_bumped(ct: CoordinatorTxn) -> bool:
    """Whether ``ct``'s abort is at an epoch a fence could have written: a fence bumps the epoch
    before it aborts (``prepareFenceProducerEpoch``: a PrepareEpochFence, then the PrepareAbort at
    the bumped epoch), so an abort at the transaction's own epoch is a request at that epoch, never
    a fence by another producer."""
    return ct.fenced or (ct.prepare_epoch is not None and ct.prepare_epoch > ct.epoch)


#: an epoch from which the coordinator moves an id to a new producer id (KIP-890's rotation): a
#: zombie holding the previous producer id at such an epoch is still taken for its id's producer
EXHAUSTED_EPOCH = 32766


def _coordinator_initiated(ct: CoordinatorTxn, inits: dict[str, list[dict[str, Any]]],
                           owner: str | None = None, eps: float = CLOCK_EPS_MS) -> str | None:
    """Why the coordinator aborted ``ct`` on its own, or None: it fenced the producer (a
    PrepareEpochFence, or under the classic protocol an abort at a bumped epoch), the transaction
    outlived its timeout, or a producer initialised the id while it was open. ``inits`` also holds
    other instances' ``abort`` operations: a zombie that resumes inside an abort after an abortable
    error asks for a new epoch (librdkafka, KIP-360: InitProducerId with its old epoch), and the
    coordinator aborts whatever is open on the id before it fences that instance; ``owner``'s own
    aborts are not a fence of its own transaction.

    Another process's init or abort excuses the abort only as the coordinator could have acted on
    it: with the epoch bumped (:func:`_fence_bumped`; an abort at the transaction's own epoch
    cannot come from a fenced older producer), while that request could still arrive (one that
    never completed: until its process's last moment and a request's timeout), and, for a
    zombie's KIP-360 request, from the producer id the transaction runs under (the coordinator
    answers another one PRODUCER_FENCED without touching the transaction)."""
    if ct.prepared != "abort" or ct.prepare_ms is None:
        return None
    if ct.fenced:
        return "fenced"
    if ct.client_tv < 2 and ct.prepare_epoch is not None and ct.prepare_epoch > ct.epoch:
        return "fenced (epoch bumped)"
    if ct.prepare_ms - ct.start_ms >= ct.timeout_ms - TIMEOUT_SLACK_MS:
        return "timed out"
    if not _fence_bumped(ct):
        return None
    for op in inits.get(ct.transactional_id, []):
        if op.get("f") == "abort" and op["process"] == owner:
            continue
        if (op.get("f") == "abort" and op.get("pid") is not None and op["pid"] != ct.producer_id
                and (op.get("epoch") or 0) < EXHAUSTED_EPOCH):
            continue
        # the init was under way while the transaction was open: its InitProducerId may have been
        # sent before the transaction began and retried (CONCURRENT_TRANSACTIONS while the last
        # one completed) until it aborted this one. One that never completed (its process stopped
        # mid-call) acted at most until its process's last moment and a request's timeout.
        invoked = op["invoke_time"] * 1000
        until = op["complete_time"] * 1000 if op.get("complete_time") is not None else op["acted_until_ms"]
        if invoked <= ct.prepare_ms + eps and until >= ct.start_ms - eps:
            return f"fenced by {op['process']}'s {op.get('f', 'init')}"
    return None


def _ended_early(ct: CoordinatorTxn, c: ClientTxn, inits: dict[str, list[dict[str, Any]]],
                 eps: float = CLOCK_EPS_MS) -> str | None:
    """How ``ct`` was prepared before its client ``c`` let it go, by a request not its own, or
    None: ``early``, a commit before the client asked to end it or to commit it (nothing else
    commits: a commit prepared again after an abandoned abort counts too), or an abort before the
    client asked to end it, that the coordinator did not start itself, and that its client did not
    send after giving it up (while its process could still act, and before it was told it was
    fenced); ``never-asked``, a commit after the client asked only to abort."""
    if ct.prepare_ms is None:
        return None
    asked = c.end_invoke_ms if c.end_invoke_ms is not None else float("inf")
    commit_ms = ct.prepare_ms if ct.prepared == "commit" else ct.reprepare_ms if ct.reprepared == "commit" else None
    if commit_ms is not None:
        if commit_ms < min(asked, c.commit_invoke_ms if c.commit_invoke_ms is not None else float("inf")) - eps:
            return "early"
        if c.commit_invoke_ms is None:
            return "never-asked"
    if ct.prepared == "commit" or ct.prepare_ms >= asked - eps:
        return None  # an abort after its client asked to end it: its own request, or the answer to it
    # an abort after the client gave the transaction up (a closing producer aborts what is open) is
    # its own request only while its process could still send one, and not once it was told it was
    # fenced (the coordinator refuses its requests then); otherwise it is the coordinator's own
    own = (c.gave_up_ms is not None and ct.prepare_ms >= c.gave_up_ms - eps
           and (c.acted_until_ms is None or ct.prepare_ms <= c.acted_until_ms + eps)
           and (c.fenced_ms is None or ct.prepare_ms < c.fenced_ms - eps))
    if not own and _coordinator_initiated(ct, inits, c.process, eps) is None:
        return "early"
    return None


def _never_asked(ct: CoordinatorTxn, c: ClientTxn) -> str | None:
    """What :func:`_ended_early` says of ``ct`` without its times: ``never-asked``, a commit of a
    client transaction whose client never asked to commit (nothing else commits)."""
    commits = ct.prepared == "commit" or ct.reprepared == "commit"
    return "never-asked" if commits and c.commit_invoke_ms is None else None


def _partition_text(partitions: list[str]) -> str:
    return ", ".join(partitions) if partitions else "no partition"


def _wrote_something(history: Any, key: tuple[str, int]) -> bool:
    """Whether a client transaction sent an output or an offset (an empty one needs no
    coordinator record: Kafka Streams may commit a transaction it sent nothing in)."""
    send = history.txn_ops.get(key) or {}
    if (send.get("value") or {}).get("outputs", 1) > 0:
        return True
    return any((op["value"].get("offsets") or {}) for op in history.txn_ends.get(key, []))


def resolution(clients: list[ClientTxn], held: dict[tuple[str, int], list[CoordinatorTxn]]) -> dict[tuple[str, int], str]:
    """What the coordinator did with each client transaction whose outcome its client did not
    know or saw fail: ``coordinator commit``, ``coordinator abort``, ``coordinator open``,
    ``split`` (its coordinator transactions ended differently) or ``unresolved`` (none held it).
    A transaction left prepared is what its Prepare* decided (CoordinatorTxn.decision)."""
    out = {}
    for c in clients:
        if c.outcome in ("committed", "aborted"):
            continue
        outcomes = {ct.decision() for ct in held.get((c.process, c.seq), [])}
        out[(c.process, c.seq)] = ("unresolved" if not outcomes else "split" if len(outcomes) > 1
                                   else f"coordinator {outcomes.pop()}")
    return out


def _held(coordinator: list[CoordinatorTxn], owner: dict[int, ClientTxn]) -> dict[tuple[str, int], list[CoordinatorTxn]]:
    """Per client transaction, the coordinator transactions holding partitions attributed to it."""
    held: dict[tuple[str, int], list[CoordinatorTxn]] = defaultdict(list)
    for i, c in owner.items():
        if coordinator[i].partitions:
            held[(c.process, c.seq)].append(coordinator[i])
    return held


#: what the coordinator's decision says of a client transaction's outputs, by what its client saw
#: (aborted-read's kinds of case; ``aborted`` and ``commit-failed`` outputs are cases of their own)
ABORTED_BY_THE_COORDINATOR = {"unknown": "aborted-read.coordinator-abort", "committed": "aborted-read.client-committed"}


def coordinator_decisions(coordinator: list[CoordinatorTxn], history: Any, eps: float = CLOCK_EPS_MS,
                          skewed: Skew | None = None) -> dict[tuple[str, int], tuple[str, str]]:
    """Per client transaction its coordinator transactions decided alike: (what its client saw,
    the coordinator's decision: ``commit``, ``abort`` or ``open``). A client transaction none
    holds, or one split between decisions (split-transaction's case), is left out. ``coordinator``
    on the harness's clock, within ``eps`` ms (as for :func:`judge`)."""
    placed = place(coordinator, history, eps, skewed)
    clients, held = placed.clients, _held(placed.coordinator, placed.owner)
    out = {}
    for c in clients:
        if (c.process, c.seq) in history.seeder_txns:
            continue  # its writes are inputs: what these decisions say of outputs does not apply
        decided = {ct.decision() for ct in held.get((c.process, c.seq), [])}
        if len(decided) == 1:
            out[(c.process, c.seq)] = (c.outcome, decided.pop())
    return out


def coordinator_aborted(coordinator: list[CoordinatorTxn], history: Any,
                        eps: float = CLOCK_EPS_MS, skewed: Skew | None = None) -> dict[tuple[str, int], str]:
    """The client transactions the coordinator's log shows aborted whose outputs no other case
    names (their client never learned the end, or saw it commit), each with the kind of
    aborted-read its visible outputs are (ABORTED_BY_THE_COORDINATOR)."""
    return {key: ABORTED_BY_THE_COORDINATOR[seen]
            for key, (seen, decided) in coordinator_decisions(coordinator, history, eps, skewed).items()
            if decided == "abort" and seen in ABORTED_BY_THE_COORDINATOR}


def coordinator_committed(coordinator: list[CoordinatorTxn], history: Any,
                          eps: float = CLOCK_EPS_MS, skewed: Skew | None = None) -> set[tuple[str, int]]:
    """The client transactions the coordinator's log shows committed though their client did not
    see them commit (it never learned the end, saw the commit fail, or aborted): their outputs
    must all be visible (lost-write's coordinator kind; the client-committed ones are its own)."""
    return {key for key, (seen, decided) in coordinator_decisions(coordinator, history, eps, skewed).items()
            if decided == "commit" and seen in ("unknown", "commit-failed", "aborted")}


def superseded(c: ClientTxn, before: dict[str, float], eps: float = CLOCK_EPS_MS) -> bool:
    """Whether the log cleaner could have removed every record of client transaction ``c``: its
    id's partition was compacted and, below the cleaner's point, holds a record of the id written
    after ``c`` asked to end (``before``: :func:`driver_checks.superseded_before`). The cleaner
    removes a record only for a later one of the same key below its point, so a transaction
    that record does not follow (the id's last, or one past the point) is never excused."""
    asked = c.end_invoke_ms if c.end_invoke_ms is not None else c.start_ms
    return c.txid in before and asked <= before[c.txid] + eps


def judge(coordinator: list[CoordinatorTxn], history: Any, late: list[dict[str, Any]] | None = None,
          superseded_before: dict[str, float] | None = None,
          eps: float = CLOCK_EPS_MS, skewed: Skew | None = None,
          visible: Callable[[set[tuple[str, int]]], set[tuple[str, int]]] | None = None,
          ) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ``split-transaction`` cases and the facts of the coordinator's view.

    A client transaction is a case when (a) two or more coordinator transactions holding
    partitions started in its window (split), or (b) its coordinator transaction was prepared
    before the client asked to end it, and not by the coordinator itself (a fence, a timeout):
    another request ended it; or it was prepared to commit though its client never asked to.
    (b) is also found by the message proxy's record when there is one (``late``:
    verifier/late_requests.py rows): a request sent before this client transaction began that
    ended it. (c) The client saw it commit and the coordinator decided otherwise (it aborted it,
    also after preparing to commit, or never prepared it). (d) No coordinator transaction carried
    it, where the log must still hold it: a transaction the client saw commit, or one whose
    outputs are visible (``visible``: of these client transactions, those with a committed
    output) though its client never learned the end or saw it fail. ``superseded_before`` maps a
    transactional id whose log partition the cleaner compacted (or may have) to the time (ms)
    its last record below the cleaner's point was written (:func:`superseded`); the client
    transactions that record may have superseded are set aside and counted
    (``unrecorded_set_aside``), not judged. An id it does not name is judged whole.
    ``coordinator`` is on the harness's clock (:func:`on_harness_clock`), within ``eps`` ms;
    ``skewed``: windows in which clock faults moved the brokers' clocks (:func:`outside_skew`,
    counted in ``clock_skew_set_aside``).
    Facts: how many coordinator transactions were attributed, what the coordinator did with the
    transactions whose outcome the client did not know or saw fail, and ``matched_nothing`` when
    client transactions committed and none could be matched (the check then judged nothing)."""
    all_coordinator = len(coordinator)
    placed = place(coordinator, history, eps, skewed)
    coordinator, clients, owner, skew_aside = placed.coordinator, placed.clients, placed.owner, placed.aside
    moved = {id(coordinator[i]) for i in placed.by_epoch}
    inits: dict[str, list[dict[str, Any]]] = defaultdict(list)

    def acted_until(op: dict[str, Any]) -> float:
        last = max(history.process_last.get(op["process"], op["invoke_time"]), op["invoke_time"])
        return last * 1000 + STOPPED_REQUEST_GRACE_MS

    for op in history.ops:
        if op["f"] in ("init", "abort") and op.get("txid"):
            inits[op["txid"]].append({**op, "acted_until_ms": acted_until(op)})
    for op in history.faults:
        # a fault whose InitProducerIds fence the id it names as a worker's init would (epoch-jump)
        kind = op["f"].removeprefix("fault:")
        if op["f"].startswith("fault:") and kind in kinds_with(FENCES_TRANSACTIONAL_ID):
            txid = (((op.get("value") or {}).get("resolved") or {}).get("detail") or {}).get("transactional_id")
            if txid:
                inits[txid].append({**op, "f": "init", "process": f"the {kind} fault",
                                    "acted_until_ms": acted_until(op)})
    held = _held(coordinator, owner)
    by_key = {(c.process, c.seq): c for c in clients}
    by_prepare = {(ct.transactional_id, r[0]): ct for ct in coordinator for r in ct.records
                  if r[1] in ("PrepareCommit", "PrepareAbort")}
    ended_by: dict[tuple[str, int], dict[str, Any]] = {}
    for row in late or []:
        if not row.get("ended_a_transaction"):
            continue
        prepare = next((r for r in row.get("transaction_log") or [] if r["status"] in ("PrepareCommit", "PrepareAbort")),
                       None)
        ct = by_prepare.get((row.get("transactional_id"), prepare["offset"])) if prepare else None
        c = next((c for i, c in owner.items() if coordinator[i] is ct), None) if ct is not None else None
        if c is not None and row["sent_ms"] < c.start_ms - eps:
            ended_by[(c.process, c.seq)] = row

    cases = []
    for key, cts in sorted(held.items()):
        c = by_key[key]
        cts.sort(key=lambda ct: (ct.start_ms, ct.first_offset))
        # a transaction placed by its epoch has moved stamps: when it was prepared is not comparable
        early = [(ct, how) for ct in cts for how in ((_never_asked(ct, c) if id(ct) in moved
                                                      else _ended_early(ct, c, inits, eps)),) if how]
        late_row = ended_by.get(key)
        decided = {ct.decision() for ct in cts}
        if len(cts) >= 2:
            parts = "; ".join(f"{_partition_text(ct.partitions)} {ct.outcome()}" for ct in cts)
            text = explain("split-transaction.split", seq=c.seq, process=c.process, txid=c.txid, n=len(cts), parts=parts)
        elif early and early[0][1] == "never-asked":
            text = explain("split-transaction.never-asked", seq=c.seq, process=c.process, txid=c.txid)
        elif early:
            ct = early[0][0]
            asked = f"asked to {c.end_f}" if c.end_f else "ended it"
            text = explain("split-transaction.ended-early", seq=c.seq, process=c.process, txid=c.txid,
                           prepared=ct.prepared, asked=asked)
        elif c.outcome == "committed" and decided != {"commit"}:
            what = ("prepared to commit it, then aborted it" if any(ct.prepared == "commit" for ct in cts)
                    and "abort" in decided else "aborted it" if "abort" in decided else "never prepared it to commit")
            text = explain("split-transaction.outcome", seq=c.seq, process=c.process, txid=c.txid, what=what)
        elif late_row is not None:
            text = explain("split-transaction.ended-by-late-request", seq=c.seq, process=c.process, txid=c.txid,
                           api=late_row.get("api"), committed="commit" if late_row.get("committed") else "abort")
        else:
            continue
        cases.append({"explanation": text, "transactions": [history.txn_evidence(key)],
                      "client_transaction": _client_evidence(c),
                      "coordinator_transactions": [ct.evidence() for ct in cts],
                      **({"late_request": late_row} if late_row is not None else {})})

    # what the log does not hold: a commit the client saw, or visible outputs of an end it did not
    unheld = [c for c in clients if (c.process, c.seq) not in held]
    unrecorded = [c for c in unheld if c.outcome == "committed" and _wrote_something(history, (c.process, c.seq))]
    doubtful = [c for c in unheld if c.outcome in ("unknown", "commit-failed")]
    shown = visible({(c.process, c.seq) for c in doubtful}) if visible is not None and doubtful else set()
    unrecorded_visible = [c for c in doubtful if (c.process, c.seq) in shown]
    before = superseded_before or {}
    set_aside = [c for c in unrecorded + unrecorded_visible if superseded(c, before, eps)]
    aside = {id(c) for c in set_aside}
    if held:
        for c in unrecorded:
            if id(c) not in aside:
                cases.append({"explanation": explain("split-transaction.unrecorded", seq=c.seq, process=c.process,
                                                     txid=c.txid),
                              "transactions": [history.txn_evidence((c.process, c.seq))],
                              "client_transaction": _client_evidence(c), "coordinator_transactions": []})
    for c in unrecorded_visible if held else []:
        if id(c) not in aside:
            cases.append({"explanation": explain("split-transaction.unrecorded-visible", seq=c.seq, process=c.process,
                                                 txid=c.txid, seen="saw the commit fail" if c.outcome == "commit-failed"
                                                 else "never learned its end"),
                          "transactions": [history.txn_evidence((c.process, c.seq))],
                          "client_transaction": _client_evidence(c), "coordinator_transactions": []})

    resolved: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for (process, seq), what in resolution(clients, held).items():
        resolved[by_key[(process, seq)].outcome][what] += 1
    facts = {"coordinator_transactions": all_coordinator,
             "with_partitions": sum(1 for ct in coordinator if ct.partitions),
             "attributed": sum(1 for i in owner if coordinator[i].partitions),
             "client_transactions": len(clients),
             "client_transactions_without_coordinator_record": len(unheld),
             "committed_without_coordinator_record": len(unrecorded),
             "unresolved_with_visible_outputs": len(unrecorded_visible),
             "unrecorded_set_aside": dict(sorted(Counter(c.txid for c in set_aside).items())),
             "clock_skew_set_aside": skew_aside,
             "matched_by_epoch": placed.epoch_matched,
             "matched_by_epoch_stamps_moved": len(placed.by_epoch),
             "matched_nothing": bool(not held and any(c.outcome == "committed" for c in clients)),
             "outcomes_the_client_did_not_know": {k: dict(v) for k, v in sorted(resolved.items())}}
    return cases, facts


def _client_evidence(c: ClientTxn) -> dict[str, Any]:
    return {"process": c.process, "txn_seq": c.seq, "txid": c.txid, "epoch": c.epoch, "began_ms": round(c.start_ms),
            "ended": c.end_f, "end_invoked_ms": None if c.end_invoke_ms is None else round(c.end_invoke_ms),
            "outcome": c.outcome}
