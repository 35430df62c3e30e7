"""A fault's effect from the cluster's own record (verifier/fault_effects.py), on hand-made log lines
and histories; and exposure counting only faults whose record does not deny them."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from kchaos.faults.spec import ExposureSpec
from kchaos.verifier import exposure
from kchaos.verifier.fault_effects import ClusterRecord, effects, judge

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
                   fault("latency", 6, 20, 29, [1, 2, 3])], ClusterRecord(BOOT), message_events=events)
    assert out[4] == {"seen": True, "evidence": "the message proxy acted on 2 requests"}
    assert out[5]["seen"] is False
    assert out[6] == {"seen": None, "evidence": "no rule for this kind yet"}


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
