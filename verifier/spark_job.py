"""The verifier: a PySpark job that proves (or refutes) exactly-once for one run directory.

    python -m kchaos.verifier.spark_job RUN_DIR [--master local[2] | spark://host:port]
                                         [--bootstrap HOST:PORT] [--data-dir URL] [--out FILE]

Inputs
  * every topic the checks read, through **Spark's Kafka source** when ``--bootstrap`` names a
    live cluster: the input and output topics in both views (read_committed and
    read_uncommitted), ``__transaction_state`` (raw) and ``__consumer_offsets`` (committed: an
    aborted transactional offset commit is not one), each topic's partitions assigned
    explicitly (the source does not subscribe to internal topics). One query per view writes
    Parquet partitioned by topic under the **data directory**: ``--data-dir`` (any
    Hadoop-compatible URL the executors reach: ``hdfs://``, ``s3a://``, a shared ``file:``
    mount; the run's name is appended) or ``RUN_DIR/topics-spark``. ``RUN_DIR/topics-spark/
    ingest.json`` records where, so ``analyze`` re-checks without a cluster. Without an ingest
    the client dumps in ``RUN_DIR/topics/`` are read (then the executors must see that path);
  * the internal topics are decoded by the executors (``mapInArrow`` over the project's
    decoders, verifier/decoders.py): no single-process step grows with the cluster;
  * the client history (paired operations), the group's final offsets and the broker-side
    state after heal (``final.json``), read by the driver and handed to Spark as DataFrames.

Each check is a Spark query; the evidence of at most ``MAX_CASES`` cases per anomaly is
collected to the driver and completed from the history (transactional.id, producer id and epoch,
history operation, faults active then). The anomaly names and evidence match the single-process
checker (verifier/pychecker.py), which ``kchaos run`` runs beside it as a cross-check.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kchaos.files import atomic_write
from kchaos.verifier import evidence
from kchaos.verifier.acknowledged import acknowledged_inputs
from kchaos.verifier.checks import explain, progress_result, result, run_checks
from kchaos.verifier.coordinator_log import COORDINATOR_TXN_SCHEMA, CoordinatorTxn
from kchaos.verifier.driver_checks import (check_lost_offset_commits, check_offsets_backwards,  # noqa: F401 (registry)
                                           check_split_transactions)
from kchaos.verifier.internal_topics import (OFFSET_COMMIT_SCHEMA, TXN_LOG_SCHEMA, coordinator_transactions_of,
                                             offset_commit_batches, transaction_log_batches)
from kchaos.verifier.late_requests import late_request_facts, late_requests, read_message_events
from kchaos.verifier.model import (LINEAGE_FIELDS, MAX_CASES, OPEN_TXN_STATES, RECORD_COLUMNS, TXN_NEXT,
                                   HistoryIndex, commits_by_client_tv, hanging_cases, in_scope, pipeline_txids,
                                   read_json, read_ops, run_seed, zombie_successor)
from kchaos.verifier.results import VALID, CheckResult, Results
from kchaos.wire import END_OF_LOG_FETCH_WAIT_MS  # a global here: bench/ingest_fetch_wait.py varies it
from kchaos.workloads.lineage import IdLocator

TOPIC_SCHEMA = "partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY"
LINEAGE_SCHEMA = ("in_id STRING, in_topic STRING, in_partition INT, in_offset BIGINT, slot INT, slots INT, "
                  "worker STRING, incarnation INT, txid STRING, txn_seq BIGINT")
VIEWS = {"committed": "read_committed", "raw": "read_uncommitted"}
#: the internal topics the checks read, and the view each is read in
INTERNAL_VIEWS = {"__transaction_state": "raw", "__consumer_offsets": "committed"}
#: checks (and the facts) submitted to Spark at once. At a small run's size a query is mostly the
#: driver planning and compiling it, one thread at a time per query, while the executors idle;
#: queries from several threads overlap that (docs/benchmarks.md, 2026-11-25)
CHECK_THREADS = 3
SPARK_DIR = "topics-spark"  # in the run directory: ingest.json, and the data when no --data-dir is given


# ---------------------------------------------------------------------------------------------
# Ingest: Kafka source -> Parquet in the data directory


def topic_partitions(bootstrap: str, topics: list[str]) -> dict[str, list[int]]:
    """Partition numbers of the topics that exist (cluster metadata, on the driver)."""
    from confluent_kafka.admin import AdminClient

    metadata = AdminClient({"bootstrap.servers": bootstrap, "log_level": 3}).list_topics(timeout=30)
    return {t: sorted(metadata.topics[t].partitions) for t in topics
            if t in metadata.topics and metadata.topics[t].error is None}


def data_location(run: Path, data_dir: str | None) -> str:
    """Where the ingest writes: ``data_dir``/<run name> (a URL), else ``RUN_DIR/topics-spark``."""
    if not data_dir:
        return str((run / SPARK_DIR).resolve())
    return f"{data_dir.rstrip('/')}/{run.resolve().name}"


def ingest_topics(spark: Any, bootstrap: str, run: Path, user_topics: list[str], data_dir: str | None = None) -> dict[str, Any]:
    """Read every topic the checks need from the beginning to its end with Spark's Kafka source:
    one query per view over explicitly assigned partitions (the user topics in both views, each
    internal topic in its view), written as ``<data>/<view>/topic=<name>/`` Parquet. Ends are the
    latest offsets *in that view* (the LSO for read_committed), fixed when the query is planned.
    ``RUN_DIR/topics-spark/ingest.json`` says where the data is and how many records each topic
    had."""
    from pyspark.sql import functions as F

    location = data_location(run, data_dir)
    partitions = topic_partitions(bootstrap, [*user_topics, *INTERNAL_VIEWS])
    # Spark 4.0's default (admin-based) offset reader plans no offset range for an internal topic,
    # even assigned explicitly: 0 records, silently (measured). The consumer-based reader reads them.
    spark.conf.set("spark.sql.streaming.kafka.useDeprecatedOffsetFetching", "true")
    summary: dict[str, Any] = {"bootstrap": bootstrap, "data_dir": location, "layout": "view/topic", "topics": {}}

    def ingest(view: str) -> tuple[dict[str, int], float]:
        started = time.monotonic()
        assigned = {t: ps for t, ps in partitions.items() if t in user_topics or INTERNAL_VIEWS.get(t) == view}
        (spark.read.format("kafka")
         .option("kafka.bootstrap.servers", bootstrap)
         .option("assign", json.dumps(assigned))
         .option("startingOffsets", "earliest").option("endingOffsets", "latest")
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


def history_tables(spark: Any, run: Path, history: HistoryIndex) -> dict[str, Any]:
    """The history's transactions and processed inputs, and the group's final offsets, as
    DataFrames (built on the driver, which read them; shipped with the query, not as files)."""
    import pyarrow as pa

    keys = sorted(set(history.txn_ops) | set(history.txn_outcome))
    ops = [history.txn_ops.get(k) or {} for k in keys]
    transactions = pa.table({
        "process": pa.array([k[0] for k in keys], pa.string()), "txn_seq": pa.array([k[1] for k in keys], pa.int64()),
        "txid": pa.array([op.get("txid") for op in ops], pa.string()),
        "outcome": pa.array([history.txn_outcome.get(k, "unknown") for k in keys], pa.string()),
        "expected_outputs": pa.array([(op.get("value") or {}).get("outputs") for op in ops], pa.int64())})
    inputs = pa.table({"partition": pa.array([p for p, _ in history.input_ops], pa.int32()),
                       "offset": pa.array([o for _, o in history.input_ops], pa.int64())})
    final = read_json(run / "final.json", {})
    offsets = {int(p): o for p, o in (final.get("group_offsets") or {}).items()}
    final_offsets = pa.table({"partition": pa.array(list(offsets), pa.int32()),
                              "final_offset": pa.array(list(offsets.values()), pa.int64())})
    return {name: spark.createDataFrame(table) for name, table in
            (("transactions", transactions), ("input_ops", inputs), ("final_offsets", final_offsets))}


# ---------------------------------------------------------------------------------------------
# Loading


def raw_only(raw: Any, committed: Any, where: tuple[str, ...] = ("topic", "partition"), offset: str = "offset") -> Any:
    """The raw view's records that read_committed hides (aborted or undecided transactions).

    The raw view is the committed view plus those: a record at the same topic, partition and
    offset is the same record in both, so only the raw-only records need parsing, not the whole
    raw view again (parsing and caching a view is the largest single cost at scale). A partition
    whose two views hold as many records with the same sum of offsets holds the same records (the
    committed view's are a subset of the raw view's): only the partitions that differ are joined
    on their coordinates, so a clean run pays two small aggregates and no join. ``where`` and
    ``offset`` name the columns (the input views call them ``p`` and ``o``)."""
    from pyspark.sql import functions as F

    keys = list(where)

    def shape(df: Any) -> Any:
        return df.groupBy(*keys).agg(F.count("*").alias("n"), F.sum(offset).alias("offsets"))

    differing = shape(raw).join(shape(committed), [*keys, "n", "offsets"], "left_anti").select(*keys).collect()
    if not differing:
        return raw.filter(F.lit(False))
    wanted = F.broadcast(raw.sparkSession.createDataFrame(differing, raw.select(*keys).schema))
    coordinates = [*keys, offset]
    return (raw.join(wanted, keys, "left_semi")
            .join(committed.join(wanted, keys, "left_semi").select(*coordinates), coordinates, "left_anti"))


class BuiltOnce:
    """Values built at most once per name, however many threads ask at once. Each name has its
    own lock, so building one value may ask for another (the checks' shared intermediate results
    depend on each other, never in a cycle)."""

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def get(self, name: str, build: Any) -> Any:
        with self._lock:
            lock = self._locks.setdefault(name, threading.Lock())
        with lock:
            if name not in self._values:
                self._values[name] = build()  # a build that raises leaves the name unbuilt
            return self._values[name]


class SparkRun:
    """A run directory as Spark DataFrames, plus the small driver-side facts."""

    def __init__(self, spark: Any, run: Path, ops: list[dict[str, Any]] | None = None, prefer_ingest: bool = False):
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.spark, self.run, self.F = spark, run, F
        self._shared = BuiltOnce()
        campaign = self.campaign = json.loads((run / "campaign.json").read_text())
        self.workload = campaign["workload"]
        self.final = json.loads((run / "final.json").read_text())
        self.final_offsets = {int(p): o for p, o in (self.final.get("group_offsets") or {}).items()}
        self.history = HistoryIndex(read_ops(run) if ops is None else ops)
        # the driver-side evidence the white-box checks and the evidence rules read (verifier/evidence.py)
        self.compaction = evidence.compaction_of(run, self.final)
        self.acknowledged = acknowledged_inputs(self.history.ops, run_seed(run, campaign))
        self.coordinator_facts: dict[str, Any] | None = None
        #: where loading spends its time (seconds per phase; in results.spark.timings)
        self.timings: dict[str, float] = {}
        started = time.monotonic()

        def lap(phase: str) -> None:
            nonlocal started
            now = time.monotonic()
            self.timings[phase] = round(now - started, 2)
            started = now

        self.topics = TopicSource(run, prefer_ingest)
        self.source = self.topics.name

        def topic(name: str, view: str) -> Any:
            return self.topics.read(spark, name, view)

        input_topic = self.workload["input_topic"]
        self.inputs = {view: topic(input_topic, view).select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                                              F.col("key").cast("string").alias("in_id"))
                       .persist(StorageLevel.MEMORY_AND_DISK) for view in VIEWS}
        #: the committed input log as read (identity lineage sets ambiguous ids aside from inputs;
        #: what the seeder acknowledged is checked against all of it)
        self.input_log = self.inputs["committed"]
        self.identity = (IdLocator.parse(self.workload.get("lineage_id") or "key")
                         if self.workload.get("lineage") == "id" else None)
        self.ambiguous_inputs = 0
        self.ambiguous_ids = None
        if self.identity is not None:  # model.identity_positions, as joins
            ambiguous = self.ambiguous_ids = (self.inputs["committed"].groupBy("in_id").count().filter("count > 1")
                                              .select("in_id"))
            self.ambiguous_inputs = self.inputs["committed"].join(ambiguous, "in_id", "left_semi").count()
            self.inputs = {view: df.join(ambiguous, "in_id", "left_anti").persist(StorageLevel.MEMORY_AND_DISK)
                           for view, df in self.inputs.items()}
            never_committed = (self.inputs["raw"].join(self.inputs["committed"].select("in_id"), "in_id", "left_anti")
                               .groupBy("in_id").agg(F.min(F.struct("p", "o")).alias("at"))
                               .select("in_id", "at.p", "at.o"))
            self.id_positions = self.inputs["committed"].select("in_id", "p", "o").unionByName(never_committed)
        lap("load_inputs_s")
        self.outputs: dict[str, Any] = {}
        self.foreign_outputs: dict[str, int] = {}
        lineage_ok = F.lit(True)
        for field in LINEAGE_FIELDS:
            lineage_ok = lineage_ok & F.col(f"l.{field}").isNotNull()

        def unparsed(view: str) -> Any:
            union = None
            for slot, t in enumerate(self.workload["output_topics"]):
                part = topic(t, view).withColumn("topic", F.lit(t)).withColumn("slot_", F.lit(slot))
                union = part if union is None else union.unionByName(part)
            return union

        def parse(union: Any) -> Any:
            if self.identity is None:
                parsed = (union.withColumn("l", F.from_json(F.col("value").cast("string"), LINEAGE_SCHEMA))
                          .withColumn("lineage_ok", F.coalesce(lineage_ok, F.lit(False))))
            else:
                parsed = self.identity_lineage(union, input_topic)
            # One cache per view, of only the columns the checks read (no key/value bytes): parsing
            # JSON dominates, so it must happen once. The cache sits below the lineage filter on
            # purpose: a filter on the parsed fields would be pushed under the parse and repeat
            # from_json once per field it tests (measured: twice the time at 1M outputs).
            return (parsed.select("topic", "partition", "offset", "l.*", "lineage_ok")
                    .withColumn("process", F.concat_ws(".", "worker", F.col("incarnation").cast("string")))
                    .persist(StorageLevel.MEMORY_AND_DISK))

        def timed(phase: str, job: Any) -> Any:
            def run() -> Any:
                t = time.monotonic()
                try:
                    return job()
                finally:
                    self.timings[phase] = round(time.monotonic() - t, 2)
            return run

        committed_unparsed = unparsed("committed")
        views = {"committed": parse(committed_unparsed)}

        def counted(view: Any) -> tuple[int, int]:
            """Builds the view's cache; its records with lineage and without, in one job."""
            row = view.agg(F.count_if(F.col("lineage_ok")).alias("ok"), F.count_if(~F.col("lineage_ok")).alias("foreign")).first()
            return row["ok"], row["foreign"]

        def raw_only_view() -> tuple[int, int]:
            views["raw_only"] = parse(raw_only(unparsed("raw"), committed_unparsed))
            return counted(views["raw_only"])

        # the internal topics, decoded where they are read (the executors): a client dump of
        # them, where it exists, is only the cross-check's
        self.txn_log = None
        if self.topics.has("__transaction_state", "raw"):
            self.txn_log = (topic("__transaction_state", "raw")
                            .mapInArrow(transaction_log_batches, TXN_LOG_SCHEMA).persist(StorageLevel.MEMORY_AND_DISK))
        #: records each cached table holds (counted while its cache is built: facts reads these)
        self.counts: dict[str, int | None] = {}

        def count_into(name: str, df: Any) -> Any:
            def job() -> None:
                self.counts[name] = df.count() if df is not None else None
            return job

        def offset_log() -> list[dict[str, Any]] | None:
            if not self.topics.has("__consumer_offsets", "committed"):
                return None
            decode = functools.partial(offset_commit_batches, group=self.workload.get("group_id"), topic=input_topic)
            # the group's commits of the input topic: one per transaction and partition, few
            # enough for the driver (offsets-ahead cites the commit that passed an input)
            return [r.asDict() for r in topic("__consumer_offsets", "committed")
                    .mapInArrow(decode, OFFSET_COMMIT_SCHEMA).orderBy("log_partition", "log_offset").collect()]

        # every cache is built (and counted) and the offset commits decoded at once: small runs
        # spend these jobs mostly planning them, and the two decoders (Python workers) start
        # beside the rest rather than in the first check that reads them
        with ThreadPoolExecutor(3, thread_name_prefix="kchaos-load") as pool:
            jobs = [pool.submit(timed("load_committed_outputs_s", lambda: counted(views["committed"]))),
                    pool.submit(timed("load_raw_only_outputs_s", raw_only_view)),
                    pool.submit(timed("load_offset_commits_s", offset_log)),
                    pool.submit(timed("load_transaction_log_s", count_into("transaction_log", self.txn_log))),
                    *[pool.submit(count_into(f"inputs_{view}", df)) for view, df in self.inputs.items()]]
            (ok_committed, foreign_committed), (ok_raw_only, foreign_raw_only), self.offset_log, *_ = (
                job.result() for job in jobs)
        self.foreign_outputs = {"committed": foreign_committed, "raw": foreign_committed + foreign_raw_only}
        self.counts.update(outputs_committed=ok_committed, outputs_raw=ok_committed + ok_raw_only)
        #: identity lineage: committed outputs of an input id committed twice (set aside on purpose)
        self.set_aside_outputs = 0
        if self.ambiguous_inputs and foreign_committed:
            self.set_aside_outputs = (views["committed"].filter(~F.col("lineage_ok")).select("in_id")
                                      .join(self.ambiguous_ids, "in_id", "left_semi").count())
        self.outputs = {view: flat.filter(F.col("lineage_ok")).drop("lineage_ok") for view, flat in views.items()}
        #: outputs in the raw view only (read_committed hides them)
        self.raw_only_outputs = self.outputs.pop("raw_only")
        self.outputs["raw"] = self.outputs["committed"].unionByName(self.raw_only_outputs)
        lap("load_outputs_s")
        tables = history_tables(spark, run, self.history)
        self.transactions, self.input_ops, self.final_offsets_df = (
            tables["transactions"], tables["input_ops"], tables["final_offsets"])
        lap("load_history_s")
        self.k = self.workload["outputs_per_input"]
        self.exactly_once = self.workload["delivery"] == "exactly-once"

    # what evidence.gaps and the white-box checks read, under the names the Python reference uses
    @property
    def txn_log_records(self) -> int | None:
        return self.counts.get("transaction_log")

    @property
    def foreign_committed(self) -> int:
        return self.foreign_outputs["committed"] - self.set_aside_outputs

    @property
    def outputs_committed_count(self) -> int:
        return self.counts["outputs_committed"]

    @property
    def inputs_committed_count(self) -> int | None:
        return self.counts.get("inputs_committed")

    @property
    def output_processes(self) -> set[str] | None:
        """The processes committed outputs name (full lineage): one distinct query, built once."""
        if self.identity is not None:
            return None
        return self.shared("output_processes", lambda: {
            r["process"] for r in self.outputs["committed"].filter(self.F.col("worker").isNotNull())
            .select("process").distinct().collect()})

    def coordinator_transactions(self) -> list[CoordinatorTxn]:
        """The transaction log segmented on the executors, one transactional id at a time
        (internal_topics.coordinator_transactions_of); a summary row per coordinator transaction."""
        if self.txn_log is None:
            return []
        rows = (self.txn_log.groupBy("transactional_id")
                .applyInPandas(coordinator_transactions_of, COORDINATOR_TXN_SCHEMA).collect())
        return [CoordinatorTxn.from_row(r) for r in rows]

    def late_requests(self) -> list[dict[str, Any]] | None:
        """The message proxy's late or duplicated requests (late_requests.py), built once."""
        def build() -> list[dict[str, Any]] | None:
            events = read_message_events(self.run)
            return late_requests(events, _txn_log_entries(self, events), self.history.ops) if events else None
        return self.shared("late_requests", build)

    def identity_lineage(self, union: Any, input_topic: str) -> Any:
        """Identity lineage (pychecker._identity): each output's id, from where the locator says,
        joined to its input's position; the slot is the topic's index (``slot_``); no transaction named."""
        F, loc = self.F, self.identity
        value = F.col("value").cast("string")
        in_id = {"key": F.col("key").cast("string"), "value": value}.get(loc.kind)
        if loc.kind == "json":
            in_id = F.get_json_object(value, loc.json_path())
        elif loc.kind == "regex":
            import re

            in_id = F.regexp_extract(value, loc.arg, 1 if re.compile(loc.arg).groups else 0)
            in_id = F.when(value.rlike(loc.arg), in_id)
        union = union.withColumn("in_id", in_id)
        joined = union.join(self.id_positions, "in_id", "left")
        nothing = {"worker": "string", "incarnation": "int", "txid": "string", "txn_seq": "bigint"}
        lineage = F.struct(F.col("in_id"), F.lit(input_topic).alias("in_topic"), F.col("p").cast("int").alias("in_partition"),
                           F.col("o").alias("in_offset"), F.col("slot_").cast("int").alias("slot"),
                           F.lit(self.workload["outputs_per_input"]).cast("int").alias("slots"),
                           *[F.lit(None).cast(t).alias(n) for n, t in nothing.items()])
        return (joined.withColumn("l", lineage).withColumn("lineage_ok", F.col("p").isNotNull())
                .select("topic", "partition", "offset", "l", "lineage_ok"))

    # evidence ---------------------------------------------------------------------------------

    def shared(self, name: str, build: Any) -> Any:
        """An intermediate result several checks read (``build()``, persisted by its builder),
        built once even when the checks run concurrently (checks.run_checks with a pool)."""
        return self._shared.get(name, build)

    def record(self, row: Any) -> dict[str, Any]:
        d = row.asDict(recursive=True) if hasattr(row, "asDict") else dict(row)
        return {k: d.get(k) for k in RECORD_COLUMNS}

    def case(self, explanation: str, records: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        txns = sorted({(f"{r['worker']}.{r['incarnation']}", r["txn_seq"]) for r in records if r.get("worker")})
        return {"explanation": explanation, "records": records,
                "transactions": [self.history.txn_evidence(k) for k in txns], **extra}

    def record_struct(self) -> Any:
        return self.F.struct(*[self.F.col(c) for c in RECORD_COLUMNS])


def _first_cases(df: Any, *order: str) -> tuple[list[Any], int]:
    """At most MAX_CASES rows in ``order`` and the exact total; counts only when there are more
    (a clean run costs one Spark job per check, not two)."""
    rows = df.orderBy(*order).limit(MAX_CASES + 1).collect()
    return rows[:MAX_CASES], (len(rows) if len(rows) <= MAX_CASES else df.count())


def _records_of(d: SparkRun, df: Any, cases: list[Any], key: list[str], limit: int) -> dict[tuple, list[Any]]:
    """The evidence records (first ``limit`` in record order) of the few cases found, by key.
    Checks find cases on counts alone and fetch records only for the cases they report:
    collecting every group's records would cost a clean run the most."""
    if not cases:
        return {}
    F = d.F
    wanted = d.spark.createDataFrame([tuple(r[c] for c in key) for r in cases], df.select(*key).schema)
    rows = (df.join(F.broadcast(wanted), key, "left_semi").groupBy(*key)
            .agg(F.slice(F.sort_array(F.collect_list(d.record_struct())), 1, limit).alias("records")).collect())
    return {tuple(r[c] for c in key): list(r["records"]) for r in rows}


def _per_input(d: SparkRun) -> Any:
    """Committed outputs per input (persisted; duplicate, torn-transaction and lost-input read it):
    how many (``n``) and how many distinct bits the slots set in a 64-bit mask (``slots_seen``).
    Fixed-width aggregates in one shuffle, where grouping per slot or collecting slot sets costs a
    pass each. A slot repeated makes ``n`` exceed the bits, a slot missing leaves fewer bits than
    K; slots sharing a bit (equal modulo 64) only lower the bits, so every duplicate and torn
    input is flagged. Only the flagged inputs (none in a clean run) are grouped again, exactly."""
    F = d.F
    return d.shared("inputs_seen", lambda: (
        d.outputs["committed"].groupBy("in_partition", "in_offset")
        .agg(F.count("*").alias("n"), F.bit_or(F.expr("shiftleft(1L, slot)")).alias("mask"))
        .withColumn("slots_seen", F.bit_count("mask")).persist()))


def _outputs_of_flagged_inputs(d: SparkRun, flagged: Any) -> Any:
    """The committed outputs of the inputs ``flagged`` selects from _per_input (none: nothing read)."""
    key = ["in_partition", "in_offset"]
    inputs = _per_input(d).filter(flagged).select(*key)
    if inputs.isEmpty():
        return d.outputs["committed"].filter(d.F.lit(False))
    return d.outputs["committed"].join(inputs, key, "left_semi")


def _duplicate_keys(d: SparkRun) -> Any:
    """(input, slot) with more than one committed output, and how many (persisted: duplicate and
    nonmonotonic both read it)."""
    F = d.F
    return d.shared("duplicate_keys", lambda: (
        _outputs_of_flagged_inputs(d, F.col("n") > F.col("slots_seen")).groupBy("in_partition", "in_offset", "slot")
        .agg(F.count("*").alias("n")).filter("n > 1").persist()))


def _seen_per_transaction(d: SparkRun) -> Any:
    """Committed outputs per transaction (process, txn_seq): torn and lost-write both read it."""
    return d.shared("seen_per_transaction", lambda: (
        d.outputs["committed"].groupBy("process", "txn_seq").agg(d.F.count("*").alias("seen")).persist()))


def _aborted_inputs(d: SparkRun) -> Any:
    """Inputs in the raw view only (aborted or undecided input transactions)."""
    return d.shared("aborted_inputs", lambda: raw_only(d.inputs["raw"], d.inputs["committed"], ("p",), "o").persist())


# ---------------------------------------------------------------------------------------------
# Checks (each returns a CheckResult; looked up by name at call time)


def check_duplicates(d: SparkRun) -> CheckResult:
    key = ["in_partition", "in_offset", "slot"]
    rows, total = _first_cases(_duplicate_keys(d), *key)
    records = _records_of(d, d.outputs["committed"], rows, key, 10)
    cases = [d.case(explain("duplicate", p=r["in_partition"], o=r["in_offset"], slot=r["slot"], n=r["n"]),
                    [d.record(x) for x in records.get(tuple(r[c] for c in key), [])]) for r in rows]
    return result("duplicate", cases, total)


def _unexplained(d: SparkRun) -> Any:
    """Committed inputs below the group's final offset with no committed output."""
    F = d.F

    def build() -> Any:
        produced = _per_input(d).select(F.col("in_partition").alias("p"), F.col("in_offset").alias("o"))
        fo = d.final_offsets_df.withColumnRenamed("partition", "p")
        unexplained = (d.inputs["committed"].join(F.broadcast(fo), "p")
                       .filter(F.col("o") < F.col("final_offset"))
                       .join(produced, ["p", "o"], "left_anti")
                       .persist())
        if unexplained.isEmpty():  # the usual case: no need to join the history's inputs
            return unexplained.withColumn("processed", F.lit(None).cast("boolean"))
        return unexplained.join(d.input_ops.select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                                   F.lit(True).alias("processed")), ["p", "o"], "left").persist()

    return d.shared("unexplained", build)


