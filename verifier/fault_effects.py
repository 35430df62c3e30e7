"""Whether each executed fault took effect, from the cluster's own record, not the harness's.

The harness records a fault as done when its call returned; that says nothing of the cluster. A
fault counts toward exposure (verifier/exposure.py) only where the brokers' logs (the message
proxy's record, the clients' timed calls) show what it must have caused, or where no rule for
its kind exists yet or its rule cannot tell (``seen`` None, with the reason):

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
- a kind that delays client links (``DELAYS_CLIENT_LINKS``: latency): the clients' own record,
  the history. The proxy keeps none of a delay: Toxiproxy logs that a toxic was created (what the
  harness's call already says), not how long an answer waited; the harness records the toxic it
  asked for (``resolved.detail.toxic``: ``latency`` and ``jitter``, ms) and reads nothing back. The
  workers record no round-trip figure either (no client statistics; the clock probe runs only for
  clock faults), so the rule times the calls that wait for a broker's answer (``ROUND_TRIP_CALLS``:
  commit, send_offsets, commit_offsets; not send, which hands records to the client's buffer, nor
  poll, one instant in the history, nor abort, which a client answers itself for a transaction
  that added nothing), those that succeeded, per kind of call:

  * in the window: calls begun and answered while the toxic certainly held (from the invoke plus
    the harness's own overhead, the window's length past its ``hold_s``, to the heal minus it), and
    overlapping no other fault's window nor the ``LATENCY_AFTERMATH_S`` after it;
  * the baseline: the same calls of the same clients begun and answered in the
    ``LATENCY_BASELINE_S`` before the window or after its heal (its own aftermath left out), outside
    every other fault's window and aftermath; with fewer than ``LATENCY_MIN_CALLS`` there (faults
    back to back), those of the whole run outside them.

  Toxiproxy holds every chunk of an answer ``latency`` give or take ``jitter`` (uniformly) from its
  arrival, so a call through the toxic takes its own work and at least ``latency - jitter`` more
  (a commit waits for its flush's answers, then its EndTxn's): a loaded machine makes a call
  slower, never faster.
  Seen (True) when a kind of call with at least ``LATENCY_MIN_CALLS`` in the window and in its
  baseline has its median in the window longer than the baseline's by ``LATENCY_SEEN_SHARE`` of the
  latency or more, and so has every such kind that waits for an answer through the links in every
  client (``CERTAIN_CALLS``: commit for all-clients and txn-coordinator). Denied (False) only when
  every kind with enough calls in the window is, there, at most ``LATENCY_DENY_SHARE`` of the
  latency slower than its baseline and, in median, shorter than ``latency - jitter`` past the
  baseline's fastest tenth (``LATENCY_FLOOR_SHARE``; without a baseline, than ``latency - jitter``
  alone): a toxic that acted would need the window's calls to have done their own work faster than
  nine in ten calls around them. Between the two, or with too few calls in the window (a latency
  over no work tested nothing: exposure already says so): None, with the figures. On the 29
  latencies of the runs of 2026-12-02 at hand (default seeds 2101-2110, 200±100 ms; five
  certify-tv-flip runs, 100±50 ms; all-clients) every one was seen (commit +102 to +297 ms; no
  call of those kinds in a window under ``latency - jitter``, the shortest 7 ms over it); their
  windows moved, 7 s apart, onto the stretches of those runs without a fault gave 39 False, 20
  None and no True. The clients whose calls cross the
  links: every client's for ``all-clients``; the calls of the transactional id the fault recorded
  for ``txn-coordinator`` (its EndTxn goes to that coordinator); every client's for
  ``group-coordinator`` (the offsets go there, in send_offsets or, from sarama and franz-go, in
  commit); for one broker's links (``random``, ``leader-*``) which calls crossed them cannot be
  told: seen as above, never denied. ``bandwidth`` and ``slicer`` delay too, by the bytes a call
  moves (a commit's answer is a few dozen bytes: under a millisecond at 64 KB/s, or one 64-byte
  slice): the calls the history times cannot show them, and they stay with the other kinds.
- every other kind: None ("no rule for this kind yet").

Log lines are stamped on the node's clock, local time. The rules that read the brokers' logs apply
on the local backend without clock control (one machine clock for the history and the logs);
elsewhere those faults are None with the reason. The message and latency rules read the proxy's
record and the clients' history, one machine's clock, on any backend. Both engines read these
effects from this one function.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from kchaos.clusters.node_config import SMALL_MACHINE_DEFAULTS
from kchaos.faults.kinds import CUTS_BROKER_OFF, DELAYS_CLIENT_LINKS, KINDS, RESTARTS_BROKER, STOPS_BROKER, kinds_with
from kchaos.verifier.broker_logs import ClusterRecord
from kchaos.verifier.late_requests import events_path, read_message_events

#: a restarted broker registers within this many seconds of its heal (JVM start on a loaded machine)
RESTART_GRACE_S = 120.0
#: a cut's fence or ISR shrink logged this long after its heal still belongs to it
CUT_GRACE_S = 5.0
#: a cut is denied only when it lasted this much longer than the cluster's notice bound (an
#: isolated active controller's successor is elected first, then times the session out)
NOTICE_SLACK_S = 10.0
#: the client calls that wait for at least one answer from a broker, by history operation (not
#: abort: a client aborts a transaction that added nothing without asking, in 0 ms)
ROUND_TRIP_CALLS = ("commit", "send_offsets", "commit_offsets")
#: a kind of call is judged with at least this many calls in the window (and in the baseline to be seen)
LATENCY_MIN_CALLS = 5
#: seen: a kind of call's median in the window longer than its baseline's by this share of the latency
LATENCY_SEEN_SHARE = 0.5
#: denied: no kind of call's median in the window longer than its baseline's by more than this share
LATENCY_DENY_SHARE = 0.1
#: denied: ... and shorter than ``latency - jitter`` past this quantile of its baseline (its fastest tenth)
LATENCY_FLOOR_SHARE = 0.1
#: the history's times are a float's seconds: a median is shorter than a bound by more than this
TIMING_SLACK_MS = 1.0
#: the baseline: the calls this long before the window, and this long after its heal (too few
#: there, between faults back to back: those of the whole run outside every fault)
LATENCY_BASELINE_S = 30.0
#: after another fault's heal the cluster is not itself yet (a restarted broker's clients reconnect,
#: leaders move back): its calls this long after it are in neither the window nor the baseline
LATENCY_AFTERMATH_S = 5.0
#: the processes whose calls are not a pipeline's client calls
NOT_CLIENTS = ("harness", "seeder")
#: per latency target, the kinds of call that wait for an answer through its links in every client:
#: a commit's EndTxn (and an offset commit) goes to a coordinator through some client link; to the
#: transactional id's coordinator for txn-coordinator; a group coordinator gets the offsets in
#: send_offsets from most clients, in commit from sarama and franz-go, so neither kind is certain
CERTAIN_CALLS: dict[str, tuple[str, ...]] = {"all-clients": ("commit", "commit_offsets"),
                                             "txn-coordinator": ("commit",), "group-coordinator": ()}


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


def _crossing_calls(target: str, detail: dict[str, Any], ops: list[dict[str, Any]]
                    ) -> tuple[list[dict[str, Any]], tuple[str, ...], bool, str]:
    """The calls of ``ops`` that may wait for an answer through a latency's links (``target``, the
    fault's resolved ``detail``); the kinds of call among them that wait for one in every client
    (``CERTAIN_CALLS``); whether no slowdown of them denies the latency; whose calls they are."""
    calls = [op for op in ops if op["f"] in ROUND_TRIP_CALLS and op["process"] not in NOT_CLIENTS]
    txid = detail.get("transactional_id")
    if target == "txn-coordinator" and txid:
        return [op for op in calls if op.get("txid") == txid], CERTAIN_CALLS[target], True, f"{txid}'s"
    if target in CERTAIN_CALLS and target != "txn-coordinator":
        return calls, CERTAIN_CALLS[target], True, "the clients'"
    return calls, (), False, "the clients'"


def _ms(durations: list[float], share: float = 0.5) -> float:
    """The ``share`` quantile of ``durations`` (seconds), in ms: the median by default."""
    if share == 0.5:
        return statistics.median(durations) * 1000
    return sorted(durations)[int(share * (len(durations) - 1))] * 1000


def judge_latency(op: dict[str, Any], end: float, ops: list[dict[str, Any]],
                  others: list[tuple[float, float]]) -> dict[str, Any]:
    """A latency fault's effect (``op``: its paired ``fault:latency`` operation, healed at ``end``)
    from the clients' calls in ``ops`` (the history), the other faults' windows ``others`` (and
    their aftermath) left out: see the module's docstring."""
    value = op.get("value") or {}
    resolved = value.get("resolved") or {}
    detail = resolved.get("detail") or {}
    attributes = (detail.get("toxic") or {}).get("attributes") or {}
    if attributes.get("latency") is None:
        return {"seen": None, "evidence": "the fault's record names no latency toxic"}
    latency, jitter = float(attributes["latency"]), float(attributes.get("jitter") or 0)
    if latency <= 0:
        return {"seen": None, "evidence": "a latency of 0 ms delays nothing"}
    start = op["invoke_time"]
    hold = value.get("hold_s")
    # the toxic held from the invoke's return to the heal's start: the harness's own calls took the rest
    overhead = max(0.0, end - start - float(hold)) if hold is not None else 0.0
    held_from, held_to = start + overhead, end - overhead
    calls, certain, can_deny, whose = _crossing_calls(str(value.get("target")), detail, ops)
    shadows = [(a, b + LATENCY_AFTERMATH_S) for a, b in others]

    inside: dict[str, list[float]] = {}
    around: dict[str, list[float]] = {}
    elsewhere: dict[str, list[float]] = {}
    for call in calls:
        began, answered = call["invoke_time"], call.get("complete_time")
        if call.get("outcome") != "ok" or answered is None or any(began <= b and answered >= a for a, b in shadows):
            continue
        if held_from <= began and answered <= held_to:
            inside.setdefault(call["f"], []).append(answered - began)
        elif answered < start or began > end + LATENCY_AFTERMATH_S:
            elsewhere.setdefault(call["f"], []).append(answered - began)
            if start - LATENCY_BASELINE_S <= began and answered <= end + LATENCY_BASELINE_S:
                around.setdefault(call["f"], []).append(answered - began)
    judged = {f: d for f, d in inside.items() if len(d) >= LATENCY_MIN_CALLS}
    toxic, bound, least = f"{latency:g}±{jitter:g} ms", LATENCY_SEEN_SHARE * latency, max(0.0, latency - jitter)
    if not judged:
        return {"seen": None, "evidence": f"{sum(map(len, inside.values()))} of {whose} calls that wait for a broker "
                                          f"were answered in the window (at least {LATENCY_MIN_CALLS} of a kind are "
                                          "needed): too few to judge"}
    figures, slowed, flat, floors, unslowed = [], [], [], [], []
    for f in sorted(judged, key=ROUND_TRIP_CALLS.index):
        med = _ms(judged[f])
        near = len(around.get(f, ())) >= LATENCY_MIN_CALLS
        reference = around[f] if near else elsewhere.get(f, [])
        base = _ms(reference) if len(reference) >= LATENCY_MIN_CALLS else None
        where = "around it" if near else "elsewhere in the run"
        figures.append(f"{f}: median {med:.0f} ms over {len(judged[f])} calls in the window"
                       + (f" against {base:.0f} ms over {len(reference)} {where} ({med - base:+.0f} ms)"
                          if base is not None else f" (only {len(reference)} outside the faults)"))
        # a call through the toxic takes its own work and at least ``least`` more; its own work, at
        # the window's median, is taken to be no shorter than the baseline's fastest tenth
        floor = least + (_ms(reference, LATENCY_FLOOR_SHARE) if base is not None else 0.0)
        floors.append(f"{f} {floor:.0f} ms")
        if base is not None and med - base >= bound:
            slowed.append(f)
        elif f in certain and base is not None:
            unslowed.append(f)
        if med < floor - TIMING_SLACK_MS and (base is None or med <= base + LATENCY_DENY_SHARE * latency):
            flat.append(f)
    said = "; ".join(figures)
    if slowed and not unslowed:
        return {"seen": True, "evidence": f"{said}: {', '.join(slowed)} slower by at least {bound:.0f} ms, half the "
                                          f"latency of the {toxic} toxic"}
    if can_deny and len(flat) == len(judged):
        return {"seen": False, "evidence": f"{said}: {whose} calls in the window were no slower, and shorter than "
                                           f"one answer through the {toxic} toxic leaves them ({least:.0f} ms past "
                                           f"the baseline's fastest tenth: {', '.join(floors)})"}
    if slowed:
        return {"seen": None, "evidence": f"{said}: {', '.join(slowed)} slower by at least {bound:.0f} ms, but not "
                                          f"{', '.join(unslowed)}, which waits for an answer through those links in "
                                          "every client: not judged"}
    if not can_deny:
        return {"seen": None, "evidence": f"{said}: which clients' calls crossed the links of broker "
                                          f"{', '.join(map(str, resolved.get('nodes') or []))} cannot be told, and "
                                          f"theirs together were not slower by {bound:.0f} ms: not judged"}
    return {"seen": None, "evidence": f"{said}: neither slower by {bound:.0f} ms (half the latency of the {toxic} "
                                      f"toxic) nor shorter than one answer through it leaves them "
                                      f"({', '.join(floors)}): not judged"}


