"""The verifier: a PySpark job that proves (or refutes) exactly-once for one run directory.

    python -m kchaos.verifier.spark_job RUN_DIR [--master local[2] | spark://host:port]
                                         [--bootstrap HOST:PORT] [--out FILE]

Inputs
  * input and output topics in both views (read_committed and read_uncommitted), through
    **Spark's Kafka source** when ``--bootstrap`` names a live cluster: they are ingested into
    ``RUN_DIR/topics-spark/<topic>.<view>.parquet`` (so ``analyze`` can re-check without a
    cluster), else read from there, else from the client dumps in ``RUN_DIR/topics/``;
  * ``__transaction_state`` and ``__consumer_offsets``: Spark's Kafka source skips internal
    topics, so the client dumps are decoded in Python (verifier/decoders.py) and handed to
    Spark as ``RUN_DIR/decoded/*.parquet``;
  * the client history (paired operations), the group's final offsets and the broker-side
    state after heal (``final.json``).

Each check is a Spark query; the evidence of at most ``MAX_CASES`` cases per anomaly is
collected to the driver and completed from the history (transactional.id, producer id and epoch,
history operation, faults active then). The anomaly names and evidence match the single-process
checker (verifier/pychecker.py), which ``kchaos run`` runs beside it as a cross-check.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from kchaos.files import atomic_target, atomic_write
from kchaos.verifier.checks import explain, progress_result, result, run_checks
from kchaos.verifier.model import (LINEAGE_FIELDS, MAX_CASES, OPEN_TXN_STATES, TXN_NEXT, HistoryIndex,
                                   commits_by_client_tv, hanging_cases, read_json, read_ops, zombie_successor)
from kchaos.verifier.results import VALID, CheckResult, Results
from kchaos.workloads.lineage import IdLocator

TOPIC_SCHEMA = "partition INT, offset BIGINT, timestamp BIGINT, key BINARY, value BINARY"
LINEAGE_SCHEMA = ("in_id STRING, in_topic STRING, in_partition INT, in_offset BIGINT, slot INT, slots INT, "
                  "worker STRING, incarnation INT, txid STRING, txn_seq BIGINT")
RECORD_COLUMNS = ("topic", "partition", "offset", "in_id", "in_topic", "in_partition", "in_offset", "slot", "slots",
                  "worker", "incarnation", "txid", "txn_seq")
VIEWS = {"committed": "read_committed", "raw": "read_uncommitted"}


# ---------------------------------------------------------------------------------------------
# Ingest: Kafka source -> Parquet in the run directory


def ingest_topics(spark: Any, bootstrap: str, topics: list[str], out_dir: Path) -> dict[str, Any]:
    """Read the topics from the beginning to their end in both views with Spark's Kafka source
    (one query per view); write ``<topic>.<view>.parquet``. Ends are the latest offsets *in that
    view* (the LSO for read_committed), fixed when the query is planned."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    out_dir.mkdir(parents=True, exist_ok=True)
    summary: dict[str, Any] = {"bootstrap": bootstrap, "topics": {}}
    for view, isolation in VIEWS.items():
        started = time.monotonic()
        df = (spark.read.format("kafka")
              .option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", ",".join(topics))
              .option("startingOffsets", "earliest").option("endingOffsets", "latest")
              .option("kafka.isolation.level", isolation)
              # transactional topics have offset gaps (markers, aborted records in the
              # committed view); they are not data loss
              .option("failOnDataLoss", "false")
              .option("kafkaConsumer.pollTimeoutMs", "30000")
              .load()
              .select("topic", F.col("partition").cast("int"), "offset",
                      (F.unix_millis(F.col("timestamp"))).alias("timestamp"), "key", "value")
              .persist(StorageLevel.MEMORY_AND_DISK))
        counts = {r["topic"]: r["count"] for r in df.groupBy("topic").count().collect()}
        for topic in topics:
            df.filter(F.col("topic") == topic).drop("topic").write.mode("overwrite").parquet(
                str(out_dir / f"{topic}.{view}.parquet"))
            summary["topics"][f"{topic}.{view}"] = {"records": counts.get(topic, 0)}
        df.unpersist()
        summary[f"{view}_seconds"] = round(time.monotonic() - started, 2)
    (out_dir / "ingest.json").write_text(json.dumps(summary, indent=2))
    return summary


# ---------------------------------------------------------------------------------------------
# Decoded internal topics and history -> Parquet (Python side; small tables)