def check_lost_input(d: SparkRun) -> CheckResult:
    F = d.F
    lost = _unexplained(d)
    if d.history.has_history:
        lost = lost.filter(F.col("processed").isNotNull())
    rows, total = _first_cases(lost, "p", "o")
    cases = []
    for r in rows:
        ops = d.history.input_ops.get((r["p"], r["o"]), [])
        cases.append({"explanation": explain("lost-input", in_id=r["in_id"], topic=d.workload["input_topic"], p=r["p"],
                                             o=r["o"], final=d.final_offsets.get(r["p"])),
                      "input": {"partition": r["p"], "offset": r["o"], "id": r["in_id"]},
                      "transactions": [d.history.txn_evidence((op["process"], op["value"]["txn_seq"])) for op in ops]})
    return result("lost-input", cases, total)


def check_offsets_ahead(d: SparkRun) -> CheckResult:
    F = d.F
    ahead = _unexplained(d).filter(F.col("processed").isNull())
    rows, total = _first_cases(ahead, "p", "o")
    cases = []
    for r in rows:
        p, o = r["p"], r["o"]
        commit = next((c for c in d.offset_log or [] if c["partition"] == p and c["offset"] > o), None)
        cases.append({"explanation": explain("offsets-ahead", topic=d.workload["input_topic"], p=p, in_id=r["in_id"], o=o),
                      "input": {"partition": p, "offset": o, "id": r["in_id"]},
                      "offset_commit": commit or {"partition": p, "offset": d.final_offsets.get(p),
                                                  "source": "final group offsets"}})
    return result("offsets-ahead", cases, total)


