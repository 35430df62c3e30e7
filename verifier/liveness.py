"""What the liveness checks read, and their cases: one definition for both engines.

A workload claims more than safety: after the final heal, within the drain's bound (the
campaign's ``workload.drain_timeout_s``, the recovery bound), the pipeline resumes and processes
every committed input; every partition or task is held by a member that processes it; every
broker is registered and unfenced and every partition of the run's topics has a leader; no
transaction stays open or prepared (``hanging-transaction``, model.hanging_cases). This module
reads what the run recorded for that at its final reads (``final.json``: ``group_offsets``,
``seeder``, ``drained``, ``progress``, ``group``, ``brokers_at_end``, ``heal``) and the members'
own account in the history (``assign``/``revoke``, ``streams-state``, ``worker-start``/``-exit``),
and returns each check's cases. The checks themselves are in verifier/driver_checks.py (both
engines run them on the driver, over the same files), their explanations in verifier/checks.py.

Record first, check later: a run recorded before a record existed has its check ``not_checked``
with the reason (``NotApplicable``), never a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kchaos.verifier.broker_logs import ClusterRecord
from kchaos.verifier.late_requests import read_message_events
from kchaos.verifier.model import NotApplicable, worker_slot
from kchaos.workloads.group_view import DESCRIBE_TIMEOUT_S

#: at most this many (time, committed offset) points of one partition's progress in a case
LAG_POINTS = 24
#: the heartbeat exchanges of one member kept in a case: every one that was not passed as sent,
#: and the last ones
LAST_HEARTBEATS = 4
_HEARTBEAT_APIS = ("StreamsGroupHeartbeat", "ConsumerGroupHeartbeat")


@dataclass(frozen=True)
class Stalled:
    """One input partition whose committed inputs the group had not processed at the final reads."""

    partition: int
    group_offset: int | None  #: the group's committed offset there (None: none committed)
    unprocessed: int | None  #: committed inputs at or past it (None: only the last one's offset is known)
    first: int  #: the first unprocessed input's offset
    last: int  #: the last committed input's offset


def stalled_partitions(data: Any) -> list[Stalled]:
    """The input partitions with committed inputs at or past the furthest offset the group ever
    committed (the final reads, or a sample of the run's progress: an offset moved back after the
    pipeline passed it is offsets-backwards, not a stall): from the seeder's acknowledged positions
    (each input counted), else from the seeder's last committed offset per partition
    (``final.json`` ``seeder``)."""
    final = data.final
    offsets = {int(p): int(o) for p, o in (final.get("group_offsets") or {}).items()}
    for _, sampled in (final.get("progress") or {}).get("samples") or []:
        for p, o in (sampled or {}).items():
            if o is not None and int(o) > offsets.get(int(p), -1):
                offsets[int(p)] = int(o)
    by_partition: dict[int, list[int]] = {}
    for (p, o) in data.acknowledged.committed:
        by_partition.setdefault(int(p), []).append(int(o))
    out = []
    if by_partition:
        for p, positions in sorted(by_partition.items()):
            left = sorted(o for o in positions if o >= offsets.get(p, 0))
            if left:
                out.append(Stalled(p, offsets.get(p), len(left), left[0], max(positions)))
        return out
    for p, last in sorted(((int(p), int(o)) for p, o in ((final.get("seeder") or {}).get("last_committed_offset")
                                                          or {}).items())):
        if offsets.get(p, 0) <= last:
            out.append(Stalled(p, offsets.get(p), None, offsets.get(p, 0), last))
    return out


def drain_of(data: Any) -> dict[str, Any]:
    """The drain's record (``final.json`` ``progress.drain``: started, ended, timeout_s, drained),
    completed from the history's phase marks for a run recorded before it kept one."""
    drain = dict(((data.final.get("progress") or {}).get("drain")) or {})
    drain["recorded"] = "ended" in drain
    if not drain["recorded"]:  # the phase marks: the final reads' begins after the workers' stop
        marks = {(op.get("value") or {}).get("phase"): op["invoke_time"] for op in data.history.ops
                 if op["f"] == "phase" and op["process"] == "harness"}
        if marks.get("drain") is not None:
            drain.setdefault("started", marks["drain"])
        # the drain ended where the pool's stop began: its first stopped (or terminated) worker
        # after the drain's mark; the final reads' mark comes only after every worker stopped
        stops = [op["invoke_time"] for op in data.history.ops if op["f"] == "worker-exit"
                 and (op.get("value") or {}).get("meaning") in ("stopped", "terminated")
                 and marks.get("drain") is not None and op["invoke_time"] >= marks["drain"]]
        ends = [t for t in (min(stops, default=None), marks.get("final-reads")) if t is not None]
        if ends:
            drain.setdefault("ended", min(ends) - 0.001)
    drain.setdefault("timeout_s", data.workload.drain_timeout_s)
    return drain