def effects(faults: list[dict[str, Any]], record: ClusterRecord | None, why_not: str | None = None,
            end_of_history: float | None = None, message_events: list[dict[str, Any]] | None = None,
            notice_s: float = 12.0, ops: list[dict[str, Any]] | None = None) -> dict[int, dict[str, Any]]:
    """Per executed fault (``faults``: the history's paired ``fault:*`` operations), by index,
    its effect (:func:`judge`); every one None with ``why_not`` when the record cannot be judged
    (message faults are judged from ``message_events``, the proxy's record, and latency faults
    from ``ops``, the clients' history, on any backend)."""
    acted: dict[str, int] = {}
    for event in message_events or []:
        acted[str(event.get("rule"))] = acted.get(str(event.get("rule")), 0) + 1
    done = [op for op in faults if op.get("outcome") == "ok" or op.get("complete_time") is None]
    out: dict[int, dict[str, Any]] = {}

    def end_of(op: dict[str, Any]) -> float:
        return op["complete_time"] if op.get("complete_time") is not None else (end_of_history or op["invoke_time"])

    for i, op in enumerate(done):
        index = int((op.get("value") or {}).get("index", i))
        kind = op["f"].removeprefix("fault:")
        if kind in KINDS and KINDS[kind].message_rule is not None:
            out[index] = judge(kind, [], 0.0, 0.0, ClusterRecord([]),
                               requests=None if message_events is None else acted.get(f"kchaos-fault-{index}", 0))
            continue
        if kind in kinds_with(DELAYS_CLIENT_LINKS):
            # every other fault, injected or attempted (a failed one may have acted part way)
            others = [(o["invoke_time"], end_of(o)) for o in faults if o is not op]
            out[index] = ({"seen": None, "evidence": "no client history to time the calls on"} if ops is None
                          else judge_latency(op, end_of(op), ops, others))
            continue
        if record is None or why_not:
            out[index] = {"seen": None, "evidence": why_not or "the run directory holds no broker logs"}
            continue
        nodes = _nodes(op)
        end = end_of(op)
        later = [o["invoke_time"] for o in done if o["invoke_time"] > op["invoke_time"]
                 and o["f"].removeprefix("fault:") in kinds_with(RESTARTS_BROKER) and set(_nodes(o)) & set(nodes)]
        out[index] = judge(kind, nodes, op["invoke_time"], end, record, min(later) if later else None,
                           notice_s=notice_s)
    return out


def run_effects(run: Path, faults: list[dict[str, Any]], cluster: Any, end_of_history: float | None,
                ops: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """The effects of a run's faults from its directory (see the module's docstring); ``cluster``:
    the recorded campaign's [cluster] (its backend, clock control and broker settings); ``ops``:
    the run's paired history, as its caller already read it (the latency rule times its calls)."""
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
                   notice_bound_s(getattr(cluster, "broker", None)), ops)