def check_torn(d: SparkRun) -> CheckResult:
    F = d.F
    committed = d.outputs["committed"]
    key = ["in_partition", "in_offset"]
    flagged = F.col("slots_seen") < d.k
    partial = (_outputs_of_flagged_inputs(d, flagged).groupBy(*key).agg(F.sort_array(F.collect_set("slot")).alias("have"))
               .filter(F.size("have") < d.k))
    rows, total = _first_cases(partial, *key)
    records = _records_of(d, committed, rows, key, 20)
    cases = [d.case(explain("torn-transaction.slots", p=r["in_partition"], o=r["in_offset"], have=list(r["have"]), k=d.k),
                    [d.record(x) for x in records.get((r["in_partition"], r["in_offset"]), [])],
                    missing_slots=sorted(set(range(d.k)) - set(r["have"])))
             for r in rows]
    if d.exactly_once and d.identity is None:
        key = ["process", "txn_seq"]
        # written (raw view) = seen (committed) + hidden (raw only): torn when some but not all
        # of a transaction's records are visible
        torn = (d.raw_only_outputs.groupBy(*key).agg(F.count("*").alias("hidden")).join(_seen_per_transaction(d), key)
                .withColumn("written", F.col("seen") + F.col("hidden")).filter(F.col("seen") > 0))
        rows, more = _first_cases(torn, *key)
        total += more
        hidden = _records_of(d, d.raw_only_outputs, rows, key, 20)
        for r in rows:
            cases.append(d.case(explain("torn-transaction.hidden", seq=r["txn_seq"], process=r["process"], seen=r["seen"],
                                        written=r["written"]),
                                [d.record(x) for x in hidden.get((r["process"], r["txn_seq"]), [])]))
    return result("torn-transaction", cases, total)


