"""Whether each executed fault took effect, from the cluster's own record, not the harness's.

The harness records a fault as done when its call returned; that says nothing of the cluster. A
fault counts toward exposure (verifier/exposure.py) only where the brokers' logs show what it
must have caused, or where no rule for its kind exists yet (``seen`` None, with the reason):

- a kind that restarts a broker (``RESTARTS_BROKER`` in faults/kinds: kill, terminate, restart,
  kill-isolated; a controller-only node is not judged): each target broker registers a new
  incarnation with the controller (a ``RegisterBrokerRecord`` whose ``incarnationId`` the
  metadata log had not held before) after the fault began and before the next node fault on it,
  at most ``RESTART_GRACE_S`` after its heal. A process that was not killed keeps its incarnation.
- a kind that cuts a broker off (``CUTS_BROKER_OFF``: partition): a cut broker fenced by the controller (its session lapsed:
  ``BrokerRegistrationChangeRecord ... fenced=1``), or a leader on the other side that shrank a
  partition's ISR to leave a cut broker out (``ISR updated to``), inside the window (``CUT_GRACE_S`` after the heal).
  A cut that no broker noticed tested nothing; one shorter than the notice bound (the broker
  session, ``broker.session.timeout.ms``, or the replica lag bound, whichever is shorter, plus
  ``NOTICE_SLACK_S`` for a controller's election) is expected to show neither: None.
- a kind that stops a broker (``STOPS_BROKER``: pause): a fence of the paused broker is seen; a shorter pause leaves no record (None).
- a message fault (a kind with a ``message_rule``): the message proxy's own record of the requests its rule (``kchaos-fault-<index>``)
  held, dropped, duplicated or answered with an error (``cluster/messages/events.jsonl``); a rule
  that matched no request did nothing.
- every other kind: None ("no rule for this kind yet").

Log lines are stamped on the node's clock, local time. The rules apply on the local backend
without clock control (one machine clock for the history and the logs); elsewhere every fault is
None with the reason. Both engines read these effects from this one function.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kchaos.clusters.node_config import SMALL_MACHINE_DEFAULTS
from kchaos.faults.kinds import CUTS_BROKER_OFF, KINDS, RESTARTS_BROKER, STOPS_BROKER, kinds_with
from kchaos.verifier.broker_logs import ClusterRecord
from kchaos.verifier.late_requests import events_path, read_message_events

#: a restarted broker registers within this many seconds of its heal (JVM start on a loaded machine)
RESTART_GRACE_S = 120.0
#: a cut's fence or ISR shrink logged this long after its heal still belongs to it
CUT_GRACE_S = 5.0
#: a cut is denied only when it lasted this much longer than the cluster's notice bound (an
#: isolated active controller's successor is elected first, then times the session out)
NOTICE_SLACK_S = 10.0


def notice_bound_s(broker_overrides: dict[str, Any] | None) -> float:
    """How long a cut must last before the cluster is expected to notice it: the shorter of the
    broker session (a fence) and the replica lag bound (an ISR shrink), as the nodes ran."""
    props = {**SMALL_MACHINE_DEFAULTS, **{k: str(v) for k, v in (broker_overrides or {}).items()}}
    return min(float(props.get("broker.session.timeout.ms", 9000)), float(props.get("replica.lag.time.max.ms", 30000))) / 1000

def _nodes(op: dict[str, Any]) -> list[int]:
    resolved = (op.get("value") or {}).get("resolved") or {}
    return [int(n) for n in resolved.get("nodes") or []]


def judge(kind: str, nodes: list[int], start: float, end: float, record: ClusterRecord,
          until: float | None = None, requests: int | None = None, notice_s: float = 12.0) -> dict[str, Any]:
    """One fault's effect: ``seen`` True (with the evidence), False (the record shows none) or
    None (no rule applies). ``until``: where a restart stops belonging to this fault (the next
    node fault on one of its nodes); ``requests``: a message fault's requests in the proxy's record;
    ``notice_s``: notice_bound_s of the run's cluster."""
    declared = KINDS.get(kind)
    if declared is not None and declared.message_rule is not None:
        if requests is None:
            return {"seen": None, "evidence": "the run directory holds no message proxy record"}
        if requests:
            return {"seen": True, "evidence": f"the message proxy acted on {requests} requests"}
        return {"seen": False, "evidence": "the message proxy's record holds no request its rule acted on"}
    if not nodes:
        return {"seen": None, "evidence": "the fault's record names no node"}
    if kind in kinds_with(RESTARTS_BROKER):
        bound = min(end + RESTART_GRACE_S, until if until is not None else float("inf"))
        missing, found = [], []
        if not record.brokers:
            return {"seen": None, "evidence": "the nodes' logs hold no controller record of a broker's registration"}
        brokers = [n for n in nodes if n in record.brokers]  # a controller-only node registers no incarnation
        if not brokers:
            return {"seen": None, "evidence": f"node {', '.join(map(str, nodes))} registers no broker incarnation: "
                                              "a controller's restart is not judged yet"}
        for n in brokers:
            t = next((t for t, b in record.incarnations if b == n and start < t <= bound), None)
            if t is None:
                missing.append(n)
            else:
                found.append(f"broker {n} registered a new incarnation {t - end:+.1f}s from the heal")
        if missing:
            return {"seen": False, "evidence": f"no new incarnation of broker {', '.join(map(str, missing))} "
                                               f"in the controller's record within {RESTART_GRACE_S:g}s of the heal"}
        return {"seen": True, "evidence": "; ".join(found)}
    cuts, stops = kind in kinds_with(CUTS_BROKER_OFF), kind in kinds_with(STOPS_BROKER)
    if cuts or stops:
        cut = set(nodes)
        fence = next(((t, b) for t, b in record.fences if b in cut and start <= t <= end + CUT_GRACE_S), None)
        if fence is not None:
            return {"seen": True, "evidence": f"broker {fence[1]} fenced {fence[0] - start:.1f}s into the window"}
        if cuts:
            # a leader that shrank an ISR to leave out a broker cut from it (not itself: a ring's ends)
            shrink = next(((t, p, isr) for t, p, leader, isr in record.isr_updates
                           if start <= t <= end + CUT_GRACE_S and any(n != leader and n not in isr for n in cut)), None)
            if shrink is not None:
                return {"seen": True, "evidence": f"{shrink[1]}'s ISR shrank to {','.join(map(str, sorted(shrink[2])))} "
                                                  f"{shrink[0] - start:.1f}s into the window"}
            if end - start < notice_s + NOTICE_SLACK_S:
                return {"seen": None, "evidence": f"a {end - start:.0f}s cut, shorter than the cluster's notice bound "
                                                  f"({notice_s:g}s, and {NOTICE_SLACK_S:g}s for a controller's "
                                                  "election) by which a fence or an ISR shrink would show: not judged"}
            return {"seen": False, "evidence": f"no fence of broker {', '.join(map(str, sorted(cut)))} and no ISR "
                                               "left without it in the window: no broker noticed the cut"}
        return {"seen": None, "evidence": "a pause shorter than the broker session leaves no record"}
    return {"seen": None, "evidence": "no rule for this kind yet"}


