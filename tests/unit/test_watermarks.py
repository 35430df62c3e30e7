"""ListOffsets asked again while a leader moves (workloads/dump.py watermark_offsets): a hand-made consumer."""

from __future__ import annotations


def test_a_watermark_query_is_asked_again_while_its_leader_moves():
    """The observers' and final reads' ListOffsets during a leader's move back to a restarted
    broker: NOT_LEADER_FOR_PARTITION for a moment is asked again, not a dead observer (it made a
    certification run unknown: certify-tv-flip-app seed 46); a lasting or other error still raises."""
    import pytest
    from confluent_kafka import KafkaError, KafkaException

    from kchaos.workloads.dump import watermark_offsets

    class Consumer:
        def __init__(self, failures: int, code: int = KafkaError.NOT_LEADER_FOR_PARTITION):
            self.failures, self.code, self.asked = failures, code, 0

        def get_watermark_offsets(self, tp, timeout, cached):
            self.asked += 1
            if self.asked <= self.failures:
                raise KafkaException(KafkaError(self.code))
            return 0, 42

    moving = Consumer(2)
    assert watermark_offsets(moving, "t-0", 5.0) == (0, 42) and moving.asked == 3
    with pytest.raises(KafkaException):
        watermark_offsets(Consumer(10**6), "t-0", 0.5)  # past its timeout
    with pytest.raises(KafkaException):
        watermark_offsets(Consumer(1, KafkaError.TOPIC_AUTHORIZATION_FAILED), "t-0", 5.0)