def check_aborted_read(d: SparkRun) -> CheckResult:
    F = d.F
    committed = d.outputs["committed"]
    rows, total = [], 0
    kinds = {"aborted": "aborted-read.transaction", "commit-failed": "aborted-read.failed-commit"}
    # the history says on the driver whether any transaction aborted or failed to commit: none, no query
    if set(kinds) & set(d.history.txn_outcome.values()):
        aborted = d.transactions.filter(F.col("outcome").isin(*kinds)).select("process", "txn_seq", "outcome")
        rows, total = _first_cases(committed.join(F.broadcast(aborted), ["process", "txn_seq"]),
                                   "topic", "partition", "offset")
    cases = [d.case(explain(kinds[r["outcome"]], seq=r["txn_seq"], process=r["process"]), [d.record(r)]) for r in rows]
    ack = d.acknowledged
    acked_aborted = (d.spark.createDataFrame([(p, o, i) for (p, o), i in sorted(ack.aborted.items())],
                                             "p INT, o BIGINT, in_id STRING") if ack.aborted else None)
    aborted_inputs = _aborted_inputs(d)
    if acked_aborted is not None:  # the seeder's record wins: a position it aborted is aborted
        aborted_inputs = (acked_aborted.unionByName(aborted_inputs.join(acked_aborted.select("p", "o"), ["p", "o"],
                                                                        "left_anti")))
    if not aborted_inputs.isEmpty():
        of_aborted_input = committed.join(aborted_inputs.withColumnRenamed("p", "in_partition")
                                          .withColumnRenamed("o", "in_offset")
                                          .withColumnRenamed("in_id", "aborted_input_id"), ["in_partition", "in_offset"])
        rows, more = _first_cases(of_aborted_input, "topic", "partition", "offset")
        total += more
        for r in rows:
            cases.append(d.case(explain("aborted-read.input", p=r["in_partition"], o=r["in_offset"]), [d.record(r)],
                                input={"partition": r["in_partition"], "offset": r["in_offset"],
                                       "id": r["aborted_input_id"]}))
    topic = d.workload["input_topic"]
    if acked_aborted is not None:
        visible = acked_aborted.join(d.input_log.withColumnRenamed("in_id", "visible_id"), ["p", "o"])
        rows, more = _first_cases(visible, "p", "o")
        total += more
        cases += [{"explanation": explain("aborted-read.seeder-input", in_id=r["in_id"], topic=topic, p=r["p"], o=r["o"]),
                   "input": {"partition": r["p"], "offset": r["o"], "id": r["in_id"], "visible_id": r["visible_id"]}}
                  for r in rows]
    ids = ack.committed_ids - ack.unknown_ids
    if ids:  # pychecker._exposed_by_id: a once-committed id visible twice shows its aborted copy
        wanted = d.spark.createDataFrame([(i,) for i in sorted(ids)], "in_id STRING")
        twice = (d.input_log.join(F.broadcast(wanted), "in_id", "left_semi").groupBy("in_id")
                 .agg(F.count("*").alias("n"), F.sort_array(F.collect_list(F.struct("o", "p"))).alias("at"))
                 .filter("n > 1"))
        rows, more = _first_cases(twice, "in_id")
        total += more
        cases += [{"explanation": explain("aborted-read.seeder-input", in_id=r["in_id"], topic=topic, p=r["at"][0]["p"],
                                          o=r["at"][0]["o"]),
                   "input": {"partition": r["at"][0]["p"], "offset": r["at"][0]["o"], "id": r["in_id"],
                             "visible_at": [[x["p"], x["o"]] for x in r["at"]]}} for r in rows]
    return result("aborted-read", cases, total)


