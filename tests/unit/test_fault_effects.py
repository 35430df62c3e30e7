"""A fault's effect from the cluster's own record (verifier/fault_effects.py), on hand-made log lines
and histories (a latency's from the clients' timed calls); and exposure counting only faults whose
record does not deny them."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from kchaos.faults.spec import ExposureSpec
from kchaos.verifier import exposure
from kchaos.verifier.fault_effects import ClusterRecord, effects, judge, judge_latency

from .test_exposure import History

T0 = datetime(2026, 12, 2, 3, 0, 0).timestamp()


def stamp(t: float) -> str:
    return "[" + datetime.fromtimestamp(T0 + t).strftime("%Y-%m-%dT%H:%M:%S,%f")[:-3] + "]"


def register(t: float, broker: int, incarnation: str, initial: bool = False) -> str:
    return (f"{stamp(t)} INFO [QuorumController id=1] Replayed {'initial ' if initial else ''}RegisterBrokerRecord "
            f"{'for' if initial else 'establishing a new incarnation of'} broker {broker}: RegisterBrokerRecord("
            f"brokerId={broker}, isMigratingZkBroker=false, incarnationId={incarnation}, brokerEpoch=10, endPoints=[])")


def fence(t: float, broker: int, fenced: int = 1) -> str:
    return (f"{stamp(t)} INFO [QuorumController id=1] Replayed BrokerRegistrationChangeRecord modifying the "
            f"registration for broker {broker}: BrokerRegistrationChangeRecord(brokerId={broker}, brokerEpoch=11, "
            f"fenced={fenced}, inControlledShutdown=0, logDirs=[])")


def isr(t: float, leader: int, members: str) -> str:
    return f"{stamp(t)} INFO [Partition kchaos-out-0 broker={leader}] ISR updated to {members}  and version updated to 3"


def fault(kind: str, index: int, start: float, end: float, nodes: list[int]) -> dict:
    return {"f": f"fault:{kind}", "outcome": "ok", "invoke_time": T0 + start, "complete_time": T0 + end,
            "value": {"index": index, "resolved": {"nodes": nodes}}}


BOOT = [register(0, b, f"boot{b}", initial=True) for b in (1, 2, 3)]


def test_a_kill_is_seen_by_its_new_incarnation_and_a_kill_that_left_the_process_is_not():
    record = ClusterRecord([*BOOT, register(40, 2, "second")])
    assert judge("kill", [2], T0 + 20, T0 + 35, record)["seen"] is True
    denied = judge("kill", [3], T0 + 20, T0 + 35, record)
    assert denied["seen"] is False and "no new incarnation of broker 3" in denied["evidence"]


def test_a_replayed_old_incarnation_is_no_restart():
    """A node that restarts replays the metadata log, logging earlier registrations again: only an
    incarnation id the record had not held counts."""
    record = ClusterRecord([*BOOT, register(10, 1, "second"), register(60, 1, "second")])
    assert judge("kill", [1], T0 + 50, T0 + 55, record)["seen"] is False


def test_a_restart_belongs_to_the_fault_before_the_next_one_on_its_node():
    record = ClusterRecord([*BOOT, register(70, 2, "late")])
    faults = [fault("kill", 0, 10, 20, [2]), fault("kill", 1, 60, 65, [2])]
    seen = effects(faults, record)
    assert seen[0]["seen"] is False and seen[1]["seen"] is True


def test_a_partition_is_seen_by_a_fence_or_an_isr_left_without_the_cut_broker():
    assert judge("partition", [2], T0 + 10, T0 + 35, ClusterRecord([fence(23, 2)]))["seen"] is True
    assert judge("partition", [2], T0 + 10, T0 + 35, ClusterRecord([isr(20, 1, "1,3")]))["seen"] is True
    # the unfence after the heal, an ISR that still holds the cut broker, the cut broker's own line: nothing
    quiet = ClusterRecord([fence(36, 2, fenced=-1), isr(20, 1, "1,2,3"), isr(21, 2, "2"), fence(80, 2)])
    denied = judge("partition", [2], T0 + 10, T0 + 35, quiet)
    assert denied["seen"] is False and "no broker noticed the cut" in denied["evidence"]


def test_message_faults_are_judged_from_the_proxys_record_and_other_kinds_are_not_judged():
    events = [{"rule": "kchaos-fault-4", "time": T0 + 5}, {"rule": "kchaos-fault-4", "time": T0 + 6}]
    out = effects([fault("message-hold", 4, 1, 9, []), fault("message-delay", 5, 10, 19, []),
                   fault("latency", 6, 20, 29, [1, 2, 3]), fault("clock-bump", 7, 30, 39, [1])], ClusterRecord(BOOT),
                  message_events=events)
    assert out[4] == {"seen": True, "evidence": "the message proxy acted on 2 requests"}
    assert out[5]["seen"] is False
    assert out[6] == {"seen": None, "evidence": "no client history to time the calls on"}
    assert out[7] == {"seen": None, "evidence": "no rule for this kind yet"}


def test_without_a_record_every_fault_is_unjudged_with_the_reason():
    out = effects([fault("kill", 0, 1, 5, [1])], None, "the nodes' clocks were under control")
    assert out == {0: {"seen": None, "evidence": "the nodes' clocks were under control"}}


@given(st.lists(st.booleans(), min_size=1, max_size=6))
def test_exposure_counts_only_faults_the_record_does_not_deny(seen):
    h = History().phase("steady", 0.0)
    for i in range(len(seen)):
        h.txn("w0.1", i, 10.0 * i + 1, 10.0 * i + 2).fault(i, "kill", 10.0 * i, 10.0 * i + 5)
    verdicts = {i: {"seen": s, "evidence": "e"} for i, s in enumerate(seen)}
    measured = exposure.exposure(h.index(), stall_bound_s=100, effects=verdicts)
    kill = measured["kinds"]["kill"]
    assert kill["committed"] == kill["faults"] == sum(seen)
    assert kill["without_effect"] == [i for i, s in enumerate(seen) if not s]
    assert measured["committed_overlapping_a_fault"] == sum(seen)
    assert [f["effect"]["seen"] for f in measured["faults"]] == seen


def test_a_shortfall_names_the_faults_without_their_effect():
    h = History().phase("steady", 0.0)
    h.txn("w0.1", 0, 1.0, 2.0).txn("w0.1", 1, 11.0, 12.0).fault(0, "kill", 0.0, 5.0).fault(1, "kill", 10.0, 15.0)
    history = h.index()
    verdicts = {0: {"seen": True, "evidence": "ok"}, 1: {"seen": False, "evidence": "no new incarnation of broker 2"}}
    measured = exposure.exposure(history, stall_bound_s=100, effects=verdicts)
    short = exposure.shortfall(measured, ExposureSpec(committed={"kill": 2}), history, None, verdicts)
    assert short == ["kill: 1 committed transactions overlapped its 1 windows, 2 required (1 more kill without its "
                     "effect in the cluster's record: fault 1; no new incarnation of broker 2)"]
    assert "1 faults without their effect in the cluster's record, not counted" in exposure.summary_line(measured)


def test_reload4j_stamps_and_a_recorded_utc_offset_are_read():
    """Kafka 3.x logs through reload4j with a space for the T; a run records its UTC offset, so a
    run read in another time zone places the lines where they were."""
    line = register(40, 2, "second").replace("T", " ", 1)
    assert ClusterRecord([*BOOT, line]).incarnations[-1] == (T0 + 40, 2)
    shifted = ClusterRecord([register(40, 2, "x")], utc_offset_s=datetime.fromtimestamp(T0).astimezone()
                            .utcoffset().total_seconds() + 3600)
    assert shifted.incarnations == [(T0 + 40 - 3600, 2)]


def test_a_cut_shorter_than_the_clusters_notice_is_not_judged_and_a_rings_ends_are_judged_pairwise():
    quiet = ClusterRecord(BOOT)
    assert judge("partition", [2], T0, T0 + 4, quiet, notice_s=12.0)["seen"] is None  # byo-copier's 4 s cut
    assert judge("partition", [2], T0, T0 + 25, quiet, notice_s=12.0)["seen"] is False
    # a ring's cut between 1 and 3: leader 1 left 3 out of an ISR
    assert judge("partition", [1, 3], T0, T0 + 25, ClusterRecord([isr(10, 1, "1,2")]))["seen"] is True


def test_a_controller_only_node_and_a_log_without_registrations_are_not_judged():
    assert judge("kill", [9], T0, T0 + 5, ClusterRecord(BOOT))["seen"] is None
    assert judge("kill", [1], T0, T0 + 5, ClusterRecord([fence(3, 1)]))["seen"] is None


# -- latency: the clients' own times (the history) ------------------------------------------------

def latency_history(slow_ms: float = 0.0, window: tuple[float, float] = (100.0, 130.0), latency: int = 200,
                    jitter: int = 100, target: str = "all-clients", detail: dict | None = None,
                    workers: tuple[str, ...] = ("w0.1", "w1.1"), slow: tuple[str, ...] | None = None,
                    span: tuple[float, float] = (40.0, 190.0), work: tuple[float, float] = (0.08, 0.03)) -> History:
    """Each worker commits a transaction a second over ``span`` (send_offsets ``work[0]`` s, commit
    ``work[1]`` s); a latency fault (index 0, its toxic as the harness records it) over ``window``,
    in which the calls of the workers in ``slow`` (default: all) take ``slow_ms`` longer."""
    h = History().phase("steady", 0.0)
    start, end = window
    seq = 0
    for process in workers:
        t = span[0] + (0.5 if process.startswith("w1") else 0.0)
        while t < span[1]:
            seq += 1
            extra = slow_ms / 1000 if start <= t and t + 1 <= end and process in (slow or workers) else 0.0
            h.op(process, "send", t, t + 0.005, txn_seq=seq, inputs=[[0, seq]])
            h.op(process, "send_offsets", t + 0.01, t + 0.01 + work[0] + extra, txn_seq=seq)
            done = t + 0.02 + work[0] + extra
            h.op(process, "commit", done, done + work[1] + extra, txn_seq=seq)
            t += 1.0
    toxic = {"type": "latency", "stream": "downstream", "toxicity": 1.0,
             "attributes": {"latency": latency, "jitter": jitter}, "name": "kchaos-0"}
    h.op("harness", "fault:latency", start, end, index=0, kind="latency", target=target, hold_s=end - start,
         resolved={"nodes": [1, 2, 3], "role": "every client link", "detail": {**(detail or {}), "toxic": toxic}})
    return h


def latency_effect(h: History) -> dict:
    history = h.index()
    return effects(history.faults, None, "the brokers' logs are not read here", ops=history.ops)[0]


def test_a_latency_whose_window_holds_calls_slower_by_about_it_is_seen():
    seen = latency_effect(latency_history(slow_ms=250))
    assert seen["seen"] is True, seen
    assert "commit: median 280 ms over 60 calls in the window against 30 ms over 110 around it (+250 ms)" in seen["evidence"]
    assert "commit, send_offsets slower by at least 100 ms, half the latency of the 200±100 ms toxic" in seen["evidence"]


def test_a_latency_under_which_the_calls_took_no_longer_is_denied_and_counts_toward_no_exposure():
    h = latency_history(slow_ms=0)
    denied = latency_effect(h)
    assert denied["seen"] is False, denied
    assert "the clients' calls in the window were no slower" in denied["evidence"]
    history = h.index()
    counted = exposure.exposure(history, stall_bound_s=100)["kinds"]["latency"]
    assert counted["faults"] == 1 and counted["committed"] > 0
    verdicts = {0: denied}
    measured = exposure.exposure(history, stall_bound_s=100, effects=verdicts)
    latency = measured["kinds"]["latency"]
    assert (latency["faults"], latency["committed"], latency["without_effect"]) == (0, 0, [0])
    short = exposure.shortfall(measured, ExposureSpec(committed={"latency": 1}), history, None, verdicts)
    assert short[0].startswith("latency: 0 committed transactions overlapped its 0 windows, 1 required (1 more latency "
                               "without its effect in the cluster's record: fault 0; commit: median 30 ms")


def test_a_latency_over_too_few_calls_is_not_judged():
    # the workers stop 2 s into the window: two commits each in it
    out = latency_effect(latency_history(slow_ms=0, span=(40.0, 102.0)))
    assert out["seen"] is None and "too few to judge" in out["evidence"], out


def test_a_slowdown_below_half_the_latency_or_under_a_jitter_as_large_is_not_judged_and_slow_calls_are_no_excuse():
    # 40 ms slower under a 200 ms latency: neither its effect nor none
    out = latency_effect(latency_history(slow_ms=40))
    assert out["seen"] is None and "neither slower by 100 ms" in out["evidence"], out
    # a jitter as large as the latency: an answer may wait no longer, so calls no slower deny nothing
    out = latency_effect(latency_history(slow_ms=0, latency=100, jitter=150))
    assert out["seen"] is None, out
    # calls of 150 ms, no slower under a 200±100 ms toxic: each would take its 150 ms and 100 ms more
    assert latency_effect(latency_history(slow_ms=0, work=(0.15, 0.15)))["seen"] is False


def test_a_latency_on_one_coordinators_links_is_judged_on_the_calls_that_cross_them():
    detail = {"transactional_id": "tx-w1"}
    # only w1's calls slower: seen; w0's calls (another coordinator) do not count
    out = latency_effect(latency_history(slow_ms=250, target="txn-coordinator", detail=detail, slow=("w1.1",)))
    assert out["seen"] is True and "over 30 calls in the window" in out["evidence"], out
    # w0's calls slower, w1's not: denied, w0's do not count
    out = latency_effect(latency_history(slow_ms=250, target="txn-coordinator", detail=detail, slow=("w0.1",)))
    assert out["seen"] is False and "tx-w1's calls in the window were no slower" in out["evidence"], out
    # one broker's links: which calls crossed them cannot be told, so no slowdown denies nothing
    out = latency_effect(latency_history(slow_ms=0, target="random"))
    assert out["seen"] is None and "cannot be told" in out["evidence"], out
    assert latency_effect(latency_history(slow_ms=250, target="leader-output"))["seen"] is True


def test_calls_under_another_fault_and_just_after_its_heal_are_in_neither_the_window_nor_the_baseline():
    h = latency_history(slow_ms=250)
    # a kill before the latency, its heal 2 s into it; its calls (and those 5 s after) took 3 s longer
    h.op("harness", "fault:kill", 60.0, 102.0, index=1, kind="kill", target="t")
    for line in h.lines:
        if line["process"] != "harness" and line["type"] != "invoke" and 60.0 <= line["time"] <= 107.0:
            line["time"] += 3.0
    out = latency_effect(h)
    assert out["seen"] is True and "over 46 calls in the window against 30 ms over 50 around it (+250 ms)" in out["evidence"], out
    # back to back: no call around the window outside a fault, the baseline is the run's calls outside them
    h = latency_history(slow_ms=250)
    h.op("harness", "fault:kill", 60.0, 99.0, index=1, kind="kill", target="t")
    h.op("harness", "fault:kill", 131.0, 170.0, index=2, kind="kill", target="t")
    out = latency_effect(h)
    assert out["seen"] is True and "against 30 ms over 70 elsewhere in the run (+250 ms)" in out["evidence"], out


def test_a_latency_the_record_names_no_toxic_of_is_not_judged():
    out = judge_latency({"f": "fault:latency", "invoke_time": 0.0, "complete_time": 5.0,
                         "value": {"index": 0, "target": "all-clients", "resolved": {"nodes": [1]}}}, 5.0, [], [])
    assert out == {"seen": None, "evidence": "the fault's record names no latency toxic"}


DURATIONS_MS = st.lists(st.integers(1, 2000), min_size=5, max_size=20)


def calls_around(window_start: float, baseline: list[int], inside: list[int]) -> list[dict]:
    """Commits of one worker: ``baseline`` (ms) in the 30 s before ``window_start``, ``inside`` in the
    window (30 s from it)."""
    ops = []
    for k, ms in enumerate(baseline):
        ops.append({"process": "w0.1", "op": k, "f": "commit", "invoke_time": window_start - 29 + k,
                    "complete_time": window_start - 29 + k + ms / 1000, "outcome": "ok", "value": {}})
    for k, ms in enumerate(inside):
        ops.append({"process": "w0.1", "op": 100 + k, "f": "commit", "invoke_time": window_start + 1 + k,
                    "complete_time": window_start + 1 + k + ms / 1000, "outcome": "ok", "value": {}})
    return ops


def latency_op(start: float, latency: int, jitter: int) -> dict:
    return {"f": "fault:latency", "invoke_time": start, "complete_time": start + 30, "outcome": "ok",
            "value": {"index": 0, "target": "all-clients", "hold_s": 30.0, "resolved": {"nodes": [1], "detail": {
                "toxic": {"attributes": {"latency": latency, "jitter": jitter}}}}}}


@given(DURATIONS_MS, st.integers(10, 1000), st.integers(0, 500), st.data())
def test_a_latency_that_delayed_every_call_is_never_denied_and_by_half_its_latency_always_seen(baseline, latency,
                                                                                                jitter, data):
    """Any baseline; the same calls in the window, each delayed as the toxic delays an answer (by at
    least latency - jitter): never denied; each delayed by half the latency or more: always seen."""
    least = max(0, latency - jitter)
    delays = data.draw(st.lists(st.integers(least, latency + jitter), min_size=len(baseline), max_size=len(baseline)))
    op = latency_op(1000.0, latency, jitter)
    out = judge_latency(op, 1030.0, calls_around(1000.0, baseline, [b + d for b, d in zip(baseline, delays)]), [])
    assert out["seen"] is not False, out
    if min(delays) >= latency / 2 + 1:
        assert out["seen"] is True, out


@given(DURATIONS_MS, st.integers(0, 500))
def test_calls_no_slower_and_faster_than_one_answer_through_the_toxic_always_deny_it(baseline, jitter):
    latency = max(baseline) + jitter + 1
    op = latency_op(1000.0, latency, jitter)
    out = judge_latency(op, 1030.0, calls_around(1000.0, baseline, list(baseline)), [])
    assert out["seen"] is False, out