def write_decoded_tables(run: Path, workload: dict[str, Any], history: HistoryIndex) -> dict[str, int]:
    """``decoded/transaction_log.parquet``, ``offset_commits.parquet``, ``transactions.parquet``,
    ``input_ops.parquet``, ``final_offsets.parquet``; returns row counts."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from kchaos.verifier.decoders import OffsetCommit, decode_offsets_record, decode_transaction_record

    out = run / "decoded"
    out.mkdir(exist_ok=True)
    counts: dict[str, int] = {}

    def write(name: str, columns: dict[str, tuple[list[Any], Any]]) -> None:
        table = pa.table({k: pa.array(v, t) for k, (v, t) in columns.items()})
        with atomic_target(out / f"{name}.parquet") as tmp:
            pq.write_table(table, tmp)
        counts[name] = table.num_rows

    txn = {k: [] for k in ("partition", "offset", "transactional_id", "producer_id", "producer_epoch", "status",
                           "partitions", "last_update_ms", "client_transaction_version")}
    path = run / "topics" / "__transaction_state.raw.parquet"
    if path.exists():
        for r in pq.read_table(path).to_pylist():
            e = decode_transaction_record(r["key"], r["value"])
            if e is None:
                continue
            for k, v in (("partition", r["partition"]), ("offset", r["offset"]), ("transactional_id", e.transactional_id),
                         ("producer_id", e.producer_id), ("producer_epoch", e.producer_epoch), ("status", e.status),
                         ("partitions", json.dumps(e.partitions)), ("last_update_ms", e.last_update_ms),
                         ("client_transaction_version", e.client_transaction_version)):
                txn[k].append(v)
        write("transaction_log", {"partition": (txn["partition"], pa.int32()), "offset": (txn["offset"], pa.int64()),
                                  "transactional_id": (txn["transactional_id"], pa.string()),
                                  "producer_id": (txn["producer_id"], pa.int64()),
                                  "producer_epoch": (txn["producer_epoch"], pa.int32()),
                                  "status": (txn["status"], pa.string()), "partitions": (txn["partitions"], pa.string()),
                                  "last_update_ms": (txn["last_update_ms"], pa.int64()),
                                  "client_transaction_version": (txn["client_transaction_version"], pa.int32())})
    path = run / "topics" / "__consumer_offsets.committed.parquet"
    if path.exists():
        cols: dict[str, list[Any]] = {k: [] for k in ("log_partition", "log_offset", "partition", "offset", "commit_timestamp")}
        for r in pq.read_table(path).to_pylist():
            c = decode_offsets_record(r["key"], r["value"])
            if (isinstance(c, OffsetCommit) and c.group == workload.get("group_id")
                    and c.topic == workload["input_topic"] and c.offset is not None):
                for k, v in (("log_partition", r["partition"]), ("log_offset", r["offset"]), ("partition", c.partition),
                             ("offset", c.offset), ("commit_timestamp", c.commit_timestamp)):
                    cols[k].append(v)
        write("offset_commits", {"log_partition": (cols["log_partition"], pa.int32()),
                                 "log_offset": (cols["log_offset"], pa.int64()),
                                 "partition": (cols["partition"], pa.int32()), "offset": (cols["offset"], pa.int64()),
                                 "commit_timestamp": (cols["commit_timestamp"], pa.int64())})
    keys = sorted(set(history.txn_ops) | set(history.txn_outcome))
    ops = [history.txn_ops.get(k) or {} for k in keys]
    write("transactions", {
        "process": ([k[0] for k in keys], pa.string()), "txn_seq": ([k[1] for k in keys], pa.int64()),
        "txid": ([op.get("txid") for op in ops], pa.string()),
        "outcome": ([history.txn_outcome.get(k, "unknown") for k in keys], pa.string()),
        "expected_outputs": ([(op.get("value") or {}).get("outputs") for op in ops], pa.int64())})
    in_p, in_o = [], []
    for (p, o) in history.input_ops:
        in_p.append(p)
        in_o.append(o)
    write("input_ops", {"partition": (in_p, pa.int32()), "offset": (in_o, pa.int64())})
    final = read_json(run / "final.json", {})
    offsets = {int(p): o for p, o in (final.get("group_offsets") or {}).items()}
    write("final_offsets", {"partition": (list(offsets), pa.int32()), "final_offset": (list(offsets.values()), pa.int64())})
    return counts


# ---------------------------------------------------------------------------------------------
# Loading


class SparkRun:
    """A run directory as Spark DataFrames, plus the small driver-side facts."""

    def __init__(self, spark: Any, run: Path, ops: list[dict[str, Any]] | None = None):
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        self.spark, self.run, self.F = spark, run, F
        campaign = json.loads((run / "campaign.json").read_text())
        self.workload = campaign["workload"]
        self.final = json.loads((run / "final.json").read_text())
        self.final_offsets = {int(p): o for p, o in (self.final.get("group_offsets") or {}).items()}
        self.history = HistoryIndex(read_ops(run) if ops is None else ops)
        self.decoded = write_decoded_tables(run, self.workload, self.history)
        spark_dir = run / "topics-spark"
        self.source = "spark-kafka-source" if (spark_dir / "ingest.json").exists() else "client-dump"
        self.topic_dir = spark_dir if self.source == "spark-kafka-source" else run / "topics"

        def topic(name: str, view: str) -> Any:
            path = self.topic_dir / f"{name}.{view}.parquet"
            if not path.exists():
                raise FileNotFoundError(f"{path} is missing: the run's final reads did not complete")
            return spark.read.schema(TOPIC_SCHEMA).parquet(str(path))

        input_topic = self.workload["input_topic"]
        self.inputs = {view: topic(input_topic, view).select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                                              F.col("key").cast("string").alias("in_id"))
                       .persist(StorageLevel.MEMORY_AND_DISK) for view in VIEWS}
        self.identity = (IdLocator.parse(self.workload.get("lineage_id") or "key")
                         if self.workload.get("lineage") == "id" else None)
        self.ambiguous_inputs = 0
        if self.identity is not None:  # model.identity_positions, as joins
            ambiguous = (self.inputs["committed"].groupBy("in_id").count().filter("count > 1").select("in_id"))
            self.ambiguous_inputs = self.inputs["committed"].join(ambiguous, "in_id", "left_semi").count()
            self.inputs = {view: df.join(ambiguous, "in_id", "left_anti").persist(StorageLevel.MEMORY_AND_DISK)
                           for view, df in self.inputs.items()}
            never_committed = (self.inputs["raw"].join(self.inputs["committed"].select("in_id"), "in_id", "left_anti")
                               .groupBy("in_id").agg(F.min(F.struct("p", "o")).alias("at"))
                               .select("in_id", "at.p", "at.o"))
            self.id_positions = self.inputs["committed"].select("in_id", "p", "o").unionByName(never_committed)
        self.outputs: dict[str, Any] = {}
        self.foreign_outputs: dict[str, int] = {}
        lineage_ok = F.lit(True)
        for field in LINEAGE_FIELDS:
            lineage_ok = lineage_ok & F.col(f"l.{field}").isNotNull()
        for view in VIEWS:
            parts = [topic(t, view).withColumn("topic", F.lit(t)) for t in self.workload["output_topics"]]
            union = parts[0]
            for part in parts[1:]:
                union = union.unionByName(part)
            if self.identity is None:
                parsed = (union.withColumn("l", F.from_json(F.col("value").cast("string"), LINEAGE_SCHEMA))
                          .withColumn("lineage_ok", F.coalesce(lineage_ok, F.lit(False))))
            else:
                parsed = self.identity_lineage(parts, input_topic)
            parsed = parsed.persist(StorageLevel.MEMORY_AND_DISK)
            self.foreign_outputs[view] = parsed.filter(~F.col("lineage_ok")).count()
            self.outputs[view] = (parsed.filter(F.col("lineage_ok"))
                                  .select("topic", "partition", "offset", "l.*")
                                  .withColumn("process", F.concat_ws(".", "worker", F.col("incarnation").cast("string")))
                                  .persist(StorageLevel.MEMORY_AND_DISK))
        decoded = run / "decoded"
        self.transactions = spark.read.parquet(str(decoded / "transactions.parquet"))
        self.input_ops = spark.read.parquet(str(decoded / "input_ops.parquet"))
        self.final_offsets_df = spark.read.parquet(str(decoded / "final_offsets.parquet"))
        self.txn_log = (spark.read.parquet(str(decoded / "transaction_log.parquet"))
                        if (decoded / "transaction_log.parquet").exists() else None)
        self.offset_log = None
        if (decoded / "offset_commits.parquet").exists():
            import pyarrow.parquet as pq

            self.offset_log = sorted(pq.read_table(decoded / "offset_commits.parquet").to_pylist(),
                                     key=lambda r: (r["log_partition"], r["log_offset"]))
        self.k = self.workload["outputs_per_input"]
        self.exactly_once = self.workload["delivery"] == "exactly-once"

    def identity_lineage(self, parts: list[Any], input_topic: str) -> Any:
        """Identity lineage (pychecker._identity): each output's id, from where the locator says,
        joined to its input's position; the slot is the topic's index; no transaction named."""
        F, loc = self.F, self.identity
        value = F.col("value").cast("string")
        in_id = {"key": F.col("key").cast("string"), "value": value}.get(loc.kind)
        if loc.kind == "json":
            in_id = F.get_json_object(value, loc.json_path())
        elif loc.kind == "regex":
            import re

            in_id = F.regexp_extract(value, loc.arg, 1 if re.compile(loc.arg).groups else 0)
            in_id = F.when(value.rlike(loc.arg), in_id)
        union = None
        for slot, part in enumerate(parts):
            part = part.withColumn("in_id", in_id).withColumn("slot_", F.lit(slot))
            union = part if union is None else union.unionByName(part)
        joined = union.join(self.id_positions, "in_id", "left")
        nothing = {"worker": "string", "incarnation": "int", "txid": "string", "txn_seq": "bigint"}
        lineage = F.struct(F.col("in_id"), F.lit(input_topic).alias("in_topic"), F.col("p").cast("int").alias("in_partition"),
                           F.col("o").alias("in_offset"), F.col("slot_").cast("int").alias("slot"),
                           F.lit(self.workload["outputs_per_input"]).cast("int").alias("slots"),
                           *[F.lit(None).cast(t).alias(n) for n, t in nothing.items()])
        return (joined.withColumn("l", lineage).withColumn("lineage_ok", F.col("p").isNotNull())
                .select("topic", "partition", "offset", "l", "lineage_ok"))

    # evidence ---------------------------------------------------------------------------------

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


# ---------------------------------------------------------------------------------------------
# Checks (each returns a CheckResult; looked up by name at call time)


def check_duplicates(d: SparkRun) -> CheckResult:
    F = d.F
    dup = (d.outputs["committed"].groupBy("in_partition", "in_offset", "slot")
           .agg(F.count("*").alias("n"), F.slice(F.sort_array(F.collect_list(d.record_struct())), 1, 10).alias("records"))
           .filter("n > 1"))
    rows, total = _first_cases(dup, "in_partition", "in_offset", "slot")
    cases = [d.case(explain("duplicate", p=r["in_partition"], o=r["in_offset"], slot=r["slot"], n=r["n"]),
                    [d.record(x) for x in r["records"]]) for r in rows]
    return result("duplicate", cases, total)


def _unexplained(d: SparkRun) -> Any:
    """Committed inputs below the group's final offset with no committed output."""
    if getattr(d, "_unexplained", None) is None:
        F = d.F
        produced = d.outputs["committed"].select(F.col("in_partition").alias("p"), F.col("in_offset").alias("o")).distinct()
        fo = d.final_offsets_df.withColumnRenamed("partition", "p")
        d._unexplained = (d.inputs["committed"].join(F.broadcast(fo), "p")
                          .filter(F.col("o") < F.col("final_offset"))
                          .join(produced, ["p", "o"], "left_anti")
                          .join(d.input_ops.select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                                   F.lit(True).alias("processed")), ["p", "o"], "left")
                          .persist())
    return d._unexplained


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
    partial = (committed.groupBy("in_partition", "in_offset")
               .agg(F.sort_array(F.collect_set("slot")).alias("have"),
                    F.slice(F.sort_array(F.collect_list(d.record_struct())), 1, 20).alias("records"))
               .filter(F.size("have") < d.k))
    rows, total = _first_cases(partial, "in_partition", "in_offset")
    cases = [d.case(explain("torn-transaction.slots", p=r["in_partition"], o=r["in_offset"], have=list(r["have"]), k=d.k),
                    [d.record(x) for x in r["records"]], missing_slots=sorted(set(range(d.k)) - set(r["have"])))
             for r in rows]
    if d.exactly_once and d.identity is None:
        key = ["process", "txn_seq"]
        seen = committed.groupBy(*key).agg(F.count("*").alias("seen"))
        raw = d.outputs["raw"]
        torn = (raw.groupBy(*key).agg(F.count("*").alias("written")).join(seen, key)
                .filter((F.col("seen") > 0) & (F.col("seen") < F.col("written"))))
        hidden = (raw.join(torn.select(*key), key, "left_semi")
                  .join(committed.select("topic", "partition", "offset"), ["topic", "partition", "offset"], "left_anti")
                  .groupBy(*key).agg(F.slice(F.sort_array(F.collect_list(d.record_struct())), 1, 20).alias("hidden")))
        rows, more = _first_cases(torn.join(hidden, key, "left"), *key)
        total += more
        for r in rows:
            cases.append(d.case(explain("torn-transaction.hidden", seq=r["txn_seq"], process=r["process"], seen=r["seen"],
                                        written=r["written"]),
                                [d.record(x) for x in (r["hidden"] or [])]))
    return result("torn-transaction", cases, total)