def check_acknowledged_inputs(d: SparkRun) -> CheckResult:
    """pychecker.check_acknowledged_inputs as joins: the seeder's committed acknowledgements
    against the committed input log, by position (and by id where positions were not recorded)."""
    F = d.F
    ack, topic = d.acknowledged, d.workload["input_topic"]
    cases, total = [], 0
    if ack.committed:
        acked = d.spark.createDataFrame([(p, o, i) for (p, o), i in sorted(ack.committed.items())],
                                        "p INT, o BIGINT, ack_id STRING")
        wrong = (acked.join(d.input_log, ["p", "o"], "left")
                 .filter(F.col("in_id").isNull() | (F.col("in_id") != F.col("ack_id"))))
        rows, total = _first_cases(wrong, "p", "o")
        for r in rows:
            what = "not in the committed input log" if r["in_id"] is None else f"replaced there by {r['in_id']}"
            cases.append({"explanation": explain("lost-acknowledged-input", in_id=r["ack_id"],
                                                 where=f"at {topic}/{r['p']}@{r['o']}", what=what),
                          "input": {"partition": r["p"], "offset": r["o"], "id": r["ack_id"], "found": r["in_id"]}})
    if ack.committed_ids:
        ids = d.spark.createDataFrame([(i,) for i in sorted(ack.committed_ids)], "in_id STRING")
        rows, more = _first_cases(ids.join(d.input_log.select("in_id"), "in_id", "left_anti"), "in_id")
        total += more
        cases += [{"explanation": explain("lost-acknowledged-input", in_id=r["in_id"], where="(position not recorded)",
                                          what="not in the committed input log"), "input": {"id": r["in_id"]}}
                  for r in rows]
    return result("lost-acknowledged-input", cases, total)


