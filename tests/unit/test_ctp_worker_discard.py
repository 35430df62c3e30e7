"""The librdkafka worker's discard of a poll that spanned a rebalance, on a hand-made consumer (no
broker): where it seeks the partitions it still owns."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from kchaos.workloads.ctp_worker import UnknownOutcome, Worker
from tests.clocks import module_time


class Msg:
    def __init__(self, partition: int, offset: int):
        self._p, self._o = partition, offset

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class Consumer:
    """Owns ``assigned``; the group's committed offsets are ``committed_offsets`` (absent: none)."""

    def __init__(self, assigned, committed_offsets, committed_fails=0):
        self.assigned = assigned
        self.committed_offsets = committed_offsets
        self.committed_fails = committed_fails
        self.sought: dict[int, int] = {}

    def assignment(self):
        return [TopicPartition("in", p) for p in self.assigned]

    def committed(self, partitions, timeout):
        if self.committed_fails:
            self.committed_fails -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "coordinator not available"))
        return [TopicPartition(tp.topic, tp.partition, self.committed_offsets.get(tp.partition, -1001))
                for tp in partitions]

    def seek(self, tp):
        self.sought[tp.partition] = tp.offset


class History:
    def __init__(self):
        self.events = []

    def event(self, f, value, **fields):
        self.events.append((f, value))


def _worker(consumer) -> Worker:
    w = Worker.__new__(Worker)
    w.consumer = consumer
    w.spec = SimpleNamespace(input_topic="in")
    w.history = History()
    w.worker, w.incarnation = "w1", 1
    return w


def test_a_partition_assigned_during_the_poll_restarts_at_its_committed_offset_not_at_stale_inputs():
    # hunt-coordinator-crash seed 5: w1 had owned partition 4 earlier, when it had no committed
    # offset; assigned it again after w2 had committed 47, its poll returned 4@0..3 left over
    # from then. Seeking to 0 processed 0..46 a second time.
    consumer = Consumer(assigned=[3, 4, 5], committed_offsets={3: 134, 4: 47, 5: 101})
    w = _worker(consumer)
    assert w._discard_across_rebalance([Msg(4, 0), Msg(4, 1), Msg(4, 2), Msg(4, 3)]) == []
    assert consumer.sought == {4: 47}
    (f, value), = w.history.events
    assert f == "discard" and value["inputs"] == {"4": 0} and value["seek"] == {"4": 47}


def test_a_partition_held_throughout_goes_back_to_where_its_dropped_inputs_began():
    # every transaction before the poll ended: the committed offset is the first dropped input
    consumer = Consumer(assigned=[1, 2], committed_offsets={1: 22, 2: 40})
    w = _worker(consumer)
    w._discard_across_rebalance([Msg(1, 22), Msg(1, 23), Msg(2, 40)])
    assert consumer.sought == {1: 22, 2: 40}


def test_revoked_partitions_are_not_sought_and_one_without_a_commit_starts_from_the_beginning():
    consumer = Consumer(assigned=[6], committed_offsets={})
    w = _worker(consumer)
    w._discard_across_rebalance([Msg(5, 33), Msg(6, 0)])
    assert consumer.sought == {6: OFFSET_BEGINNING}
    assert w.history.events[0][1]["inputs"] == {"5": 33, "6": 0}


def test_committed_offsets_that_cannot_be_read_end_the_worker_rather_than_consume_on(monkeypatch):
    monkeypatch.setattr("kchaos.workloads.ctp_worker.time.sleep", lambda s: None)
    consumer = Consumer(assigned=[4], committed_offsets={4: 47}, committed_fails=10)
    w = _worker(consumer)
    with pytest.raises(UnknownOutcome):
        w._discard_across_rebalance([Msg(4, 0)])
    assert consumer.sought == {}
    (f, value), = w.history.events
    assert value["seek"].startswith("failed")


def test_a_consumer_librdkafka_gave_up_on_ends_the_worker(monkeypatch):
    """Errors in a consume() batch: a transient one is dropped with its message; a fatal one, or
    the consumer's leaving its group past max.poll.interval.ms, ends the worker (the pool starts
    another); UNRELEASED_INSTANCE_ID (a KIP-848 static member's predecessor still holds its id)
    waits before it does."""
    import kchaos.workloads.ctp_worker as ctp_worker

    slept: list[float] = []
    monkeypatch.setattr(ctp_worker, "time", module_time(sleep=slept.append))

    def batch(*errors: KafkaError | None) -> list[SimpleNamespace]:
        return [SimpleNamespace(error=lambda e=e: e) for e in errors]

    Worker._raise_fatal_consumer_error(batch(None, KafkaError(KafkaError._TRANSPORT)))
    with pytest.raises(KafkaException) as left:
        Worker._raise_fatal_consumer_error(batch(None, KafkaError(KafkaError._MAX_POLL_EXCEEDED)))
    assert left.value.args[0].code() == KafkaError._MAX_POLL_EXCEEDED and slept == []
    with pytest.raises(KafkaException):
        Worker._raise_fatal_consumer_error(batch(KafkaError(KafkaError.UNRELEASED_INSTANCE_ID, fatal=True)))
    assert slept == [ctp_worker.UNRELEASED_INSTANCE_WAIT_S]