#: how far past its bound a drain that ended in time may end by its record: its start is stamped
#: before the group's view at the drain's start (workloads/group_view.py, a process of its own),
#: and the check that ends it reads the group's offsets (10 s at most, twice with a progress
#: sample) after its last moment inside the bound
DRAIN_END_SLACK_S = DESCRIBE_TIMEOUT_S + 2 * 10.0 + 1.0


def drain_overran(data: Any) -> list[str]:
    """What the drain's own record (``final.json`` ``progress.drain``) says of a drain that ran out
    of its bound: its outcome not drained, or its end later than its start and bound allow
    (DRAIN_END_SLACK_S); each as a phrase, [] where it says the drain ended in time or was not
    recorded (the phase marks that stand in for it time no bound)."""
    drain = drain_of(data)
    if not drain["recorded"]:
        return []
    out = ["the drain's record says it did not drain"] if drain.get("drained") is False else []
    if drain.get("started") is not None and drain.get("timeout_s") is not None:
        took = float(drain["ended"]) - float(drain["started"])
        if took > float(drain["timeout_s"]) + DRAIN_END_SLACK_S:
            out.append(f"the drain's record has it end {took:.0f} s after its start, past its bound of "
                       f"{float(drain['timeout_s']):.0f} s")
    return out


def samples_against_log(samples: list[list[Any]], offset_log: list[dict[str, Any]], settle_ms: float | None,
                        shift_ms: float = 0.0) -> list[str]:
    """Where the harness's samples of the group's committed offsets (``progress.samples``: time,
    {partition: offset}) contradict the group's own log (``offset_log``, the decoded committed view
    of ``__consumer_offsets``): a sampled offset above every commit of its partition the log holds
    (the cleaner never removes a key's last record), or a commit the log holds above what the last
    sample read of its partition, stamped ``settle_ms`` before that sample (the latest a commit is
    visible: its transaction ended, its markers written, the clocks' tolerance; None where the
    stamps cannot be placed; ``shift_ms``: the brokers' clock ahead of the harness's). Each as a
    phrase; [] where they agree."""
    if not samples:
        return []
    logged: dict[int, list[dict[str, Any]]] = {}
    for c in offset_log:
        logged.setdefault(int(c["partition"]), []).append(c)
    out = []
    sampled: dict[int, tuple[float, int]] = {}
    for t, offsets in samples:
        for p, o in (offsets or {}).items():
            if o is not None and int(o) > sampled.get(int(p), (0.0, -1))[1]:
                sampled[int(p)] = (t, int(o))
    for p, (t, o) in sorted(sampled.items()):
        top = max((c["offset"] for c in logged.get(p, [])), default=None)
        if top is None or o > top:
            out.append(f"partition {p} sampled at offset {o} (at {t:.3f}), where the log holds "
                       + ("no commit of it" if top is None else f"no commit past {top}"))
    last_t, last = samples[-1][0], {int(p): o for p, o in (samples[-1][1] or {}).items() if o is not None}
    for p, commits in sorted(logged.items()) if settle_ms is not None else ():
        seen = [c for c in commits if c.get("commit_timestamp") is not None
                and c["commit_timestamp"] - shift_ms + settle_ms <= last_t * 1000 and c["offset"] > last.get(p, -1)]
        if seen:
            c = max(seen, key=lambda c: c["offset"])
            out.append(f"the log holds a commit of partition {p} at offset {c['offset']}, stamped "
                       f"{(last_t * 1000 - c['commit_timestamp'] + shift_ms) / 1000:.0f} s before the last sample "
                       f"(at {last_t:.3f}), which read " + (f"offset {last[p]}" if p in last else "no offset"))
    return out