def check_input_mismatch(d: SparkRun) -> CheckResult:
    """pychecker.check_input_mismatch as a join: each committed output's input reference against
    the record the input log holds there (either view)."""
    F = d.F
    log = d.inputs["raw"].select(F.col("p").alias("in_partition"), F.col("o").alias("in_offset"),
                                 F.col("in_id").alias("found"))
    wrong = (d.outputs["committed"].join(log, ["in_partition", "in_offset"], "left")
             .filter(F.col("found").isNull() | (F.col("found") != F.col("in_id"))))
    rows, total = _first_cases(wrong, "topic", "partition", "offset")
    cases = [d.case(explain("input-mismatch", topic=r["topic"], partition=r["partition"], offset=r["offset"],
                            in_id=r["in_id"], p=r["in_partition"], o=r["in_offset"],
                            found="no record" if r["found"] is None else f"input {r['found']}"),
                    [d.record(r)], input={"partition": r["in_partition"], "offset": r["in_offset"], "found": r["found"]})
             for r in rows]
    return result("input-mismatch", cases, total)


def check_lost_write(d: SparkRun) -> CheckResult:
    F = d.F
    key = ["process", "txn_seq"]
    seen = _seen_per_transaction(d)
    lost = (d.transactions.filter((F.col("outcome") == "committed") & F.col("expected_outputs").isNotNull())
            .join(seen, key, "left").fillna(0, ["seen"]).filter(F.col("seen") < F.col("expected_outputs")))
    rows, total = _first_cases(lost, *key)
    cases = []
    for r in rows:
        raw = (d.outputs["raw"].filter((F.col("process") == r["process"]) & (F.col("txn_seq") == r["txn_seq"]))
               .orderBy("topic", "partition", "offset").limit(20).collect())
        txn = (r["process"], r["txn_seq"])
        cases.append(d.case(explain("lost-write", seq=r["txn_seq"], process=r["process"], seen=r["seen"],
                                    expected=r["expected_outputs"]), [d.record(x) for x in raw],
                            transaction=d.history.txn_evidence(txn)))
    return result("lost-write", cases, total)


def check_offsets_behind(d: SparkRun) -> CheckResult:
    F = d.F
    fo = d.final_offsets_df.withColumnRenamed("partition", "in_partition")
    beyond = (d.outputs["committed"].join(F.broadcast(fo), "in_partition")
              .filter(F.col("in_offset") >= F.col("final_offset")))
    if beyond.isEmpty():  # the usual case: no need to join the committed inputs
        return result("offsets-behind", [])
    behind = beyond.join(d.inputs["committed"].select(F.col("p").alias("in_partition"), F.col("o").alias("in_offset")),
                         ["in_partition", "in_offset"], "left_semi")
    rows, total = _first_cases(behind, "topic", "partition", "offset")
    cases = [d.case(explain("offsets-behind", p=r["in_partition"], o=r["in_offset"], final=r["final_offset"]),
                    [d.record(r)]) for r in rows]
    return result("offsets-behind", cases, total)


def _allowed_transition_sql() -> str:
    # A state with no successor (Dead) must render as false: "status IN (NULL)" is NULL, and a
    # NULL filter drops the row, so a transition out of Dead would never be reported.
    whens = " ".join(f"WHEN '{src}' THEN " + (f"status IN ({', '.join(repr(t) for t in sorted(dst))})" if dst else "false")
                     for src, dst in TXN_NEXT.items())
    return f"CASE prev_status {whens} ELSE false END"


def check_txn_transitions(d: SparkRun) -> CheckResult:
    from pyspark.sql import Window

    F = d.F
    log = d.txn_log
    scope = pipeline_txids(d.campaign, d.history)
    if scope is not None:  # model.in_scope, as a filter
        wanted = F.col("transactional_id").isin(*sorted(x for x in scope if not x.endswith("-")))
        for prefix in (x for x in scope if x.endswith("-")):
            wanted = wanted | F.col("transactional_id").startswith(prefix)
        log = log.filter(wanted)
    w = Window.partitionBy("transactional_id").orderBy("partition", "offset")
    steps = (log.withColumn("prev_status", F.lag("status").over(w))
             .withColumn("prev_pid", F.lag("producer_id").over(w)).withColumn("prev_epoch", F.lag("producer_epoch").over(w))
             .withColumn("prev_offset", F.lag("offset").over(w))
             .withColumn("prev_tombstone", F.lag(F.col("producer_id").isNull()).over(w))
             .filter(F.col("producer_id").isNotNull() & F.col("prev_status").isNotNull() & ~F.col("prev_tombstone"))
             .withColumn("allowed", F.expr(_allowed_transition_sql())))
    bad_state = (F.col("status") != F.col("prev_status")) & ~F.col("allowed")
    bad_epoch = (F.col("producer_id") == F.col("prev_pid")) & (F.col("producer_epoch") < F.col("prev_epoch"))
    bad = steps.filter(bad_state | bad_epoch).withColumn("bad_state", bad_state)
    rows, total = _first_cases(bad, "partition", "offset")
    cases = []
    for r in rows:
        where = {"transactional_id": r["transactional_id"], "log": f"__transaction_state-{r['partition']}",
                 "from": {"offset": r["prev_offset"], "status": r["prev_status"], "producer_id": r["prev_pid"],
                          "epoch": r["prev_epoch"]},
                 "to": {"offset": r["offset"], "status": r["status"], "producer_id": r["producer_id"],
                        "epoch": r["producer_epoch"]}}
        if r["bad_state"]:
            text = explain("invalid-txn-transition.state", txid=r["transactional_id"], from_status=r["prev_status"],
                           to_status=r["status"])
        else:
            text = explain("invalid-txn-transition.epoch", txid=r["transactional_id"], from_epoch=r["prev_epoch"],
                           to_epoch=r["producer_epoch"], pid=r["producer_id"])
        cases.append({"explanation": text, **where})
    return result("invalid-txn-transition", cases, total)


def _open_transactions(d: SparkRun) -> list[dict[str, Any]]:
    if d.txn_log is None:
        return []
    from pyspark.sql import Window

    F = d.F
    w = Window.partitionBy("transactional_id").orderBy(F.col("partition").desc(), F.col("offset").desc())
    latest = d.txn_log.withColumn("rn", F.row_number().over(w)).filter("rn = 1").filter(F.col("status").isin(*OPEN_TXN_STATES))
    return [{"transactional_id": r["transactional_id"], "status": r["status"], "producer_id": r["producer_id"],
             "epoch": r["producer_epoch"], "partitions": json.loads(r["partitions"]), "last_update_ms": r["last_update_ms"]}
            for r in latest.collect()]