def check_aborted_read(d: SparkRun) -> CheckResult:
    F = d.F
    committed = d.outputs["committed"]
    aborted = d.transactions.filter(F.col("outcome") == "aborted").select("process", "txn_seq")
    of_aborted_txn = committed.join(aborted, ["process", "txn_seq"], "left_semi")
    rows, total = _first_cases(of_aborted_txn, "topic", "partition", "offset")
    cases = [d.case(explain("aborted-read.transaction", seq=r["txn_seq"], process=r["process"]), [d.record(r)])
             for r in rows]
    raw_only = d.inputs["raw"].join(d.inputs["committed"].select("p", "o"), ["p", "o"], "left_anti")
    of_aborted_input = (committed.join(raw_only.withColumnRenamed("p", "in_partition").withColumnRenamed("o", "in_offset")
                                       .withColumnRenamed("in_id", "aborted_input_id"), ["in_partition", "in_offset"]))
    rows, more = _first_cases(of_aborted_input, "topic", "partition", "offset")
    total += more
    for r in rows:
        cases.append(d.case(explain("aborted-read.input", p=r["in_partition"], o=r["in_offset"]), [d.record(r)],
                            input={"partition": r["in_partition"], "offset": r["in_offset"], "id": r["aborted_input_id"]}))
    return result("aborted-read", cases, total)


