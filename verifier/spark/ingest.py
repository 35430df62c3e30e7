"""The Spark verifier's input: every topic the checks read, through Spark's Kafka source.

One query per view reads the input and output topics in both views, ``__transaction_state``
(raw) and ``__consumer_offsets`` (committed), over explicitly assigned partitions, into Parquet
under the data directory (``--data-dir`` or ``RUN_DIR/topics-spark``); ``ingest.json`` says where
and how many records each topic had. :class:`TopicSource` says what a check run reads: that
ingest, or the run's client dumps (docs/verifier.md, "what each engine reads").
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kchaos.clusters.client_security import java_client_properties, resolve_env_refs
from kchaos.files import atomic_write, read_json
from kchaos.log import client_log
from kchaos.protocol.wire import END_OF_LOG_FETCH_WAIT_MS

TOPIC_SCHEMA = "partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY"
VIEWS = {"committed": "read_committed", "raw": "read_uncommitted"}
#: the internal topics the checks read, and the view each is read in
INTERNAL_VIEWS = {"__transaction_state": "raw", "__consumer_offsets": "committed"}
SPARK_DIR = "topics-spark"  # in the run directory: ingest.json, and the data when no --data-dir is given


# ---------------------------------------------------------------------------------------------
# Ingest: Kafka source -> Parquet in the data directory


def topic_partitions(bootstrap: str, topics: list[str], client: dict[str, str] | None = None) -> dict[str, list[int]]:
    """Partition numbers of the topics that exist (cluster metadata, on the driver). ``client``: the
    cluster's recorded security settings (clusters/client_security.py), secrets as references."""
    from confluent_kafka.admin import AdminClient

    conf = client_log({**resolve_env_refs(client or {}), "bootstrap.servers": bootstrap, "log_level": 3})
    metadata = AdminClient(conf).list_topics(timeout=30)
    return {t: sorted(metadata.topics[t].partitions) for t in topics
            if t in metadata.topics and metadata.topics[t].error is None}


def data_location(run: Path, data_dir: str | None) -> str:
    """Where the ingest writes: ``data_dir``/<run name> (a URL), else ``RUN_DIR/topics-spark``."""
    if not data_dir:
        return str((run / SPARK_DIR).resolve())
    return f"{data_dir.rstrip('/')}/{run.resolve().name}"


def recorded_ends(final: dict[str, Any] | None, view: str, assigned: dict[str, list[int]]) -> str:
    """Spark's ``endingOffsets`` for one view: where the run's final reads (``final.json``) found
    each partition's end in that view, so both engines judge one snapshot. The internal topics
    keep growing after the final reads (group metadata, other clients' commits: a faultless run's
    ``__consumer_offsets`` had one record more in Spark's read than in the dump), and a read to
    "latest" would compare two moments. A partition the final reads did not end is read to its
    latest offset (-1); with no recorded end at all, "latest"."""
    recorded = {t["topic"]: t.get("end_offsets") or {} for t in (final or {}).get("topics", [])
                if t.get("view") == view}
    ends = {topic: {str(p): int(recorded.get(topic, {}).get(str(p), -1)) for p in ps}
            for topic, ps in assigned.items()}
    if all(end == -1 for by_partition in ends.values() for end in by_partition.values()):
        return "latest"
    return json.dumps(ends, sort_keys=True)


