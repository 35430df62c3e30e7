"""The final read of the group's offsets asks again while the group coordinator moves (CI saw a
faultless run made unknown by one NOT_COORDINATOR answer), and gives up at once on anything else."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kchaos.workloads.ctp import CtpWorkload


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