def check_lost_write(d: SparkRun) -> CheckResult:
    F = d.F
    key = ["process", "txn_seq"]
    seen = d.outputs["committed"].groupBy(*key).agg(F.count("*").alias("seen"))
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
    behind = (d.outputs["committed"].join(F.broadcast(fo), "in_partition")
              .filter(F.col("in_offset") >= F.col("final_offset"))
              .join(d.inputs["committed"].select(F.col("p").alias("in_partition"), F.col("o").alias("in_offset")),
                    ["in_partition", "in_offset"], "left_semi"))
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
    if d.history.txid_prefix:
        log = log.filter(F.col("transactional_id").startswith(d.history.txid_prefix))
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
    first_w = Window.partitionBy("in_partition", "in_offset", "slot").orderBy("topic", "partition", "offset")
    first = d.outputs["committed"].withColumn("rn", F.row_number().over(first_w)).filter("rn = 1").drop("rn")
    stream = (Window.partitionBy("topic", "partition", "in_partition").orderBy("offset")
              .rowsBetween(Window.unboundedPreceding, -1))
    out = (first.withColumn("highest", F.max(F.struct(F.col("in_offset"), d.record_struct().alias("r"))).over(stream))
           .filter(F.col("highest").isNotNull() & (F.col("in_offset") < F.col("highest.in_offset"))))
    rows, total = _first_cases(out, "topic", "partition", "offset")
    cases = [d.case(explain("nonmonotonic", topic=r["topic"], partition=r["partition"], p=r["in_partition"],
                            o=r["in_offset"], earlier=r["highest"]["in_offset"]),
                    [d.record(r["highest"]["r"]), d.record(r)]) for r in rows]
    return result("nonmonotonic", cases, total)