def effects(faults: list[dict[str, Any]], record: ClusterRecord | None, why_not: str | None = None,
            end_of_history: float | None = None, message_events: list[dict[str, Any]] | None = None,
            notice_s: float = 12.0) -> dict[int, dict[str, Any]]:
    """Per executed fault (``faults``: the history's paired ``fault:*`` operations), by index,
    its effect (:func:`judge`); every one None with ``why_not`` when the record cannot be judged
    (message faults are judged from ``message_events``, the proxy's record, on any backend)."""
    acted: dict[str, int] = {}
    for event in message_events or []:
        acted[str(event.get("rule"))] = acted.get(str(event.get("rule")), 0) + 1
    done = [op for op in faults if op.get("outcome") == "ok" or op.get("complete_time") is None]
    out: dict[int, dict[str, Any]] = {}
    for i, op in enumerate(done):
        index = int((op.get("value") or {}).get("index", i))
        kind = op["f"].removeprefix("fault:")
        if kind in KINDS and KINDS[kind].message_rule is not None:
            out[index] = judge(kind, [], 0.0, 0.0, ClusterRecord([]),
                               requests=None if message_events is None else acted.get(f"kchaos-fault-{index}", 0))
            continue
        if record is None or why_not:
            out[index] = {"seen": None, "evidence": why_not or "the run directory holds no broker logs"}
            continue
        nodes = _nodes(op)
        end = op["complete_time"] if op.get("complete_time") is not None else (end_of_history or op["invoke_time"])
        later = [o["invoke_time"] for o in done if o["invoke_time"] > op["invoke_time"]
                 and o["f"].removeprefix("fault:") in kinds_with(RESTARTS_BROKER) and set(_nodes(o)) & set(nodes)]
        out[index] = judge(kind, nodes, op["invoke_time"], end, record, min(later) if later else None,
                           notice_s=notice_s)
    return out


def run_effects(run: Path, faults: list[dict[str, Any]], cluster: Any,
                end_of_history: float | None = None) -> dict[int, dict[str, Any]]:
    """The effects of a run's faults from its directory (see the module's docstring); ``cluster``:
    the recorded campaign's [cluster] (its backend, clock control and broker settings)."""
    backend, clock_control = cluster.backend, bool(cluster.clock_control)
    if not faults:
        return {}
    events = read_message_events(Path(run)) if events_path(Path(run)).exists() else None
    why_not = None
    if backend != "local":
        why_not = f"the {backend} backend's broker logs are not judged (their clock and place differ)"
    elif clock_control:
        why_not = "the nodes' clocks were under control: their log stamps are not the history's clock"
    return effects(faults, None if why_not else ClusterRecord.of_run(run), why_not, end_of_history, events,
                   notice_bound_s(getattr(cluster, "broker", None)))
