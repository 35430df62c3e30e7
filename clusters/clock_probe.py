"""How far each broker's wall clock is from this machine's, measured through the client protocol.

The split-transaction check (verifier/coordinator_log.py) places each coordinator transaction
(``txnStartTimestamp``, the coordinator's clock) in the client's window (the harness's clock). On
a cluster kchaos starts both are this machine's clock. On a cluster it did not start they are
not, so the run measures the difference and the verifier shifts and widens by it.

The probe: a topic with ``message.timestamp.type=LogAppendTime``, one partition led by each
broker; a record produced to each, several times. The broker stamps the record with its clock
when it appends it, and the produce answer carries that stamp; the harness's clock brackets the
round trip. So ``offset = stamp - midpoint`` with an error of at most half the round trip (plus
the stamp's millisecond rounding); the sample with the shortest round trip is kept.
"""

from __future__ import annotations

import time
from typing import Any

from kchaos.log import client_log

PROBE_TOPIC = "kchaos-clock-probe"
SAMPLES = 5


def measure_broker_clocks(cluster: Any, samples: int = SAMPLES, nodes: list[int] | None = None) -> dict[str, Any]:
    """``{"at": time, "brokers": {id: {"offset_ms": o, "bound_ms": b}}}``: broker clock minus this
    machine's, within ``bound_ms``. A broker that could not be measured is left out (and said).
    ``nodes``: only these brokers (a clock fault's targets)."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic

    brokers = sorted(n.node_id for n in cluster.brokers)
    admin = cluster.admin()
    topics = admin.list_topics(timeout=10).topics
    if PROBE_TOPIC not in topics:
        new = NewTopic(PROBE_TOPIC, num_partitions=len(brokers), replica_assignment=[[b] for b in brokers],
                       config={"message.timestamp.type": "LogAppendTime", "retention.ms": "3600000"})
        try:
            admin.create_topics([new], request_timeout=15)[PROBE_TOPIC].result(30)
        except Exception as exc:  # created meanwhile by another run: fine
            if "TOPIC_ALREADY_EXISTS" not in str(exc):
                raise
    metadata = cluster.partition_metadata(PROBE_TOPIC)
    producer = Producer(client_log({"log_level": 3, **cluster.client_config(), "acks": "1", "linger.ms": 0,
                                    "enable.idempotence": False}))
    out: dict[str, Any] = {"at": time.time(), "brokers": {}, "not_measured": []}
    for partition, meta in sorted(metadata.items()):
        leader = int(meta.leader)
        if leader < 0:  # offline: its one replica's broker is fenced or stopped, nothing would answer
            out["not_measured"].extend(int(r) for r in meta.replicas if nodes is None or int(r) in nodes)
            continue
        if nodes is not None and leader not in nodes:
            continue
        best: tuple[float, float] | None = None
        for _ in range(samples):
            stamp: list[int] = []
            sent = time.time()
            producer.produce(PROBE_TOPIC, b"probe", partition=partition,
                             on_delivery=lambda err, msg: stamp.append(msg.timestamp()[1]) if err is None else None)
            producer.flush(15)
            back = time.time()
            if not stamp:
                # Not answered in 15 s (a broker fenced since the metadata was read): each further
                # try, and the next broker's flush behind the queued record, would wait its 15 s
                # too (4 minutes in all, seen after a clock step back): give up on this broker
                producer.purge()
                producer.flush(1)
                break
            half = (back - sent) * 500
            offset = stamp[0] - (sent + back) * 500
            if best is None or half < best[1]:
                best = (offset, half)
        if best is None:
            out["not_measured"].append(leader)
            continue
        key = str(leader)
        if key not in out["brokers"] or best[1] < out["brokers"][key]["bound_ms"]:
            out["brokers"][key] = {"offset_ms": round(best[0], 1), "bound_ms": round(best[1] + 1, 1)}
    return out


def shift_and_tolerance(measurements: list[dict[str, Any]]) -> tuple[float, float] | None:
    """From one or more measurements (at the start and the end of a run): the shift that maps the
    brokers' clocks onto this machine's (their median offset) and the tolerance around it (the
    farthest offset from it plus its error bound): every broker at every measured moment lies
    within. None when nothing was measured."""
    points = [(b["offset_ms"], b["bound_ms"]) for m in measurements for b in (m.get("brokers") or {}).values()]
    if not points:
        return None
    offsets = sorted(o for o, _ in points)
    shift = offsets[len(offsets) // 2]
    return shift, max(abs(o - shift) + bound for o, bound in points)
