"""Final reads: every topic the verifier needs, dumped into the run directory as Parquet.

* user topics (input and outputs) in both views: ``committed`` (read_committed: stops at the
  last stable offset) and ``raw`` (read_uncommitted: up to the high watermark). Their
  difference is aborted or undecided data.
* internal topics ``__consumer_offsets`` and ``__transaction_state`` (raw records: key and
  value bytes, decoded later by the verifier), ``__share_group_state`` when it exists.
* per partition: low/high watermark (and so the LSO lag) at the time of the read.

Columns: ``partition, offset, timestamp, key, value`` (binary). File names:
``topics/<topic>.<view>.parquet`` and ``topics/watermarks.json``.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from kchaos.files import atomic_target
from kchaos.protocol.wire import END_OF_LOG_FETCH_WAIT_MS
from kchaos.log import client_log

INTERNAL_TOPICS = ("__consumer_offsets", "__transaction_state", "__share_group_state")
#: dumps read at once: each is mostly waiting on fetches, and each holds its topic in memory
DUMP_THREADS = 3


def _partitions(admin: Any, topic: str) -> list[int]:
    md = admin.list_topics(topic=topic, timeout=15)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        return []
    return sorted(tmd.partitions)


def dump_topic(client: dict[str, Any], admin: Any, topic: str, view: str, out_dir: Path,
               timeout_s: float = 300.0) -> dict[str, Any]:
    """Read ``topic`` from the beginning to its end in ``view`` ("committed" | "raw")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    partitions = _partitions(admin, topic)
    rows: dict[str, list[Any]] = {"partition": [], "offset": [], "timestamp": [], "key": [], "value": []}
    summary: dict[str, Any] = {"topic": topic, "view": view, "partitions": len(partitions), "records": 0}
    if partitions:
        consumer = Consumer(client_log({**client, "log_level": 3, "group.id": f"kchaos-dump-{time.time_ns()}",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "isolation.level": "read_committed" if view == "committed" else "read_uncommitted",
                             "fetch.max.bytes": 8 * 1024 * 1024,
                             # the end of a partition is found by a fetch that returns nothing (the
                             # last records are often transaction markers): the broker holds such a
                             # fetch this long. 500 ms (the default) cost each dump ~1.5 s
                             "fetch.wait.max.ms": END_OF_LOG_FETCH_WAIT_MS}))
        try:
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
            pending = set(partitions)
            end_offsets: dict[str, int] = {}
            deadline = time.monotonic() + timeout_s
            while pending and time.monotonic() < deadline:
                for msg in consumer.consume(2000, 1.0):
                    err = msg.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pending.discard(msg.partition())
                            # where this view ends: the LSO (committed) or the high watermark (raw)
                            end_offsets[str(msg.partition())] = msg.offset()
                        continue
                    rows["partition"].append(msg.partition())
                    rows["offset"].append(msg.offset())
                    rows["timestamp"].append(msg.timestamp()[1])
                    rows["key"].append(msg.key())
                    rows["value"].append(msg.value())
            summary["incomplete_partitions"] = sorted(pending)
            summary["end_offsets"] = end_offsets
        finally:
            consumer.close()
    table = pa.table({
        "partition": pa.array(rows["partition"], pa.int32()), "offset": pa.array(rows["offset"], pa.int64()),
        "timestamp": pa.array(rows["timestamp"], pa.int64()), "key": pa.array(rows["key"], pa.binary()),
        "value": pa.array(rows["value"], pa.binary()),
    })
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{topic}.{view}.parquet"
    with atomic_target(target) as tmp:
        pq.write_table(table, tmp)
    summary["records"] = table.num_rows
    return summary


