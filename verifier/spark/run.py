"""A run directory as Spark DataFrames (:class:`SparkRun`): the topics parsed once and cached,
the internal topics decoded by the executors, the driver's history and evidence beside them,
and the intermediate results several checks share, built once (:class:`BuiltOnce`).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kchaos.files import read_json
from kchaos.protocol.decoders import TransactionLogEntry
from kchaos.verifier import evidence
from kchaos.verifier.acknowledged import acknowledged_inputs, doubtful_ids, visible_batches
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier import driver_checks
from kchaos.verifier.coordinator_log import COORDINATOR_TXN_SCHEMA, CoordinatorTxn
from kchaos.verifier.internal_topics import (OFFSET_COMMIT_SCHEMA, TXN_LOG_SCHEMA, coordinator_transactions_of, offset_commit_batches, transaction_log_batches)
from kchaos.verifier.late_requests import late_requests, read_message_events
from kchaos.verifier.segments import Segments, run_segments
from kchaos.verifier.model import HistoryIndex, LINEAGE_FIELDS, RECORD_COLUMNS, read_ops, run_seed
from kchaos.verifier.observations import observer_summary
from kchaos.verifier.spark.ingest import VIEWS, TopicSource
from kchaos.workloads.lineage import IdLocator

LINEAGE_SCHEMA = ("in_id STRING, in_topic STRING, in_partition INT, in_offset BIGINT, slot INT, slots INT, "
                  "worker STRING, incarnation INT, txid STRING, txn_seq BIGINT")


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
        "expected_outputs": pa.array([(op.get("value") or {}).get("outputs") for op in ops], pa.int64()),
        # the history holds its "send" (written before its first output), and when it first asked to commit
        "sent": pa.array([k in history.txn_ops for k in keys], pa.bool_()),
        "commit_requested": pa.array([history.commit_requested(k) for k in keys], pa.float64())})
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
        campaign = self.campaign = load_recorded(run)
        self.workload = campaign.workload
        self.final = json.loads((run / "final.json").read_text())
        self.final_offsets = {int(p): o for p, o in (self.final.get("group_offsets") or {}).items()}
        self.history = HistoryIndex(read_ops(run) if ops is None else ops)
        # the driver-side evidence the white-box checks and the evidence rules read (verifier/evidence.py)
        self.compaction = evidence.compaction_of(run, self.final)
        self.observer_summary = observer_summary(run, self.final)
        self.acknowledged = acknowledged_inputs(self.history.ops, run_seed(run, campaign))
        self.coordinator_facts: dict[str, Any] | None = None
        self.producer_id_facts: dict[str, Any] | None = None  # producer ids and epochs (invalid-txn-transition)
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

        input_topic = self.workload.input_topic
        self.inputs = {view: topic(input_topic, view).select(F.col("partition").alias("p"), F.col("offset").alias("o"),
                                                              F.col("key").cast("string").alias("in_id"))
                       .persist(StorageLevel.MEMORY_AND_DISK) for view in VIEWS}
        #: the committed input log as read (identity lineage sets ambiguous ids aside from inputs;
        #: what the seeder acknowledged is checked against all of it)
        self.input_log = self.inputs["committed"]
        self.identity = (IdLocator.parse(self.workload.lineage_id)
                         if self.workload.lineage == "id" else None)
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
            for slot, t in enumerate(self.workload.output_topics):
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
            decode = functools.partial(offset_commit_batches, group=self.workload.group_id, topic=input_topic)
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
        self.k = self.workload.outputs_per_input
        self.exactly_once = self.workload.delivery == "exactly-once"

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

        def build() -> list[CoordinatorTxn]:
            rows = (self.txn_log.groupBy("transactional_id")
                    .applyInPandas(coordinator_transactions_of, COORDINATOR_TXN_SCHEMA).collect())
            return [CoordinatorTxn.from_row(r) for r in rows]
        return self.shared("coordinator_transactions", build)

    def coordinator_aborted(self) -> dict[tuple[str, int], str]:
        """Client transactions the coordinator's log shows aborted, with the kind of aborted read
        their visible outputs are (driver_checks.coordinator_aborted_kinds)."""
        return driver_checks.coordinator_aborted_kinds(self) if self.txn_log is not None else {}

    def coordinator_committed(self) -> set[tuple[str, int]]:
        """Client transactions the coordinator's log shows committed that their client did not see commit."""
        return driver_checks.coordinator_committed_keys(self) if self.txn_log is not None else set()

    def visible_transactions(self, keys: set[tuple[str, int]]) -> set[tuple[str, int]]:
        """Of these client transactions (few: the unresolved ones), those with a committed output;
        of the seeder's, those whose inputs the committed input log holds (acknowledged.visible_batches)."""
        if not keys:
            return set()
        F = self.F
        wanted = self.spark.createDataFrame(sorted(keys), "process STRING, txn_seq BIGINT")
        rows = (self.outputs["committed"].join(F.broadcast(wanted), ["process", "txn_seq"], "left_semi")
                .select("process", "txn_seq").distinct().collect())
        visible = {(r["process"], r["txn_seq"]) for r in rows}
        seeded = [op for process, op in keys if (process, op) in self.history.seeder_txns]
        ids = sorted(doubtful_ids(self.acknowledged, seeded))
        if ids:
            copies = [(r["p"], r["o"], r["in_id"]) for r in
                      self.input_log.filter(F.col("in_id").isin(*ids)).select("p", "o", "in_id").collect()]
            visible |= {("seeder", op) for op in visible_batches(self.acknowledged, seeded, copies)}
        return visible

    def latest_txn_records_below(self, bounds: dict[int | None, int | None],
                                 txids: set[str]) -> dict[str, dict[str, Any]]:
        """run_data.RunData.latest_txn_records_below as a query: the records below each named
        partition's bound (the key None: every other partition), the latest per id of ``txids``."""
        if self.txn_log is None or not txids:
            return {}
        F = self.F
        named = [p for p in bounds if p is not None]

        def below(bound: int | None) -> Any:
            return F.lit(True) if bound is None else F.col("offset") < bound

        where = F.lit(False)
        for p in named:
            where = where | ((F.col("partition") == p) & below(bounds[p]))
        if None in bounds:
            where = where | (~F.col("partition").isin(*named) & below(bounds[None]) if named else below(bounds[None]))
        rows = (self.txn_log.filter(where & F.col("transactional_id").isin(*sorted(txids)))
                .groupBy("transactional_id")
                .agg(F.max_by(F.struct("partition", "offset", "status", "producer_id", "last_update_ms"), "offset")
                     .alias("r")).collect())
        tombstone = {r["transactional_id"]: r["r"]["producer_id"] is None for r in rows}
        return {r["transactional_id"]: {"partition": r["r"]["partition"], "offset": r["r"]["offset"],
                                        "status": None if tombstone[r["transactional_id"]] else r["r"]["status"],
                                        "last_update_ms": None if tombstone[r["transactional_id"]]
                                        else r["r"]["last_update_ms"]} for r in rows}

    @property
    def unrecorded_output_transactions(self) -> dict[str, list[int]] | None:
        """Per process, the transactions its committed outputs name that its history holds no
        ``send`` of (a query: committed outputs' transactions against the history's); None for
        identity lineage."""
        if self.identity is not None:
            return None

        def build() -> dict[str, list[int]]:
            F = self.F
            sent = self.transactions.filter(F.col("sent")).select("process", "txn_seq")
            rows = (self.outputs["committed"].filter(F.col("worker").isNotNull()).select("process", "txn_seq")
                    .distinct().join(F.broadcast(sent), ["process", "txn_seq"], "left_anti").collect())
            out: dict[str, list[int]] = {}
            for r in rows:
                out.setdefault(r["process"], []).append(r["txn_seq"])
            return {p: sorted(seqs) for p, seqs in sorted(out.items())}
        return self.shared("unrecorded_output_transactions", build)

    @property
    def segments(self) -> Segments | None:
        """The brokers' own batches, merged across replicas, and what was not read (segments.py), read once."""
        return self.shared("segments", lambda: run_segments(self.run))

    def late_requests(self) -> list[dict[str, Any]] | None:
        """The message proxy's late or duplicated requests (late_requests.py), built once."""
        def build() -> list[dict[str, Any]] | None:
            events = read_message_events(self.run)
            return late_requests(events, txn_log_entries(self, events), self.history.ops) if events else None
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
                           F.lit(self.workload.outputs_per_input).cast("int").alias("slots"),
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