def check_progress(d: SparkRun) -> CheckResult:
    outputs = d.outputs["committed"].count()
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


def facts(d: SparkRun) -> dict[str, Any]:
    from collections import Counter

    from kchaos.verifier.late_requests import events_path, late_request_facts
    from kchaos.verifier.pychecker import RunData

    F = d.F
    counts = {f"{name}_{view}": df.count() for name, group in (("inputs", d.inputs), ("outputs", d.outputs))
              for view, df in group.items()}
    aborted_inputs = d.inputs["raw"].join(d.inputs["committed"].select("p", "o"), ["p", "o"], "left_anti").count()
    ctv: dict[str, int] = {}
    per_txid: dict[str, dict[str, int]] = {}
    records = None
    if d.txn_log is not None:
        records = d.txn_log.count()
        ctv = {str(r["client_transaction_version"]): r["count"] for r in
               d.txn_log.filter(F.col("producer_id").isNotNull()).groupBy("client_transaction_version").count().collect()}
        completed = (d.txn_log.filter(F.col("producer_id").isNotNull() & (F.col("status") == "CompleteCommit"))
                     .groupBy("transactional_id", "status", "client_transaction_version").count().collect())
        per_txid = commits_by_client_tv(
            ((r["transactional_id"], r["status"], r["client_transaction_version"], r["count"]) for r in completed),
            d.history.txid_prefix)
    return {
        "inputs_committed": counts["inputs_committed"],
        "inputs_aborted_or_undecided": aborted_inputs,
        "outputs_committed": counts["outputs_committed"],
        "outputs_raw": counts["outputs_raw"],
        "outputs_without_lineage": d.foreign_outputs,
        "inputs_with_ambiguous_id": d.ambiguous_inputs,
        "transactions": dict(Counter(d.history.txn_outcome.values())),
        "transactions_per_txid": d.history.per_txid_outcomes(),
        "final_group_offsets": {str(p): o for p, o in sorted(d.final_offsets.items())},
        "faults": len(d.history.faults),
        "transaction_log_records": records,
        "client_transaction_versions": dict(sorted(ctv.items())),
        "commits_by_client_tv_per_txid": per_txid,
        "liveness": d.final.get("liveness"),
        "topic_source": d.source,
        # small data (the proxy's events, the decoded transaction log), one definition for both engines
        # decoded in the driver only when a message fault affected something (a run without one
        # would decode the transaction log a second time for nothing)
        "late_requests": (late_request_facts(d.run, RunData.decoded_txn_log(d.run), d.history.ops)
                          if events_path(d.run).exists() else None),
    }