def partition_progress(data: Any, partition: int) -> list[list[Any]]:
    """(time, the group's committed offset) of one input partition over the run, from the samples
    the workload kept (``final.json`` ``progress.samples``), thinned to LAG_POINTS evenly; [] for
    a run that kept none."""
    samples = (data.final.get("progress") or {}).get("samples") or []
    points = [[t, offsets.get(str(partition))] for t, offsets in samples]
    if len(points) <= LAG_POINTS:
        return points
    step = (len(points) - 1) / (LAG_POINTS - 1)
    return [points[round(i * step)] for i in range(LAG_POINTS)]


def last_moved(data: Any, partition: int) -> float | None:
    """When the group's committed offset of ``partition`` last changed in the samples (its first
    sample when it never did); None without samples."""
    samples = (data.final.get("progress") or {}).get("samples") or []
    moved, before = None, object()
    for t, offsets in samples:
        now = offsets.get(str(partition))
        if now != before:
            moved, before = t, now
    return moved


def rates(data: Any) -> tuple[float | None, float | None]:
    """Inputs processed per second (the sum of the group's committed offsets, markers included,
    so slightly high) before the first fault, and from the drain's start to its end: the
    pre-fault rate a resumed pipeline returns towards. None where the samples do not say."""
    samples = (data.final.get("progress") or {}).get("samples") or []
    if len(samples) < 2:
        return None, None
    first_fault = min((op["invoke_time"] for op in data.history.faults), default=None)
    drain = drain_of(data)

    def rate(lo: float, hi: float) -> float | None:
        inside = [(t, sum(o.values())) for t, o in samples if lo <= t <= hi]
        if len(inside) < 2 or inside[-1][0] - inside[0][0] < 1.0:
            return None
        return round((inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0]), 1)

    before = rate(samples[0][0], first_fault) if first_fault is not None else None
    after = rate(drain["started"], drain.get("ended", samples[-1][0])) if drain.get("started") else None
    return before, after


# -- the members' own view (the history) --------------------------------------------------------

@dataclass
class Member:
    """One pipeline process as its own history tells it: what it holds, its Streams state."""

    process: str
    client: str | None
    started: float
    exited: float | None = None
    exit_meaning: str | None = None
    holds: set[int] = field(default_factory=set)
    held_since: float | None = None
    state: str | None = None
    state_since: float | None = None

    def view(self) -> dict[str, Any]:
        return {"process": self.process, "client": self.client, "holds": sorted(self.holds),
                "held_since": self.held_since, **({"state": self.state, "state_since": self.state_since}
                                                   if self.state else {})}


def members_at(data: Any, at: float) -> list[Member]:
    """The pipeline's processes alive at ``at`` (started, not exited), each with the input
    partitions it says it holds then (``assign`` and ``revoke`` events; a Kafka Streams
    instance's ``assign`` names all its tasks' partitions) and its last Streams state."""
    return [m for m in members_until(data, at) if m.exited is None]


def members_until(data: Any, at: float) -> list[Member]:
    """The pipeline's processes started by ``at``, as members_at tells them, with those that had
    exited by then (``exited``, ``exit_meaning``)."""
    members: dict[str, Member] = {}
    for op in data.history.ops:
        t = op["invoke_time"]
        if t is None or t > at:
            continue
        value = op.get("value") or {}
        if op["f"] == "worker-start":
            name = f"{value.get('slot')}.{value.get('incarnation')}"
            members[name] = Member(name, value.get("client"), t)
        elif op["f"] == "worker-exit":
            gone = members.get(f"{value.get('slot')}.{value.get('incarnation')}")
            if gone is not None:
                gone.exited, gone.exit_meaning = t, value.get("meaning")
        elif op["f"] in ("assign", "revoke", "streams-state") and op["process"] in members:
            m = members[op["process"]]
            if op["f"] == "streams-state":
                m.state, m.state_since = value.get("to"), t
            elif op["f"] == "revoke":
                # no list: an eager rebalance gives up every partition held (KafkaJS's REBALANCING)
                m.holds = m.holds - set(value["partitions"]) if value.get("partitions") is not None else set()
                m.held_since = t
            else:  # Streams names every task it runs; a consumer's callback names what it gains
                parts = set(value.get("partitions") or [])
                m.holds = parts if m.client == "streams" else m.holds | parts
                m.held_since = t
    return [m for _, m in sorted(members.items())]


#: the distinct errors of a member's failed operations kept in a case, its last ones
LAST_ERRORS = 3