def txn_log_entries(d: SparkRun, events: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """The transaction log's records of the transactional ids the message proxy's events name,
    in log order, as late_requests reads them."""
    txids = sorted({e["transactional_id"] for e in events if e.get("transactional_id")})
    return _txn_log_rows(d, "transactional_id", txids)


def txn_log_entries_of_producers(d: SparkRun, producer_ids: set[int]) -> list[dict[str, Any]] | None:
    """The transaction log's records of some producer ids, in log order (markers.py reads them)."""
    return _txn_log_rows(d, "producer_id", sorted(producer_ids))


def _txn_log_rows(d: SparkRun, column: str, values: list[Any]) -> list[dict[str, Any]] | None:
    """The transaction log's records whose ``column`` is one of ``values``, collected to the
    driver as {partition, offset, entry} (small: what one fact needs); None without the log."""
    if d.txn_log is None:
        return None
    rows = d.txn_log.filter(d.F.col(column).isin(*values)).orderBy("partition", "offset").collect() if values else []
    return [{"partition": r["partition"], "offset": r["offset"],
             "entry": TransactionLogEntry(r["transactional_id"], r["producer_id"], r["producer_epoch"], status=r["status"],
                                          partitions=json.loads(r["partitions"]), last_update_ms=r["last_update_ms"],
                                          start_ms=r["start_ms"], client_transaction_version=r["client_transaction_version"])}
            for r in rows]


