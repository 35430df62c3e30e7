"""The isolation-cycle check of a ``workload.kind = "txn"`` run on the Spark engine (issue 77, item 2).

Only the query is here. What the check means is verifier/isolation/, shared with the reference:
the run read as the same transactions (history.py's ``read_txns``, on the driver, shipped to Spark
as DataFrames like the rest of the engine's history, run.py's ``history_tables``), the log's bounds
read from the same small records (``log_bounds``), each edge and direct case built by the same
constructors (cycles.py's ``ww_edge`` ... ``g1b_case``), the graph judged by the same cycle search,
classes and verdicts (cycles.py's ``judge``: ``find_cycles`` and ``classify`` on the driver) and
turned into the same result and facts (judge.py's ``isolation_result``).

What Spark computes, as DataFrames (joins, aggregates, window functions; the executors hold the log):

* **the log**: each raw record's fate from the two dumps (a left join on partition and offset), the
  records past the committed view's end set aside as undecided, the partitions a dump did not read
  whole left out, the records only the committed dump holds added;
* **the version order**: each key's committed records ranked by offset (``row_number``), the values
  held there more than once (a count over the key and value), and, per key and value, the offsets
  the log holds it at;
* **the writers** of each (key, value) (an aggregate of the sends), and from them and the log each
  transaction's fate (committed, aborted, contradicted by the log, not committed) and the nodes;
* **ww** from each version to the next (``lead``), **wr** and the direct **G1a** and **G1b** from
  every polled record joined with its writer, its writer's fate, the log's copies of its value and
  the record at the offset it was read at, **rw** from each reader's highest read of a key to the
  writer of the next version; each edge's evidence is the first one the reference keeps (its order:
  key and offset for ww, the reader's operation and record for wr, key for rw; a ``row_number``);
* **process** and **realtime** edges without the reference's sequential sweep, by its closed form:
  the sweep links ``a -> b`` exactly when ``a`` is definite (its client saw it commit) and
  ``M(b) <= a.complete < b.invoke``, where ``M(b)`` is the latest invoke of a definite transaction
  completed strictly before ``b`` was invoked (a running ``max`` over the invokes and completions in
  time order, completions after invokes at one instant). Proof: the sweep adds ``a`` to its frontier
  when ``a`` completes and removes it only when a ``c`` completes whose invoke found ``a`` there, so
  ``a`` is in the frontier at ``b``'s invoke iff ``a.complete < b.invoke`` and no definite ``c`` has
  ``a.complete < c.invoke`` and ``c.complete < b.invoke``, that is iff not ``a.complete < M(b)``;
  ties go as the sweep's (an invoke before a completion at one instant, so both inequalities are
  strict; completions at one instant cannot remove each other);
* **the gaps** (``not_checked``) the reference's analysis reports, each reason counted exactly, the
  first examples in the reference's order.

Then the small results are collected (the edges: a few thousand; the direct cases; the counts; the
first examples of each gap) and judged on the driver. The differences from the reference, all
outside what the txn workload writes: a value is compared as text (the dumps' bytes decoded by
Spark's cast, invalid UTF-8 replaced as Java replaces it, where the reference uses Python's
``errors="replace"``), so the history's values must be strings or null (anything else is refused);
two raw records at one partition and offset (a dump never holds them) are both kept, where the
reference keeps the last.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Hashable, Sequence

from kchaos.verifier.isolation.cycles import (MAX_EXAMPLES, Analysis, Edge, Key, Send, Txn, g1a_case, g1b_case,
                                              graph_of, judge, not_checked_entry, process_edge, realtime_edge,
                                              rw_edge, ww_edge, wr_edge)
from kchaos.verifier.isolation.history import COMMITTED, RAW, dump_path, log_bounds, read_txns
from kchaos.verifier.isolation.judge import JUDGED_AT, isolation_disagreements, isolation_result
from kchaos.verifier.results import CheckResult
from kchaos.verifier.spark.env import spark_session
from kchaos.verifier.spark.ingest import TOPIC_SCHEMA

TXNS_SCHEMA = "tid STRING, process STRING, outcome STRING, invoke DOUBLE, complete DOUBLE"
SENDS_SCHEMA = "tid STRING, n INT, topic STRING, partition INT, value STRING"
POLLS_SCHEMA = "tid STRING, n INT, topic STRING, partition INT, records INT, offsets ARRAY<BIGINT>"
READS_SCHEMA = "tid STRING, n INT, r INT, topic STRING, partition INT, offset BIGINT, value STRING"
#: one row per edge, every kind's evidence in its own columns (the rest null)
EDGE_COLUMNS = ("kind", "src", "dst", "topic", "partition", "value", "offset", "next_value", "next_offset",
                "process", "completed", "invoked")
#: one row per gap: its reason, where the reference would meet it (phase, then s, a, b), its example as JSON
GAP_COLUMNS = ("reason", "phase", "s", "a", "b", "example")


def _text(value: Hashable, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise ValueError(f"{where}: value {value!r} is not text: the Spark engine compares values as the dumps' text")


def _vk(F: Any, column: str = "value") -> Any:
    """A value as a join key that is never null (a null value is a value like any other, as in the
    reference's dictionaries): "v" + the text, or "n" for null."""
    return F.coalesce(F.concat(F.lit("v"), F.col(column)), F.lit("n"))


@dataclass(frozen=True)
class LogFrames:
    """A topic's final log as DataFrames: its records with their fate, the keys read (records or
    not), the undecided records; and what the small records said (the bounds)."""

    records: Any  # topic, partition, offset, value, vk, committed
    keys: Any  # topic, partition
    undecided: Any  # topic, partition, offset
    incomplete: tuple[Key, ...]
    end_from: str | None


def log_frames(spark: Any, run: Path, topic: str) -> LogFrames:
    """``topic``'s final raw log with each record's fate (history.py's module docstring), in Spark."""
    from pyspark.sql import functions as F  # local: pyspark, only where a Spark session exists

    bounds = log_bounds(run, topic)

    def view(name: str) -> Any:
        return (spark.read.schema(TOPIC_SCHEMA).parquet(str(dump_path(run, topic, name)))
                .select("partition", "offset", F.col("value").cast("string").alias("value")))

    raw, committed = view(RAW), view(COMMITTED)
    ends = spark.createDataFrame(sorted(bounds.ends.items()), "partition INT, view_end BIGINT")
    kept = ~F.col("partition").isin(*sorted(bounds.incomplete)) if bounds.incomplete else F.lit(True)
    marked = (raw.join(committed.select("partition", "offset", F.lit(True).alias("visible")), ["partition", "offset"],
                       "left")
              .join(F.broadcast(ends), "partition", "left"))
    undecided = F.col("visible").isNull() & F.col("view_end").isNotNull() & (F.col("offset") >= F.col("view_end"))
    records = (marked.filter(~undecided)
               .select("partition", "offset", "value", F.col("visible").isNotNull().alias("committed"))
               .unionByName(committed.join(raw.select("partition", "offset"), ["partition", "offset"], "left_anti")
                            .withColumn("committed", F.lit(True)))
               .filter(kept).withColumn("topic", F.lit(topic)).withColumn("vk", _vk(F)))
    left_out = marked.filter(undecided & kept).select(F.lit(topic).alias("topic"), "partition", "offset")
    known = spark.createDataFrame([(p,) for p in sorted(bounds.partitions)], "partition INT")
    keys = (known.unionByName(records.select("partition")).unionByName(left_out.select("partition"))
            .filter(kept).distinct().select(F.lit(topic).alias("topic"), "partition"))
    return LogFrames(records, keys, left_out, tuple((topic, p) for p in sorted(bounds.incomplete)), bounds.end_from)


def history_frames(spark: Any, txns: Sequence[Txn]) -> tuple[Any, Any, Any, Any]:
    """The transactions, their sends, their polls and the records polled, as DataFrames (the
    driver read the history; each op keeps its place ``n`` in its transaction, each record polled
    its place ``r`` in its poll). A transaction id given twice is refused, as the reference does."""
    seen: set[str] = set()
    txn_rows, sends, polls, reads = [], [], [], []
    for t in txns:
        if t.id in seen:
            raise ValueError(f"transaction id {t.id!r} appears twice: ids name the nodes of the graph")
        seen.add(t.id)
        txn_rows.append((t.id, t.process, t.outcome, float(t.invoke), float(t.complete)))
        for n, op in enumerate(t.ops):
            topic, partition = op.key
            if isinstance(op, Send):
                sends.append((t.id, n, topic, partition, _text(op.value, t.id)))
                continue
            polls.append((t.id, n, topic, partition, len(op.records), [o for o, _ in op.records]))
            reads.extend((t.id, n, r, topic, partition, o, _text(v, t.id)) for r, (o, v) in enumerate(op.records))
    return (spark.createDataFrame(txn_rows, TXNS_SCHEMA), spark.createDataFrame(sends, SENDS_SCHEMA),
            spark.createDataFrame(polls, POLLS_SCHEMA), spark.createDataFrame(reads, READS_SCHEMA))


def _example(F: Any, *fields: Any) -> Any:
    """A gap's example as JSON, its fields in the reference's order (nulls kept); ``key`` is a
    (topic, partition) struct, made a list again on the driver."""
    return F.to_json(F.struct(*fields), {"ignoreNullFields": "false"})


def _key(F: Any) -> Any:
    return F.struct(F.col("topic").alias("topic"), F.col("partition").alias("partition")).alias("key")


def _gap(F: Any, df: Any, reason: str, phase: int, s: Any, a: Any, b: Any, *fields: Any) -> Any:
    return df.select(F.lit(reason).alias("reason"), F.lit(phase).alias("phase"), s.cast("string").alias("s"),
                     a.cast("bigint").alias("a"), b.cast("bigint").alias("b"), _example(F, *fields).alias("example"))


def _first(F: Any, W: Any, df: Any, by: Sequence[str], order: Sequence[str]) -> Any:
    """Per ``by``, the row first in ``order`` (the evidence the reference keeps for an edge)."""
    return (df.withColumn("_rank", F.row_number().over(W.partitionBy(*by).orderBy(*order)))
            .filter("_rank = 1").drop("_rank"))


def _edge_rows(F: Any, df: Any, kind: str, **columns: Any) -> Any:
    types = {"partition": "int", "offset": "bigint", "next_offset": "bigint", "completed": "double",
             "invoked": "double"}
    return df.select(F.lit(kind).alias("kind"), *[
        (columns[c] if c in columns else F.lit(None)).cast(types.get(c, "string")).alias(c) for c in EDGE_COLUMNS[1:]])


def _time_edges(F: Any, W: Any, nodes: Any, kind: str) -> Any:
    """Process (per process) or realtime edges among ``nodes``, as the reference's sweep draws them
    (the module's docstring: ``M(b) <= a.complete < b.invoke``, ``a`` definite)."""
    part = ["process"] if kind == "process" else []
    definite = nodes.filter(F.col("outcome") == "committed")
    events = (definite.select(*part, F.col("complete").alias("t"), F.lit(1).alias("k"), F.col("invoke").alias("m"),
                              F.lit(None).cast("string").alias("tid"))
              .unionByName(nodes.select(*part, F.col("invoke").alias("t"), F.lit(0).alias("k"),
                                        F.lit(None).cast("double").alias("m"), "tid")))
    spec = (W.partitionBy(*part) if part else W).orderBy("t", "k").rowsBetween(W.unboundedPreceding, W.currentRow)
    invoked = (events.withColumn("M", F.max("m").over(spec)).filter(F.col("k") == 0)
               .select(*[F.col(c).alias("b_" + c) for c in part], F.col("tid").alias("b"),
                       F.col("t").alias("b_invoke"), "M"))
    a = definite.select(*[F.col(c).alias("a_" + c) for c in part], F.col("tid").alias("a"),
                        F.col("complete").alias("a_complete"))
    on = (F.col("a_complete") < F.col("b_invoke")) & (F.col("M").isNull() | (F.col("a_complete") >= F.col("M")))
    if part:
        on = on & (F.col("a_process") == F.col("b_process"))
    linked = a.join(invoked, on, "inner")
    extra = {"process": F.col("a_process")} if part else {}
    return _edge_rows(F, linked, kind, src=F.col("a"), dst=F.col("b"), completed=F.col("a_complete"),
                      invoked=F.col("b_invoke"), **extra)


@dataclass(frozen=True)
class SparkAnalysis:
    """The Spark engine's :class:`~kchaos.verifier.isolation.cycles.Analysis` of a run, and what
    the log left out (as history.py's DumpedLog says it)."""

    analysis: Analysis
    transactions: int
    undecided: dict[Key, list[int]]
    incomplete: tuple[Key, ...]
    end_from: str | None


def analyse_spark(spark: Any, txns: Sequence[Txn], log: LogFrames) -> Analysis:
    """cycles.analyse as Spark queries (the module's docstring): the same graph, direct cases,
    counts and gaps."""
    from pyspark import StorageLevel  # local: pyspark, only where a Spark session exists
    from pyspark.sql import Window as W
    from pyspark.sql import functions as F

    T, S, P, R = history_frames(spark, txns)
    S, R = S.withColumn("vk", _vk(F)), R.withColumn("vk", _vk(F))
    K = log.keys.persist(StorageLevel.MEMORY_AND_DISK)
    key, kv = ["topic", "partition"], ["topic", "partition", "vk"]

    # the version order: each key's committed records by offset, and how often each value is there
    V = (log.records.filter("committed")
         .withColumn("place", F.row_number().over(W.partitionBy(*key).orderBy("offset")) - 1)
         .withColumn("copies", F.count("*").over(W.partitionBy(*kv)))
         .persist(StorageLevel.MEMORY_AND_DISK))
    VF = (V.groupBy(*kv).agg(F.min("place").alias("first_place"), F.min("offset").alias("first_offset"),
                             F.count("*").alias("copies"), F.sort_array(F.collect_list("offset")).alias("offsets"),
                             F.first("value").alias("value"))
          .persist(StorageLevel.MEMORY_AND_DISK))
    HELD = log.records.groupBy(*kv).agg(F.sort_array(F.collect_set("offset")).alias("held"))
    AT = log.records.select(*key, "offset", F.col("vk").alias("at_vk"), F.col("committed").alias("at_committed"))

    # the writers of each value, each transaction's fate, the nodes
    WR = (S.groupBy(*kv).agg(F.sort_array(F.collect_set("tid")).alias("writers"),
                             F.min(F.struct("tid", "n")).alias("first_send"), F.first("value").alias("value"))
          .withColumn("n_writers", F.size("writers"))
          .withColumn("writer", F.when(F.col("n_writers") == 1, F.col("writers")[0]))
          .persist(StorageLevel.MEMORY_AND_DISK))
    sole = WR.filter(F.col("n_writers") == 1).select(*kv, "writer")
    committed_sends = (S.join(sole, kv).filter(F.col("writer") == F.col("tid"))
                       .join(VF.select(*kv), kv, "left_semi").select("tid").distinct()
                       .withColumn("committed_send", F.lit(True)))
    fate = (T.join(committed_sends, "tid", "left")
            .withColumn("fate", F.when(F.col("outcome") == "committed", "committed")
                        .when(F.col("outcome") == "aborted",
                              F.when(F.col("committed_send"), "contradiction").otherwise("aborted"))
                        .otherwise(F.when(F.col("committed_send"), "committed").otherwise("not-committed")))
            .drop("committed_send").persist(StorageLevel.MEMORY_AND_DISK))
    nodes = fate.filter(F.col("fate") == "committed")
    owners = sole.join(nodes.select(F.col("tid").alias("writer")), "writer", "left_semi")

    # every polled record of a key the log holds, classified in the reference's order of tests
    held = F.col("held").isNotNull()
    copy_ok = F.coalesce(F.col("at_vk") == F.col("vk"), F.lit(False))
    committed_here = F.when(copy_ok, F.col("at_committed")).otherwise(F.col("first_place").isNotNull())
    what = (F.when(F.col("n_writers").isNull(), F.when(held, "value-without-writer").otherwise("value-absent-from-log"))
            .when(F.col("n_writers") > 1, "skip")
            .when(F.col("writer") == F.col("tid"), "own-write-read")
            .when(F.col("w_fate") == "contradiction", "skip")
            .when((F.col("w_fate") == "aborted") | ((F.col("w_fate") == "not-committed") & held), "G1a")
            .when(~held, "value-absent-from-log")
            .when(~committed_here, "G1b")
            .when(F.col("r_fate") != "committed", "skip")
            .otherwise("wr"))
    RC = (R.join(K, key, "left_semi")
          .join(WR.select(*kv, "n_writers", "writer"), kv, "left")
          .join(HELD, kv, "left")
          .join(AT, [*key, "offset"], "left")
          .join(VF.select(*kv, "first_place", "first_offset", "copies"), kv, "left")
          .join(fate.select(F.col("tid").alias("writer"), F.col("fate").alias("w_fate"),
                            F.col("outcome").alias("w_outcome")), "writer", "left")
          .join(fate.select("tid", F.col("fate").alias("r_fate"), F.col("outcome").alias("r_outcome")), "tid", "left")
          .withColumn("what", what)
          .withColumn("mismatch", (F.col("n_writers") == 1) & held & ~F.array_contains("held", F.col("offset")))
          .withColumn("edge_offset", F.when(copy_ok, F.col("offset")).otherwise(F.col("first_offset")))
          .persist(StorageLevel.MEMORY_AND_DISK))

    # ww: each version and the next, both single versions with writers among the nodes, the first per pair
    by_key = W.partitionBy(*key).orderBy("offset")
    pairs = (V.withColumn("next_offset", F.lead("offset").over(by_key))
             .withColumn("next_value", F.lead("value").over(by_key))
             .withColumn("next_vk", F.lead("vk").over(by_key))
             .withColumn("next_copies", F.lead("copies").over(by_key))
             .filter(F.col("next_offset").isNotNull() & (F.col("copies") == 1) & (F.col("next_copies") == 1))
             .join(owners.withColumnRenamed("writer", "wa"), kv)
             .join(owners.select(*key, F.col("vk").alias("next_vk"), F.col("writer").alias("wb")), [*key, "next_vk"])
             .filter(F.col("wa") != F.col("wb")))
    ww = _edge_rows(F, _first(F, W, pairs, ["wa", "wb"], [*key, "offset"]), "ww", src=F.col("wa"), dst=F.col("wb"),
                    topic=F.col("topic"), partition=F.col("partition"), value=F.col("value"), offset=F.col("offset"),
                    next_value=F.col("next_value"), next_offset=F.col("next_offset"))

    # wr: the first read of each (writer, reader), in the reader's order of operations and records
    reads = RC.filter(F.col("what") == "wr")
    wr = _edge_rows(F, _first(F, W, reads, ["writer", "tid"], ["n", "r"]), "wr", src=F.col("writer"),
                    dst=F.col("tid"), topic=F.col("topic"), partition=F.col("partition"), value=F.col("value"),
                    offset=F.col("edge_offset"))

    # rw: each reader's highest read of a single version of a key, to the writer of the next single version
    highest = (reads.filter(F.col("copies") == 1).groupBy("tid", *key).agg(F.max("first_place").alias("place")))
    current = V.select(*key, "place", F.col("value").alias("cur_value"), F.col("offset").alias("cur_offset"))
    following = (V.filter(F.col("copies") == 1)
                 .select(*key, (F.col("place") - 1).alias("place"), "vk", F.col("value").alias("next_value"),
                         F.col("offset").alias("next_offset"))
                 .join(owners, kv).drop("vk"))
    anti = (highest.join(current, [*key, "place"]).join(following, [*key, "place"])
            .filter(F.col("writer") != F.col("tid")))
    rw = _edge_rows(F, _first(F, W, anti, ["tid", "writer"], key), "rw", src=F.col("tid"), dst=F.col("writer"),
                    topic=F.col("topic"), partition=F.col("partition"), value=F.col("cur_value"),
                    offset=F.col("cur_offset"), next_value=F.col("next_value"), next_offset=F.col("next_offset"))

    edges = (ww.unionByName(wr).unionByName(rw).unionByName(_time_edges(F, W, nodes, "process"))
             .unionByName(_time_edges(F, W, nodes, "realtime")))

    # the gaps, in the reference's order: the writers (0), the fates (1), the sends (2), the log (3), the polls (4)
    polled = F.col("tid"), F.col("n"), F.col("r")
    gaps = [
        _gap(F, WR.filter(F.col("n_writers") > 1), "ambiguous-writer", 0, F.col("first_send.tid"),
             F.col("first_send.n"), F.lit(0), _key(F), F.col("value"), F.col("writers")),
        _gap(F, fate.filter(F.col("fate") == "contradiction"), "outcome-contradicts-log", 1, F.col("tid"), F.lit(0),
             F.lit(0), F.col("tid").alias("txn")),
        _gap(F, S.join(K, key, "left_anti"), "key-absent-from-log", 2, F.col("tid"), F.col("n"), F.lit(0),
             F.col("tid").alias("txn"), _key(F), F.lit("send").alias("op"), F.col("value")),
        _gap(F, VF.filter(F.col("copies") > 1), "duplicate-in-log", 3, F.col("topic"), F.col("partition"),
             F.col("first_place"), _key(F), F.col("value"), F.col("offsets")),
        _gap(F, V.join(WR.select(*kv), kv, "left_anti"), "value-without-writer", 3, F.col("topic"),
             F.col("partition"), F.col("offset"), _key(F), F.col("offset"), F.col("value"),
             F.lit("log").alias("seen")),
        _gap(F, P.join(K, key, "left_anti"), "key-absent-from-log", 4, F.col("tid"), F.col("n"), F.lit(-1),
             F.col("tid").alias("txn"), _key(F), F.lit("poll").alias("op"), F.col("offsets")),
        _gap(F, RC.filter(F.col("what") == "value-without-writer"), "value-without-writer", 4, *polled, _key(F),
             F.col("offset"), F.col("value"), F.lit("poll").alias("seen"), F.col("tid").alias("txn")),
        _gap(F, RC.filter(F.col("what") == "value-absent-from-log"), "value-absent-from-log", 4, *polled,
             F.col("tid").alias("txn"), _key(F), F.col("offset"), F.col("value")),
        _gap(F, RC.filter(F.col("mismatch")), "offset-mismatch", 4, *polled, F.col("tid").alias("txn"), _key(F),
             F.col("offset"), F.col("value"), F.col("held").alias("log_offsets")),
        _gap(F, RC.filter(F.col("what") == "own-write-read"), "own-write-read", 4, *polled,
             F.col("tid").alias("txn"), _key(F), F.col("offset"), F.col("value")),
    ]
    union = gaps[0]
    for g in gaps[1:]:
        union = union.unionByName(g)
    gap_rows = (union.groupBy("reason")
                .agg(F.count("*").alias("count"),
                     F.slice(F.sort_array(F.collect_list(F.struct("phase", "s", "a", "b", "example"))), 1,
                             MAX_EXAMPLES).alias("first"))
                .orderBy("reason").collect())

    # what was looked at, one job
    present_sends = S.join(K, key, "left_semi")
    present_polls = P.join(K, key, "left_semi")
    counted = [
        ("transactions", T), ("committed", nodes), ("committed_from_log", nodes.filter(F.col("outcome") == "unknown")),
        ("keys", K), ("versions", V), ("sends", S),
        ("sends_without_version", present_sends.join(nodes.select("tid"), "tid", "left_semi")
         .join(VF.select(*kv), kv, "left_anti")),
        ("polls", P), ("polls_outside_graph", P.join(nodes.select("tid"), "tid", "left_anti")),
        ("empty_polls", present_polls.filter(F.col("records") == 0)), ("records_read", R.join(K, key, "left_semi"))]
    tally = None
    for name, df in counted:
        one = df.agg(F.count("*").alias("n")).select(F.lit(name).alias("name"), "n")
        tally = one if tally is None else tally.unionByName(one)
    totals = {r["name"]: r["n"] for r in tally.collect()}

    edge_list = [_edge(r) for r in edges.collect()]
    node_ids = [r["tid"] for r in nodes.select("tid").collect()]
    direct: dict[str, list[dict[str, Any]]] = {"G1a": [], "G1b": []}
    for r in RC.filter(F.col("what").isin("G1a", "G1b")).orderBy("tid", "n", "r").collect():
        k = (r["topic"], r["partition"])
        if r["what"] == "G1a":
            direct["G1a"].append(g1a_case(r["tid"], r["writer"], k, r["offset"], r["value"], r["r_outcome"],
                                          r["w_outcome"], abort_returned=r["w_fate"] == "aborted",
                                          held=r["held"] is not None))
        else:
            direct["G1b"].append(g1b_case(r["tid"], r["writer"], k, r["offset"], r["value"], r["r_outcome"],
                                          r["w_outcome"]))
    for df in (K, V, VF, WR, fate, RC):
        df.unpersist()
    checked = {name: int(totals.get(name, 0)) for name, _ in counted}
    not_checked = [not_checked_entry(r["reason"], r["count"], [_example_of(e["example"]) for e in r["first"]])
                   for r in gap_rows]
    return Analysis(graph_of(node_ids, edge_list), direct, checked, not_checked)


def _example_of(text: str) -> dict[str, Any]:
    example = json.loads(text)
    if isinstance(example.get("key"), dict):
        example["key"] = [example["key"]["topic"], example["key"]["partition"]]
    return example


def _edge(r: Any) -> Edge:
    """A collected edge row as the reference's Edge (its constructor, its evidence)."""
    kind, a, b = r["kind"], r["src"], r["dst"]
    k = (r["topic"], r["partition"])
    if kind == "ww":
        return ww_edge(a, b, k, r["value"], r["offset"], r["next_value"], r["next_offset"])
    if kind == "wr":
        return wr_edge(a, b, k, r["value"], r["offset"])
    if kind == "rw":
        return rw_edge(a, b, k, r["value"], r["offset"], r["next_value"], r["next_offset"])
    if kind == "process":
        return process_edge(a, b, r["process"], r["completed"], r["invoked"])
    return realtime_edge(a, b, r["completed"], r["invoked"])


def analyse_run_spark(spark: Any, run: Path | str) -> SparkAnalysis:
    """A stored txn run analysed by the Spark engine: the history read as the reference reads it,
    the log's fate and everything after in Spark."""
    from pyspark.sql import functions as F  # local: pyspark, only where a Spark session exists

    run = Path(run)
    topic, txns = read_txns(run)
    log = log_frames(spark, run, topic)
    analysis = analyse_spark(spark, txns, log)
    rows = (log.undecided.groupBy("topic", "partition").agg(F.sort_array(F.collect_list("offset")).alias("offsets"))
            .orderBy("topic", "partition").collect())
    undecided = {(r["topic"], r["partition"]): list(r["offsets"]) for r in rows}
    return SparkAnalysis(analysis, len(txns), undecided, log.incomplete, log.end_from)


def isolation_check_spark(spark: Any, run: Path | str) -> tuple[CheckResult, dict[str, Any]]:
    """The isolation-cycle check's result and facts (judge.py's ``isolation_check``) by the Spark
    engine: Spark's analysis, the reference's judgement."""
    return judged(analyse_run_spark(spark, run))


def judged(found: SparkAnalysis) -> tuple[CheckResult, dict[str, Any]]:
    """The result and facts of a Spark analysis: the reference's judgement (cycles.judge at
    judge.JUDGED_AT) and result (judge.isolation_result)."""
    out = judge(found.analysis, JUDGED_AT)
    return isolation_result(out, found.transactions, found.undecided, found.incomplete, found.end_from)


def isolation_cross_check(run: Path | str, reference: tuple[CheckResult, dict[str, Any]], spark: Any = None,
                          master: str | None = None) -> list[str]:
    """The Spark engine's isolation check of ``run`` against the reference's (``reference``: its
    isolation CheckResult and facts, judge.py's ``isolation_check`` or ``txn_run_checks``' first
    check and facts): the differences (judge.isolation_disagreements), empty when they agree.
    Without a ``spark`` session one is started on ``master`` (env.spark_session's default) and
    stopped after."""
    own = None
    if spark is None:
        spark = own = spark_session(master, app="kchaos-isolation-cross-check")
    try:
        return isolation_disagreements(isolation_check_spark(spark, run), reference)
    finally:
        if own is not None:
            own.stop()