def last_errors(data: Any, process: str, since: float | None) -> list[dict[str, Any]]:
    """What a member was told when its operations failed from ``since`` on (the drain): its last
    LAST_ERRORS distinct errors, each with its operation and when it was last seen. A member that
    holds its partitions but cannot end a transaction (F8: CONCURRENT_TRANSACTIONS) says why here."""
    seen: dict[str, dict[str, Any]] = {}
    for op in data.history.ops:
        if op["process"] != process or op.get("outcome") not in ("fail", "info") or not op.get("error"):
            continue
        if since is not None and (op["invoke_time"] or 0) < since:
            continue
        text = " ".join(str(op["error"]).split())[:300]
        seen.pop(text, None)  # re-inserted last: the order is when each was last seen
        seen[text] = {"f": op["f"], "error": text, "at": op["invoke_time"]}
    return list(seen.values())[-LAST_ERRORS:]


#: a client call a worker records as an invocation and its completion
CLIENT_CALLS = frozenset({"init", "poll", "send", "send_offsets", "commit", "abort", "commit_offsets"})


def blocked_in(data: Any, process: str) -> dict[str, Any] | None:
    """The client call a member invoked and never returned from: its last operation, when that is
    an invocation with no completion (kafka-python's commit_transaction waits without a bound,
    F16). None when its last operation ended."""
    ops = data.history.process_ops.get(process) or ()
    last = ops[-1] if ops else None
    if last is None or last["f"] not in CLIENT_CALLS or last["complete_time"] is not None:
        return None
    seq = (last.get("value") or {}).get("txn_seq")
    return {"f": last["f"], "since": last["invoke_time"], **({"txn_seq": seq} if seq is not None else {})}


def hung_calls(data: Any, started: float | None, end: float, bound: float) -> list[dict[str, Any]]:
    """The pipeline processes stuck in a client call: each one that had not exited when the drain
    began (``started``; without it, ``bound`` before ``end``), whose last operation is a client
    call it invoked and never returned from (blocked_in) while it lived for at least ``bound``
    seconds after: to its exit (the pool's stop, which kills a worker that does not stop when
    asked) or, still running, to the drain's ``end``. Its client, the call, how long it hung, how
    the process ended, and the partitions it says it held at the drain's end."""
    since = started if started is not None else end - bound
    held = {m.process: sorted(m.holds) for m in members_at(data, end)}
    out = []
    for m in members_until(data, float("inf")):
        if m.exited is not None and m.exited < since:
            continue
        blocked = blocked_in(data, m.process)
        until = m.exited if m.exited is not None else end
        if blocked and until - blocked["since"] >= bound:
            out.append({"process": m.process, "client": m.client, "blocked_in": blocked,
                        "hung_s": round(until - blocked["since"], 3), "holds": held.get(m.process, []),
                        **({"exit": {"at": m.exited, "meaning": m.exit_meaning}} if m.exited is not None else {})})
    return out


def slot_of_client(client_id: str | None) -> str | None:
    """The worker slot a member's client id names (``kchaos-w2-consumer``,
    ``kchaos-w2-StreamThread-1-consumer``): workloads/client_settings.py's naming."""
    found = re.match(r"kchaos-(w\d+)(?:-|$)", client_id or "")
    return found.group(1) if found else None


def group_view(data: Any, moment: str = "drain_end") -> dict[str, Any] | None:
    """The group coordinator's view recorded at ``moment`` (``final.json`` ``group.views``), or
    None when the run did not record one or could not read it."""
    view = ((data.final.get("group") or {}).get("views") or {}).get(moment)
    return view if view and "error" not in view else None


def heartbeats_of(data: Any, slot: str) -> list[dict[str, Any]]:
    """The heartbeat exchanges of one member the message proxy recorded (it records them where a
    message fault watches the group's heartbeats): each one not passed as sent, and the last."""
    events = [e for e in read_message_events(data.run) if e.get("api") in _HEARTBEAT_APIS
              and slot_of_client(e.get("client_id")) == slot]
    kept = [e for e in events if e.get("action") != "passed"] + events[-LAST_HEARTBEATS:]
    out = []
    for e in sorted({id(e): e for e in kept}.values(), key=lambda e: e["time"]):
        answer = e.get("answer") or {}
        out.append({"time": e["time"], "action": e.get("action"), "member_epoch": e.get("member_epoch"),
                    "owned": e.get("owned_active_tasks", e.get("owned_partitions")),
                    "answer_epoch": answer.get("member_epoch"), "answer_assignment": answer.get("assignment"),
                    "answer_error": answer.get("error_code", answer.get("error"))})
    return out