def check_hanging(d: SparkRun) -> CheckResult:
    cases, note = hanging_cases(d.workload, d.final, _open_transactions(d) if not d.final["liveness"].get("stable") else [])
    return result("hanging-transaction", cases) if cases else CheckResult("hanging-transaction", VALID, note=note)


def check_zombie_write(d: SparkRun) -> CheckResult:
    F = d.F
    inits, commits = d.history.zombie_inputs()
    # only transactions whose commit ran after some other process initialised the same id can be zombies
    suspects = []
    for (process, seq), commit in commits.items():
        txid = (d.history.txn_ops.get((process, seq)) or {}).get("txid") or commit.get("txid")
        if txid and zombie_successor(inits, process, txid, commit) is not None:
            suspects.append((process, seq))
    if not suspects:
        return result("zombie-write", [])
    condition = F.lit(False)
    for process, seq in suspects:
        condition = condition | ((F.col("process") == process) & (F.col("txn_seq") == seq))
    visible = (d.outputs["committed"].filter(F.col("txid").isNotNull() & condition)
               .groupBy("process", "txn_seq")
               .agg(F.first("txid").alias("txid"), F.slice(F.sort_array(F.collect_list(d.record_struct())), 1, 10).alias("records")))
    cases = []
    for r in visible.orderBy("process", "txn_seq").collect():
        commit = commits[(r["process"], r["txn_seq"])]
        successor = zombie_successor(inits, r["process"], r["txid"], commit)
        if successor is None:  # the record names another transactional.id than the history
            continue
        cases.append(d.case(explain("zombie-write", seq=r["txn_seq"], process=r["process"], txid=r["txid"],
                                    epoch=commit.get("epoch"), successor=successor["process"],
                                    successor_epoch=successor.get("epoch")),
                            [d.record(x) for x in r["records"]],
                            successor={"process": successor["process"], "epoch": successor.get("epoch"),
                                       "init_completed": successor["complete_time"]},
                            commit_invoked=commit["invoke_time"]))
    return result("zombie-write", cases)


def check_nonmonotonic(d: SparkRun) -> CheckResult:
    """First appearances of one input partition's outputs in one output partition follow input order."""
    from pyspark.sql import Window

    F = d.F
    coordinates = ["topic", "partition", "offset"]
    # the window sorts and shuffles every committed output: it carries only the columns the order
    # needs, and the few cases' records are fetched by their coordinates afterwards
    first = d.outputs["committed"].select(*coordinates, "in_partition", "in_offset", "slot")
    if not _duplicate_keys(d).isEmpty():  # re-appearances are duplicates, not order: keep the first of each
        first_w = Window.partitionBy("in_partition", "in_offset", "slot").orderBy(*coordinates)
        first = first.withColumn("rn", F.row_number().over(first_w)).filter("rn = 1").drop("rn")
    first = first.drop("slot")
    stream_key = ["topic", "partition", "in_partition"]
    stream = Window.partitionBy(*stream_key).orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    # the running maximum of in_offset alone: carrying each record along the window would cost
    # every row what only the cases need
    out = (first.withColumn("highest", F.max("in_offset").over(stream))
           .filter(F.col("highest").isNotNull() & (F.col("in_offset") < F.col("highest"))))
    rows, total = _first_cases(out, *coordinates)
    if not rows:
        return result("nonmonotonic", [], total)
    # each case's earlier record: the latest one before it in its stream with the highest in_offset
    wanted = d.spark.createDataFrame([(r["topic"], r["partition"], r["in_partition"], r["highest"], r["offset"])
                                      for r in rows], first.select(*stream_key, "in_offset", F.col("offset").alias("before")).schema)
    found = (first.join(F.broadcast(wanted), [*stream_key, "in_offset"]).filter(F.col("offset") < F.col("before"))
             .groupBy(*stream_key, "before").agg(F.max("offset").alias("earlier")).collect())
    earlier = {(x["topic"], x["partition"], x["in_partition"], x["before"]): x["earlier"] for x in found}
    records = _records_at(d, [(r["topic"], r["partition"], r["offset"]) for r in rows]
                          + [(r["topic"], r["partition"], earlier[(r["topic"], r["partition"], r["in_partition"], r["offset"])])
                             for r in rows])
    cases = [d.case(explain("nonmonotonic", topic=r["topic"], partition=r["partition"], p=r["in_partition"],
                            o=r["in_offset"], earlier=r["highest"]),
                    [d.record(records[(r["topic"], r["partition"], earlier[(r["topic"], r["partition"], r["in_partition"],
                                                                             r["offset"])])]),
                     d.record(records[(r["topic"], r["partition"], r["offset"])])])
             for r in rows]
    return result("nonmonotonic", cases, total)


def _records_at(d: SparkRun, coordinates: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], Any]:
    """Committed outputs by (topic, partition, offset): the few records a check cites."""
    key = ["topic", "partition", "offset"]
    found = _records_of(d, d.outputs["committed"], [dict(zip(key, c)) for c in sorted(set(coordinates))], key, 1)
    return {coordinate: records[0] for coordinate, records in found.items()}


def check_progress(d: SparkRun) -> CheckResult:
    outputs = d.counts["outputs_committed"]
    if d.history.has_history or d.txn_log is None:
        return progress_result(d.history.committed_transactions(), outputs)
    return progress_result(coordinator_commits(d), outputs, from_log=True)


def coordinator_commits(d: SparkRun) -> int:
    """model.coordinator_commits as a query: CompleteCommit records that do not repeat the
    record before them for their transactional.id, the seeder's ids left out."""
    from pyspark.sql import Window

    F = d.F
    w = Window.partitionBy("transactional_id").orderBy("partition", "offset")
    status = F.when(F.col("producer_id").isNotNull(), F.col("status"))
    steps = d.txn_log.withColumn("status_", status).withColumn("prev", F.lag("status_").over(w))
    commits = steps.filter((F.col("status_") == "CompleteCommit")
                           & (F.col("prev").isNull() | (F.col("prev") != "CompleteCommit")))
    if d.history.seeder_txids:
        commits = commits.filter(~F.col("transactional_id").isin(*sorted(d.history.seeder_txids)))
    return commits.count()