def stable_offsets(client: dict[str, Any], admin: Any, topics: list[str],
                   only: dict[str, list[int]] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """Per partition (of ``topics``, and the partitions ``only`` names of other topics): the high
    watermark and the last stable offset (where a read_committed reader stops). ``lso < high``
    means an open transaction pins the partition.

    ListOffsets(latest) answers by the asking consumer's isolation level: read_uncommitted gets
    the high watermark, read_committed the LSO.
    """
    readers = {iso: Consumer(client_log({**client, "log_level": 3, "group.id": f"kchaos-lso-{time.time_ns()}",
                                         "isolation.level": iso, "enable.auto.commit": False}))
               for iso in ("read_uncommitted", "read_committed")}
    out: dict[str, dict[str, dict[str, int]]] = {}
    try:
        wanted = [(topic, _partitions(admin, topic)) for topic in topics] + list((only or {}).items())
        for topic, partitions in wanted:
            out[topic] = {}
            for p in partitions:
                tp = TopicPartition(topic, p)
                _, high = watermark_offsets(readers["read_uncommitted"], tp)
                _, lso = watermark_offsets(readers["read_committed"], tp)
                out[topic][str(p)] = {"high": high, "lso": lso}
    finally:
        for reader in readers.values():
            reader.close()
    return out


#: a leader moving (a restarted broker's leaders going back to it) answers a ListOffsets with
#: these for a moment; the query is asked again until its own timeout
MOVING_LEADER = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
                 KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT)


def watermark_offsets(consumer: Any, tp: Any, timeout_s: float = 15.0) -> tuple[int, int]:
    """``consumer.get_watermark_offsets(tp)`` asked again while its leader moves (at most ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = deadline - time.monotonic()
        try:
            return consumer.get_watermark_offsets(tp, timeout=max(1.0, left), cached=False)
        except KafkaException as exc:
            error = exc.args[0]
            if time.monotonic() >= deadline or not (error.retriable() or error.code() in MOVING_LEADER):
                raise
            time.sleep(0.2)


def watermarks(client: dict[str, Any], admin: Any, topics: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    """Low and high watermark per partition, and the committed-view end (the LSO)."""
    consumer = Consumer(client_log({**client, "log_level": 3, "group.id": f"kchaos-wm-{time.time_ns()}",
                                    "isolation.level": "read_committed", "enable.auto.commit": False}))
    out: dict[str, dict[str, dict[str, int]]] = {}
    try:
        for topic in topics:
            out[topic] = {}
            for p in _partitions(admin, topic):
                low, high = watermark_offsets(consumer, TopicPartition(topic, p))
                out[topic][str(p)] = {"low": low, "high": high}
    finally:
        consumer.close()
    return out


def dump_all(client: dict[str, Any], admin: Any, user_topics: list[str], out_dir: Path) -> dict[str, Any]:
    existing = set(admin.list_topics(timeout=15).topics)
    wanted = [(topic, view) for topic in user_topics for view in ("committed", "raw")]
    wanted += [(topic, "raw") for topic in INTERNAL_TOPICS if topic in existing]
    if "__consumer_offsets" in existing:
        # transactional offset commits of aborted transactions are in the raw view only
        wanted.append(("__consumer_offsets", "committed"))
    with ThreadPoolExecutor(DUMP_THREADS, thread_name_prefix="kchaos-dump") as pool:
        summaries = list(pool.map(lambda tv: dump_topic(client, admin, tv[0], tv[1], out_dir), wanted))
    marks = watermarks(client, admin, [t for t in [*user_topics, *INTERNAL_TOPICS] if t in existing])
    (out_dir / "watermarks.json").write_text(json.dumps(marks, indent=2))
    (out_dir / "stable_offsets.json").write_text(json.dumps(stable_offsets(client, admin, user_topics), indent=2))
    return {"topics": summaries, "unreadable_topics": unreadable_topics(admin, [t for t in INTERNAL_TOPICS
                                                                                 if t not in existing])}


def unreadable_topics(admin: Any, topics: list[str]) -> dict[str, str]:
    """Of internal topics the listing did not show, those that exist but this client may not see
    (a cluster's ACLs): topic -> why. A topic that does not exist (no share group ran) is not here."""
    out = {}
    for topic in topics:
        try:
            meta = admin.list_topics(topic=topic, timeout=10).topics.get(topic)
        except Exception as exc:  # the broker answered nothing usable: not known to be missing
            out[topic] = f"its metadata could not be read ({exc})"
            continue
        error = getattr(meta, "error", None)
        if error is None or error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
            continue
        if error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            out[topic] = "the cluster denies this client access to it (TOPIC_AUTHORIZATION_FAILED: an ACL)"
        else:
            out[topic] = f"its metadata says {error.name()}"
    return out