# -- brokers --------------------------------------------------------------------------------------

#: where a run recorded before brokers_at_end and heal.at_end names its missing brokers
HEAL_GAVE_UP = "the final heal, which timed out"


@dataclass(frozen=True)
class BrokerState:
    """The cluster's brokers at the run's end: the ones missing from its metadata, the run's
    partitions without a leader, and where that was read."""

    missing: tuple[int, ...]
    #: None: the leaders were not read (the heal's watch reads registration only)
    leaderless: tuple[str, ...] | None
    source: str
    at: float | None
    after_heal_s: float | None
    #: why the leaders were not read
    leaders_unread: str | None = None


def brokers_at_end(data: Any) -> BrokerState:
    """From ``final.json`` ``brokers_at_end`` (one metadata read at the end), else from the heal's
    watch of registration (``heal.at_end``, recorded since F9; a heal that timed out with brokers
    not registered says so in its error). NotApplicable when the run recorded neither. The
    watch and the heal evidence registration only: on them the leaders are not read
    (``leaderless`` None, and why), never taken as all led."""
    final = data.final
    record = final.get("brokers_at_end") or {}
    heal = final.get("heal") or {}
    watched = _named_brokers(heal.get("at_end")) if "at_end" in heal else None
    if record and "error" not in record:
        missing = sorted(set(record.get("expected") or []) - set(record.get("registered") or []) | set(watched or []))
        return BrokerState(tuple(missing), tuple(record.get("leaderless") or []), "the brokers' metadata at the "
                           "run's end", record.get("at"), record.get("after_heal_s"))
    unread = record.get("error") or "the run recorded no metadata read at its end"
    if watched is not None:
        return BrokerState(tuple(watched), None, "the heal's watch of registration", None, None, unread)
    gave_up = _named_brokers(heal.get("error")) if not heal.get("healthy", True) else []
    if gave_up:  # a run recorded before either: the brokers its final heal waited for in vain
        return BrokerState(tuple(gave_up), None, HEAL_GAVE_UP, None, None, unread)
    why = (f"the brokers' metadata could not be read at the run's end ({record['error']})" if record.get("error")
           else "the run recorded no broker registration at its end (final.json has neither brokers_at_end nor "
                "heal.at_end: recorded before kchaos kept them)")
    raise NotApplicable(why)


#: the end's metadata read answers within this long of its stamp (its timeout)
READ_ANSWERED_WITHIN_S = 10.0


def controller_disagrees(data: Any, state: BrokerState) -> str | None:
    """A second source for "every broker registered": the controller's own record in the nodes'
    logs (verifier/broker_logs.py) at the moment of the metadata read at the run's end. Why the two
    disagree (a broker the read had registered that a controller had fenced then), else None (also
    where the record cannot be read: other backends, clocks under control, no logs)."""
    cluster = data.campaign.cluster
    if state.at is None or cluster.backend != "local" or cluster.clock_control:
        return None
    record = ClusterRecord.of_run(data.run)
    expected = (data.final.get("brokers_at_end") or {}).get("expected") or []
    if record is None or not expected:
        return None
    # the read's stamp is taken before its answer: a fence it did not see must stand past that
    # answer too (a read's timeout later), else an unfence the read saw was only logged after it
    asked = [b for b in expected if b not in state.missing]
    later = record.fenced_at(float(state.at) + READ_ANSWERED_WITHIN_S, asked)
    fenced = {b: t for b, t in record.fenced_at(float(state.at), asked).items() if b in later}
    if not fenced:
        return None
    return ("the metadata read at the run's end had every broker registered, but the controller's own record had "
            + ", ".join(f"broker {b} fenced ({float(state.at) - t:.0f} s before the read)" for b, t in sorted(fenced.items()))
            + ": the two sources disagree")


def _named_brokers(text: str | None) -> list[int]:
    """The broker ids of ``brokers [2, 3] not registered`` (the heal's and the watch's wording)."""
    found = re.search(r"brokers \[([\d,\s]*)\] not registered", text or "")
    return sorted(int(b) for b in found.group(1).replace(" ", "").split(",") if b) if found else []
