"""A heal that times out says what was still wrong, and the run's end asks again which brokers are
registered: the run's unknown verdict carries it, and a claim about a broker that never rejoined
(docs/findings.md F9) is checked against it. On a hand-made cluster seen through its metadata."""
from types import SimpleNamespace

import pytest

from kchaos.clusters.base import Cluster
from kchaos.errors import ClusterError


class _Metadata(Cluster):
    """Brokers 1 to 3 seen only through the metadata: the ones it lists, and its under-replicated partitions."""

    def __init__(self, registered: set[int], under: list[tuple[str, int]]):
        super().__init__()
        self._nodes = [SimpleNamespace(node_id=i, is_broker=True, is_controller=False) for i in (1, 2, 3)]
        self._registered, self._under = registered, under

    nodes = property(lambda self: self._nodes)
    bootstrap_servers = property(lambda self: "")

    def start(self): ...

    def stop(self): ...

    def admin(self):
        return SimpleNamespace(list_topics=lambda timeout: SimpleNamespace(brokers={i: None for i in self._registered}))

    def under_replicated_partitions(self):
        return self._under


def test_a_heal_timeout_names_the_broker_that_never_registered():
    with pytest.raises(ClusterError, match=r"within 1s: brokers \[2\] not registered"):
        _Metadata({1, 3}, []).wait_healthy(timeout_s=0.6)


def test_a_heal_timeout_names_under_replicated_partitions_once_every_broker_is_back():
    with pytest.raises(ClusterError, match="2 partitions under-replicated"):
        _Metadata({1, 2, 3}, [("t", 0), ("t", 1)]).wait_healthy(timeout_s=0.6)


def test_a_healthy_cluster_returns():
    _Metadata({1, 2, 3}, []).wait_healthy(timeout_s=0.6)


def test_unregistered_brokers_are_the_ones_metadata_does_not_list():
    assert _Metadata({1, 3}, []).unregistered_brokers() == [2]
    assert _Metadata({1, 2, 3}, [("t", 0)]).unregistered_brokers() == []


class _Fenced(_Metadata):
    """Broker 2 is fenced after the metadata's second read: a session timeout after the heal."""

    def __init__(self):
        super().__init__({1, 2, 3}, [])
        self.reads = 0

    def admin(self):
        self.reads += 1
        if self.reads >= 2:
            self._registered = {1, 3}
        return super().admin()


def test_the_run_end_watches_registration_until_the_fence_deadline_and_names_a_broker_fenced_after_the_heal():
    import time

    from kchaos.harness.run import _registration_at_end

    assert _registration_at_end(_Fenced(), time.monotonic() + 5) == "brokers [2] not registered"
    started = time.monotonic()
    assert _registration_at_end(_Metadata({1, 2, 3}, []), started + 0.3) is None
    assert time.monotonic() - started >= 0.3  # a run that ended sooner waits out the deadline
    assert _registration_at_end(_Metadata({1, 2, 3}, []), started - 100) is None  # a slow end costs nothing more


def test_the_fence_deadline_is_the_brokers_session_timeout_and_a_heartbeat_to_spare():
    from kchaos.harness.run import _fence_deadline_s

    def campaign(backend="local", broker=None):
        return SimpleNamespace(cluster=SimpleNamespace(backend=backend, broker=broker or {}))

    assert _fence_deadline_s(campaign()) == 14  # kchaos' clusters: 12 s
    assert _fence_deadline_s(campaign(broker={"broker.session.timeout.ms": "30000"})) == 32
    assert _fence_deadline_s(campaign("external")) == 11  # Kafka's default, 9 s


class _Flaky(_Metadata):
    """Every metadata read fails but the ``ok``-th ones."""

    def __init__(self, ok: set[int]):
        super().__init__({1, 2, 3}, [])
        self.reads, self.ok = 0, ok

    def admin(self):
        self.reads += 1
        if self.reads not in self.ok:
            raise RuntimeError("metadata timed out")
        return super().admin()


def test_a_failed_metadata_read_at_the_end_is_tried_again_and_named_only_if_every_retry_fails(monkeypatch):
    import time

    from kchaos.harness import run

    monkeypatch.setattr(run, "METADATA_RETRY_S", 0.5)
    assert run._registration_at_end(_Flaky({2}), time.monotonic()) is None  # the second read answers
    assert run._registration_at_end(_Flaky(set()), time.monotonic()) == \
        "the brokers' metadata could not be read: RuntimeError('metadata timed out')"


class _Lagging(_Metadata):
    """A topic the brokers asked first do not know yet (their metadata catches up on its own),
    then one that does; ``error`` is what every describe answers instead, when set."""

    def __init__(self, unknown_answers: int, error: int | None = None):
        super().__init__({1, 2, 3}, [])
        self.unknown_answers, self.error, self.describes = unknown_answers, error, 0

    def admin(self):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        def describe_topics(topics, request_timeout):
            self.describes += 1
            answer = Future()
            if self.error is not None:
                answer.set_exception(KafkaException(KafkaError(self.error)))
            elif self.describes <= self.unknown_answers:
                answer.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            else:
                answer.set_result(SimpleNamespace(topic_id=SimpleNamespace(get_most_significant_bits=lambda: -1,
                                                                           get_least_significant_bits=lambda: 1)))
            return {name: answer for name in topics.topic_names}

        return SimpleNamespace(describe_topics=describe_topics)


def test_a_topic_id_is_asked_again_while_the_broker_asked_does_not_know_the_topic_yet():
    lagging = _Lagging(unknown_answers=2)
    assert lagging.topic_id("t") == "__________8AAAAAAAAAAQ" and lagging.describes == 3


def test_a_topic_no_broker_learns_of_is_a_cluster_error_naming_it():
    from confluent_kafka import KafkaError

    with pytest.raises(ClusterError, match="no broker knew topic t within 1s"):
        _Lagging(unknown_answers=0, error=KafkaError.UNKNOWN_TOPIC_OR_PART).topic_id("t", timeout_s=0.6)


def test_any_other_answer_to_a_topic_id_is_raised_at_once():
    from confluent_kafka import KafkaError, KafkaException

    lagging = _Lagging(unknown_answers=0, error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        lagging.topic_id("t")
    assert lagging.describes == 1