def _txn_log_entries(d: SparkRun, events: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The transaction log's records of the transactional ids the message proxy's events name,
    in log order, as late_requests reads them."""
    if d.txn_log is None:
        return None
    from kchaos.verifier.decoders import TransactionLogEntry

    txids = sorted({e["transactional_id"] for e in events if e.get("transactional_id")})
    rows = d.txn_log.filter(d.F.col("transactional_id").isin(*txids)).orderBy("partition", "offset").collect() if txids else []
    return [{"partition": r["partition"], "offset": r["offset"],
             "entry": TransactionLogEntry(r["transactional_id"], r["producer_id"], r["producer_epoch"], status=r["status"],
                                          partitions=json.loads(r["partitions"]), last_update_ms=r["last_update_ms"],
                                          client_transaction_version=r["client_transaction_version"])}
            for r in rows]


def facts(d: SparkRun) -> dict[str, Any]:
    from collections import Counter

    from kchaos.verifier.late_requests import events_path

    F = d.F
    aborted_inputs = _aborted_inputs(d).count()
    ctv: Counter[str] = Counter()
    per_txid: dict[str, dict[str, int]] = {}
    if d.txn_log is not None:
        # one job: the log's records per transactional.id, status and version (a few per id),
        # of which the driver sums what the two facts need
        groups = (d.txn_log.filter(F.col("producer_id").isNotNull())
                  .groupBy("transactional_id", "status", "client_transaction_version").count().collect())
        for r in groups:
            ctv[str(r["client_transaction_version"])] += r["count"]
        per_txid = commits_by_client_tv(
            ((r["transactional_id"], r["status"], r["client_transaction_version"], r["count"]) for r in groups),
            d.history.txid_prefix)
    return {
        "inputs_committed": d.counts["inputs_committed"],
        "inputs_aborted_or_undecided": aborted_inputs,
        "outputs_committed": d.counts["outputs_committed"],
        "outputs_raw": d.counts["outputs_raw"],
        "outputs_without_lineage": d.foreign_outputs,
        "outputs_of_ambiguous_inputs": d.set_aside_outputs,
        "inputs_with_ambiguous_id": d.ambiguous_inputs,
        "transactions": dict(Counter(d.history.txn_outcome.values())),
        "transactions_per_txid": d.history.per_txid_outcomes(),
        "final_group_offsets": {str(p): o for p, o in sorted(d.final_offsets.items())},
        "faults": len(d.history.faults),
        "transaction_log_records": d.counts["transaction_log"],
        "client_transaction_versions": dict(sorted(ctv.items())),
        "commits_by_client_tv_per_txid": per_txid,
        "liveness": d.final.get("liveness"),
        "topic_source": d.source,
        # small data (the proxy's events and their transactional ids' log records), one definition
        # for both engines; only when the run had message faults
        "late_requests": (late_request_facts(d.run, _txn_log_entries(d, read_message_events(d.run)), d.history.ops)
                          if events_path(d.run).exists() else None),
    }


def check_run_spark(spark: Any, run: Path, ops: list[dict[str, Any]] | None = None,
                    prefer_ingest: bool = False) -> Results:
    """Check a stored run with an existing Spark session (``prefer_ingest``: TopicSource)."""
    results = Results(checker="spark")
    try:
        data = SparkRun(spark, Path(run), ops, prefer_ingest)
    except Exception as exc:
        results.errors.append(f"could not read the run: {exc!r}")
        return results
    results.spark = {"timings": dict(data.timings)}
    with ThreadPoolExecutor(CHECK_THREADS, thread_name_prefix="kchaos-check") as pool:
        counted = pool.submit(facts, data)
        share = run_checks(results, data, sys.modules[__name__], pool)
        try:
            results.facts = {**counted.result(), **evidence.white_box_facts(data)}
        except Exception as exc:
            results.errors.append(f"facts could not be computed: {exc!r}")
    if share:
        # The share ledger is per record and per delivery, built in the driver from the client
        # dumps and the history (verifier/share_checks.py); the other checks above ran on Spark.
        from kchaos.verifier.pychecker import RunData
        from kchaos.verifier.share_checks import share_checks

        checks, share_facts = share_checks(RunData(Path(run), data.history.ops))
        results.checks.extend(checks)
        results.facts["share"] = share_facts
    spark.catalog.clearCache()
    return results


def output_records(run: Path, bootstrap: str | None) -> int | None:
    """About how many output records the job will read (both views), before its session starts:
    the topics' end offsets when reading a live cluster, else the ingest's counts or the client
    dumps' Parquet footers. It sizes the driver JVM (spark_env.QUICK_JIT_BELOW); None if unknown."""
    try:
        output_topics = json.loads((run / "campaign.json").read_text())["workload"]["output_topics"]
        if bootstrap:
            from confluent_kafka import Consumer, TopicPartition

            consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kchaos-verifier-size", "log_level": 3})
            try:
                ends = 0
                for topic, parts in topic_partitions(bootstrap, output_topics).items():
                    for p in parts:
                        ends += consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                return 2 * ends  # both views; markers counted too, an upper bound
            finally:
                consumer.close()
        source = TopicSource(run, prefer_ingest=False)
        if source.name == "spark-kafka-source":
            return sum(source.ingest["topics"].get(f"{t}.{v}", {}).get("records", 0) for t in output_topics for v in VIEWS)
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(f"{source.location}/{t}.{v}.parquet").metadata.num_rows
                   for t in output_topics for v in VIEWS if source.has(t, v))
    except Exception:
        return None  # sizing is an optimisation: the job itself reports what is missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kchaos.verifier.spark_job", description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--master", default=None, help="Spark master (default local[2] or $KCHAOS_SPARK_MASTER)")
    parser.add_argument("--bootstrap", default=None, help="read the topics from this live cluster first")
    parser.add_argument("--data-dir", default=None,
                        help="where the ingest writes (a Hadoop-compatible URL the executors reach; the run's name "
                             "is appended); default RUN/topics-spark")
    parser.add_argument("--out", type=Path, default=None, help="write the results here (default RUN/results.spark.json)")
    args = parser.parse_args(argv)
    from kchaos.verifier.spark_env import class_archive, finish_class_archive, remove_stale_dumps, spark_session

    out = args.out or args.run / "results.spark.json"
    started = time.monotonic()
    results = Results(checker="spark")
    timings: dict[str, float] = {}
    spark = None
    dump_to = None
    try:
        # no archive yet: this JVM writes one when it exits, for every later job on this machine
        archive = class_archive()
        if archive is not None and not archive.exists():
            dump_to = archive.with_name(f"{archive.name}.{os.getpid()}.tmp")
            remove_stale_dumps(archive.parent)
        # the run directory on the driver JVM's command line: leak checks and reapers can find it
        spark = spark_session(args.master, extra_conf={"spark.kchaos.run": str(args.run.resolve())},
                              ship_code_from=args.run / SPARK_DIR, dump_archive_to=dump_to,
                              records=output_records(args.run, args.bootstrap))
        timings["session_s"] = round(time.monotonic() - started, 2)
        if args.bootstrap:
            workload = json.loads((args.run / "campaign.json").read_text())["workload"]
            t = time.monotonic()
            ingest_topics(spark, args.bootstrap, args.run, [workload["input_topic"], *workload["output_topics"]],
                          args.data_dir)
            timings["ingest_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        results = check_run_spark(spark, args.run, prefer_ingest=bool(args.bootstrap))
        timings["checks_s"] = round(time.monotonic() - t, 2)  # loading included
        timings.update((results.spark or {}).get("timings", {}))
    except Exception as exc:
        results.errors.append(f"the Spark job failed: {exc!r}")
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        if spark is not None:
            spark.stop()
    results.spark = {"master": args.master or "default", "timings": timings}
    data = results.to_json()
    atomic_write(out, json.dumps(data, indent=2, default=str))
    print(json.dumps({"verdict": data["verdict"], "anomaly_types": data["anomaly_types"], "timings": timings}), flush=True)
    if dump_to is not None and spark is not None:  # after the results: a failed dump costs nothing but time
        # an archive holds the classes its job loaded: one from a job that stopped early would
        # leave every later job half the benefit, so only a complete job's is kept
        finish_class_archive(dump_to, keep=not results.errors)
    return 0


if __name__ == "__main__":
    sys.exit(main())