def check_run_spark(spark: Any, run: Path, ops: list[dict[str, Any]] | None = None) -> Results:
    """Check a stored run with an existing Spark session."""
    results = Results(checker="spark")
    try:
        data = SparkRun(spark, Path(run), ops)
    except Exception as exc:
        results.errors.append(f"could not read the run: {exc!r}")
        return results
    share = run_checks(results, data, sys.modules[__name__])
    try:
        results.facts = facts(data)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kchaos.verifier.spark_job", description=__doc__.split("\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--master", default=None, help="Spark master (default local[2] or $KCHAOS_SPARK_MASTER)")
    parser.add_argument("--bootstrap", default=None, help="read the user topics from this live cluster first")
    parser.add_argument("--out", type=Path, default=None, help="write the results here (default RUN/results.spark.json)")
    args = parser.parse_args(argv)
    from kchaos.verifier.spark_env import spark_session

    out = args.out or args.run / "results.spark.json"
    started = time.monotonic()
    results = Results(checker="spark")
    timings: dict[str, float] = {}
    spark = None
    try:
        # the run directory on the driver JVM's command line: leak checks and reapers can find it
        spark = spark_session(args.master, extra_conf={"spark.kchaos.run": str(args.run.resolve())})
        timings["session_s"] = round(time.monotonic() - started, 2)
        if args.bootstrap:
            workload = json.loads((args.run / "campaign.json").read_text())["workload"]
            t = time.monotonic()
            ingest_topics(spark, args.bootstrap, [workload["input_topic"], *workload["output_topics"]],
                          args.run / "topics-spark")
            timings["ingest_s"] = round(time.monotonic() - t, 2)
        t = time.monotonic()
        results = check_run_spark(spark, args.run)
        timings["checks_s"] = round(time.monotonic() - t, 2)
    except Exception as exc:
        results.errors.append(f"the Spark job failed: {exc!r}")
        print(traceback.format_exc(), file=sys.stderr)
    finally:
        if spark is not None:
            spark.stop()
    results.spark = {"master": args.master or "default", "timings": timings}
    data = results.to_json()
    atomic_write(out, json.dumps(data, indent=2, default=str))
    print(json.dumps({"verdict": data["verdict"], "anomaly_types": data["anomaly_types"], "timings": timings}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
