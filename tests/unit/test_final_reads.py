"""The final reads on hand-made answers (no broker). The read of the group's offsets asks again
while the group coordinator moves (CI saw a faultless run made unknown by one NOT_COORDINATOR
answer), and gives up at once on anything else. The liveness wait asks again when a read times
out right after the heal (a hunt run ended there, 2026-11-27); only reads that never answer within
its window end the run."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kchaos.errors import ClusterError
from tests.clocks import module_time
from kchaos.workloads import ctp
from kchaos.workloads.ctp import CtpWorkload
from kchaos.workloads.spec import WorkloadSpec


def _reader(answers: list):
    workload = CtpWorkload.__new__(CtpWorkload)  # only the offsets reader is exercised
    calls: list[int] = []

    def committed_offsets() -> dict[int, int]:
        calls.append(1)
        answer = answers[min(len(calls), len(answers)) - 1]
        if isinstance(answer, KafkaError):
            raise KafkaException(answer)
        return answer

    workload.committed_offsets = committed_offsets
    return workload, calls


def test_a_moving_coordinator_is_asked_again():
    moving = KafkaError(KafkaError.NOT_COORDINATOR, "Not coordinator")
    workload, calls = _reader([moving, moving, {0: 5, 1: 7}])
    assert workload._final_group_offsets(timeout_s=10) == {0: 5, 1: 7} and len(calls) == 3


def test_other_errors_and_the_deadline_are_raised():
    workload, calls = _reader([KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied")])
    with pytest.raises(KafkaException):
        workload._final_group_offsets(timeout_s=10)
    assert len(calls) == 1
    workload, calls = _reader([KafkaError(KafkaError.NOT_COORDINATOR, "Not coordinator")])
    with pytest.raises(KafkaException):
        workload._final_group_offsets(timeout_s=0.6)
    assert 1 < len(calls) <= 3


class _Cluster:
    def group_offsets_partition(self, group: str) -> int:
        return 7

    def admin(self) -> None:
        return None


def _stable_waiter() -> ctp.CtpWorkload:
    workload = object.__new__(ctp.CtpWorkload)  # only what wait_stable reads
    workload.cluster, workload.client, workload.spec = _Cluster(), {}, WorkloadSpec()
    return workload


@pytest.fixture
def clock(monkeypatch):
    now = [0.0]
    monkeypatch.setattr(ctp, "time", module_time(monotonic=lambda: now[0],
                                                 sleep=lambda s: now.__setitem__(0, now[0] + s)))
    return now


def _timed_out() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get watermark offsets: Local: Timed out"))


def test_a_read_that_times_out_after_the_heal_is_asked_again(monkeypatch, clock):
    answers = [_timed_out(), _timed_out(), {"out": {"0": {"high": 9, "lso": 9}}}]

    def reads(client, admin, topics, only):
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(ctp, "stable_offsets", reads)
    liveness = _stable_waiter().wait_stable(50)
    assert liveness["stable"] is True and liveness["failed_reads"] == 2 and liveness["waited_s"] == 2.0
    assert liveness["offsets_partition"] == "__consumer_offsets-7"


def test_a_pinned_partition_is_still_judged_at_the_window_end_after_failed_reads(monkeypatch, clock):
    def reads(client, admin, topics, only):
        if clock[0] < 3:
            raise _timed_out()
        return {"out": {"0": {"high": 9, "lso": 4}}}

    monkeypatch.setattr(ctp, "stable_offsets", reads)
    liveness = _stable_waiter().wait_stable(10)
    assert liveness["stable"] is False and liveness["pinned"] == {"out-0": {"high": 9, "lso": 4}}
    assert liveness["failed_reads"] == 3 and liveness["waited_s"] == 10.0


def test_reads_that_never_answer_end_the_run_with_the_cause(monkeypatch, clock):
    def reads(client, admin, topics, only):
        raise _timed_out()

    monkeypatch.setattr(ctp, "stable_offsets", reads)
    with pytest.raises(ClusterError, match=r"could not be read in 5s after the heal \(6 tries\).*Timed out"):
        _stable_waiter().wait_stable(5)