def ingest_topics(spark: Any, bootstrap: str, run: Path, user_topics: list[str], data_dir: str | None = None,
                  client: dict[str, str] | None = None) -> dict[str, Any]:
    """Read every topic the checks need from the beginning to its end with Spark's Kafka source:
    one query per view over explicitly assigned partitions (the user topics in both views, each
    internal topic in its view), written as ``<data>/<view>/topic=<name>/`` Parquet. Ends are
    where the run's final reads ended each partition in that view (:func:`recorded_ends`), else the
    latest offsets in that view (the LSO for read_committed), fixed when the query is planned.
    ``RUN_DIR/topics-spark/ingest.json`` says where the data is and how many records each topic
    had."""
    from pyspark.sql import functions as F

    location = data_location(run, data_dir)
    partitions = topic_partitions(bootstrap, [*user_topics, *INTERNAL_VIEWS], client)
    # a secured cluster: the Java dialect of the same settings, secrets resolved by the JVM itself
    security = {f"kafka.{k}": v for k, v in java_client_properties(client or {}).items()}
    # Spark 4.0's default (admin-based) offset reader plans no offset range for an internal topic,
    # even assigned explicitly: 0 records, silently (measured). The consumer-based reader reads them.
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    summary: dict[str, Any] = {"bootstrap": bootstrap, "data_dir": location, "layout": "view/topic", "topics": {}}
    final = read_json(run / "final.json", None)

    def ingest(view: str) -> tuple[dict[str, int], float]:
        started = time.monotonic()
        assigned = {t: ps for t, ps in partitions.items() if t in user_topics or INTERNAL_VIEWS.get(t) == view}
        ending = recorded_ends(final, view, assigned)
        summary[f"{view}_ends"] = "latest" if ending == "latest" else "final reads"
        (spark.read.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap)
         .options(**security)
         .option("assign", json.dumps(assigned))
         .option("startingOffsets", "earliest").option("endingOffsets", ending)
         .option("kafka.isolation.level", VIEWS[view])
         # transactional topics have offset gaps (markers, aborted records in the committed
         # view) and internal ones are compacted; neither is data loss
         .option("failOnDataLoss", "false")
         .option("kafkaConsumer.pollTimeoutMs", "30000")
         # each task reads its partition up to a fixed end and then asks once more, at the end of
         # the log (the records before the end may be transaction markers): the broker holds that
         # fetch for fetch.max.wait.ms (500 ms by default) for data that never comes. 21 tasks on
         # 2 cores paid it in turn: the default run's ingest 16.2 s -> 8.2 s (docs/benchmarks.md)
         .option("kafka.fetch.max.wait.ms", str(END_OF_LOG_FETCH_WAIT_MS))
         .load()
         .select("topic", F.col("partition").cast("int"), "offset", F.unix_millis(F.col("timestamp")).alias("timestamp"),
                 "key", "value")
         .write.mode("overwrite").partitionBy("topic").parquet(f"{location}/{view}"))
        # counted from the files written (Parquet footers), not by reading Kafka again
        counts = {r["topic"]: r["count"] for r in
                  spark.read.parquet(f"{location}/{view}").groupBy("topic").count().collect()}
        return {topic: counts.get(topic, 0) for topic in assigned}, round(time.monotonic() - started, 2)

    # the two views' queries at once: each is mostly the driver planning it and the Kafka
    # source's consumers waiting on fetches, which overlap (docs/benchmarks.md, 2026-11-25)
    with ThreadPoolExecutor(len(VIEWS), thread_name_prefix="kchaos-ingest") as pool:
        for view, (counts, seconds) in zip(VIEWS, pool.map(ingest, VIEWS)):
            for topic, records in counts.items():
                summary["topics"][f"{topic}.{view}"] = {"records": records}
            summary[f"{view}_seconds"] = seconds
    local = run / SPARK_DIR
    local.mkdir(parents=True, exist_ok=True)
    atomic_write(local / "ingest.json", json.dumps(summary, indent=2))
    return summary


class TopicSource:
    """Where a run's topics are read from: the Spark ingest's data directory (``ingest.json``
    says where and which topics had records), or the client dumps in ``RUN_DIR/topics``.

    ``prefer_ingest``: the job has just read the live cluster through the Kafka source, so it
    checks that. Otherwise (``kchaos analyze`` of a stored run) the client dumps are the run's
    record, read by the reference checker too: both engines then judge the same evidence, and an
    edit of it (a corruption, a partial copy) is judged alike. The ingest is read when the run
    kept no dumps (a distributed run's data directory)."""

    def __init__(self, run: Path, prefer_ingest: bool = False):
        ingest = read_json(run / SPARK_DIR / "ingest.json", None)
        if ingest is not None and "layout" not in ingest:
            ingest = None  # an ingest older than the internal topics' (user topics only): the dumps have all
        if ingest is not None and not prefer_ingest and (run / "topics" / "__transaction_state.raw.parquet").exists():
            ingest = None  # the recorded dumps are there: the same evidence as the reference's
        self.name = "spark-kafka-source" if ingest is not None else "client-dump"
        self.ingest = ingest or {}
        self.location = self.ingest.get("data_dir") or str(run / "topics")

    def has(self, topic: str, view: str) -> bool:
        if self.name == "client-dump":
            return Path(self.location, f"{topic}.{view}.parquet").exists()
        return f"{topic}.{view}" in self.ingest["topics"]

    def read(self, spark: Any, topic: str, view: str) -> Any:
        if self.name == "client-dump":
            path = f"{self.location}/{topic}.{view}.parquet"
            if not Path(path).exists():
                raise FileNotFoundError(f"{path} is missing: the run's final reads did not complete")
            if topic.startswith("_"):
                # Spark's file listing skips names starting with "_" (Hadoop's hidden files): an
                # internal topic's dump is handed over from the driver, as small as its topic
                import pyarrow.parquet as pq

                return spark.createDataFrame(pq.read_table(path), TOPIC_SCHEMA)
            return spark.read.schema(TOPIC_SCHEMA).parquet(path)
        if f"{topic}.{view}" not in self.ingest["topics"]:
            raise FileNotFoundError(f"{topic} ({view}) was not ingested: see {self.location}")
        if not self.ingest["topics"][f"{topic}.{view}"]["records"]:  # no directory is written for it
            return spark.createDataFrame([], TOPIC_SCHEMA)
        return spark.read.schema(TOPIC_SCHEMA).parquet(f"{self.location}/{view}/topic={topic}")


