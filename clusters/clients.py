"""Client helpers shared by the harness, workloads, faults and tests."""

from __future__ import annotations

from typing import Any

from kchaos.clusters.base import Cluster
from kchaos.errors import ClusterError
from kchaos.waiting import WaitTimeout, wait_until


def quiet(conf: dict[str, Any]) -> dict[str, Any]:
    """librdkafka logs every refused connection at info level; keep warnings and errors only."""
    return {"log_level": 3, **conf}


def create_topic(cluster: Cluster, topic: str, partitions: int, replication: int, config: dict[str, str] | None = None,
                 timeout_s: float = 30.0) -> None:
    from confluent_kafka.admin import NewTopic

    fut = cluster.admin().create_topics([NewTopic(topic, partitions, replication, config=config or {})],
                                         request_timeout=timeout_s)[topic]
    try:
        fut.result()
    except Exception as exc:
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise ClusterError(f"could not create topic {topic}: {exc}") from None
    # The controller has it; wait until the brokers' metadata shows a leader for every partition.

    def visible() -> bool:
        md = cluster.admin().list_topics(topic=topic, timeout=5).topics.get(topic)
        return (md is not None and md.error is None and len(md.partitions) == partitions
                and all(p.leader >= 0 for p in md.partitions.values()))

    try:
        wait_until(visible, timeout_s, 0.2, f"topic {topic} has no leader for every partition", retry_on=(Exception,))
    except WaitTimeout as exc:
        raise ClusterError(str(exc)) from None
