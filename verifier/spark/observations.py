"""The Spark engine's read-side queries over the observers' reads (the Python reference is
verifier/observations.py; what each check means is in verifier/checks.py). The observations
and the final log's positions and CRCs are joined on the executors; only the cases reach the
driver."""

from __future__ import annotations

from typing import Any

from kchaos.verifier.checks import explain, implements, result
from kchaos.verifier.observations import (OBSERVATIONS, READ_EPS_S, before_commit_case, before_seed_case,
                                         judges_reads_before_commit, seeded_inputs)
from kchaos.verifier.results import CheckResult
from kchaos.verifier.spark.run import SparkRun

KEY = ["topic", "partition", "offset"]
WALK = ["observer", "topic", "partition"]


def observed(d: SparkRun) -> tuple[Any, Any, Any]:
    """(observations, the final raw log as positions and value CRCs, the committed positions) of
    the topics the observers were assigned; built once for every read-side check."""

    def build() -> tuple[Any, Any, Any]:
        from pyspark import StorageLevel

        F = d.F
        topics = [d.workload.input_topic, *d.workload.output_topics]
        obs = d.spark.read.parquet(str(d.run / OBSERVATIONS)).persist(StorageLevel.MEMORY_AND_DISK)
        raw = committed = None
        for t in topics:
            r = d.topics.read(d.spark, t, "raw").select(
                F.lit(t).alias("topic"), "partition", "offset",
                F.crc32(F.coalesce(F.col("value"), F.lit(bytearray()))).alias("final_crc"))
            c = d.topics.read(d.spark, t, "committed").select(F.lit(t).alias("topic"), "partition", "offset")
            raw = r if raw is None else raw.unionByName(r)
            committed = c if committed is None else committed.unionByName(c)
        return (obs, raw.persist(StorageLevel.MEMORY_AND_DISK), committed.persist(StorageLevel.MEMORY_AND_DISK))

    return d.shared("observed", build)


def _case(d: SparkRun, kind: str, row: Any, **extra: Any) -> dict[str, Any]:
    fields = {k: row[k] for k in ("observer", "topic", "partition", "offset", "poll")}
    return {"explanation": explain(kind, **fields, **extra),
            "observation": {**fields, "observed_at": row["time"], "crc": row["crc"]},
            "faults_active": d.history.faults_at(row["time"]), **{k: v for k, v in extra.items() if k != "isolation"}}


def _first(df: Any) -> list[Any]:
    return df.orderBy("observer", "seq").collect()


@implements("inconsistent-offsets", "spark")
def check_inconsistent_offsets(d: SparkRun) -> CheckResult:
    F = d.F
    obs, raw, _ = observed(d)
    rows = _first(obs.join(raw, KEY, "left").filter(F.col("final_crc").isNull() | (F.col("final_crc") != F.col("crc"))))
    return result("inconsistent-offsets", [
        _case(d, "inconsistent-offsets.truncated" if r["final_crc"] is None else "inconsistent-offsets.replaced", r,
              final_crc=r["final_crc"]) for r in rows])


@implements("observed-aborted-read", "spark")
def check_observed_aborted_read(d: SparkRun) -> CheckResult:
    obs, raw, committed = observed(d)
    rows = _first(obs.join(raw, KEY).join(committed, KEY, "left_anti"))
    isolation = d.campaign.observers.isolation
    cases = [_case(d, "observed-aborted-read", r, isolation=isolation) for r in rows]
    return result("observed-aborted-read", cases + _reads_before_commit(d) + _reads_before_seed(d))


def _reads_before_commit(d: SparkRun) -> list[dict[str, Any]]:
    """observations.reads_before_commit as joins: observations of a committed output (the record
    read, by its CRC) whose transaction's commit was requested after the read."""
    if not judges_reads_before_commit(d.workload, d.history):
        return []
    F = d.F
    obs, raw, _ = observed(d)
    outputs = d.outputs["committed"].filter(F.col("worker").isNotNull()).select(*KEY, "process", "txn_seq")
    requested = d.transactions.filter(F.col("sent") & F.col("commit_requested").isNotNull()).select(
        "process", "txn_seq", "commit_requested")
    early = (obs.join(raw, KEY).filter(F.col("crc") == F.col("final_crc")).join(outputs, KEY)
             .join(requested, ["process", "txn_seq"])
             .filter(F.col("time") < F.col("commit_requested") - READ_EPS_S))
    return [before_commit_case(r, (r["process"], r["txn_seq"]), r["commit_requested"], d.history.faults_at(r["time"]),
                               d.history.txn_evidence((r["process"], r["txn_seq"]))) for r in _first(early)]


def _reads_before_seed(d: SparkRun) -> list[dict[str, Any]]:
    """observations.reads_before_seed as joins: observations of a committed input (the record
    read, by its CRC) before the seeder began the transaction it was acknowledged in."""
    seeded = seeded_inputs(d.history, d.workload.input_topic)
    if not seeded:
        return []
    F = d.F
    obs, raw, _ = observed(d)
    began = d.spark.createDataFrame([(t, p, o, key[0], key[1], at) for (t, p, o), (key, at) in seeded.items()],
                                    "topic STRING, partition INT, offset BIGINT, process STRING, txn_seq BIGINT, "
                                    "seed_invoked DOUBLE")
    early = (obs.join(raw, KEY).filter(F.col("crc") == F.col("final_crc")).join(began, KEY)
             .filter(F.col("time") < F.col("seed_invoked") - READ_EPS_S))
    return [before_seed_case(r, (r["process"], r["txn_seq"]), r["seed_invoked"], d.history.faults_at(r["time"]),
                             d.history.txn_evidence((r["process"], r["txn_seq"]))) for r in _first(early)]


def _with_previous(d: SparkRun) -> Any:
    from pyspark.sql import Window

    obs, _, _ = observed(d)
    return obs.withColumn("previous", d.F.lag("offset").over(Window.partitionBy(*WALK).orderBy("seq")))


@implements("poll-skip", "spark")
def check_poll_skip(d: SparkRun) -> CheckResult:
    F = d.F
    _, _, committed = observed(d)
    walk = _with_previous(d).withColumn("previous", F.coalesce("previous", F.lit(-1)))
    c = committed.select(F.col("topic").alias("c_topic"), F.col("partition").alias("c_partition"),
                         F.col("offset").alias("c_offset"))
    gaps = (walk.filter(F.col("offset") > F.col("previous") + 1)
            .join(c, (F.col("topic") == F.col("c_topic")) & (F.col("partition") == F.col("c_partition"))
                  & (F.col("c_offset") > F.col("previous")) & (F.col("c_offset") < F.col("offset")))
            .groupBy("observer", "seq", "poll", "time", "topic", "partition", "offset", "crc", "previous")
            .agg(F.count("c_offset").alias("skipped"), F.min("c_offset").alias("first_skipped")))
    cases = [_case(d, "poll-skip.start" if r["previous"] < 0 else "poll-skip", r, previous=r["previous"],
                   skipped=r["skipped"], first_skipped=r["first_skipped"]) for r in _first(gaps)]
    return result("poll-skip", cases)


@implements("nonmonotonic-poll", "spark")
def check_nonmonotonic_poll(d: SparkRun) -> CheckResult:
    F = d.F
    back = _with_previous(d).filter(F.col("previous").isNotNull() & (F.col("offset") <= F.col("previous")))
    return result("nonmonotonic-poll", [_case(d, "nonmonotonic-poll", r, previous=r["previous"]) for r in _first(back)])


@implements("unseen", "spark")
def check_unseen(d: SparkRun) -> CheckResult:
    F = d.F
    obs, _, committed = observed(d)
    missed = (committed.join(obs.select(*KEY).distinct(), KEY, "left_anti").groupBy("topic", "partition")
              .agg(F.count("offset").alias("count"), F.min("offset").alias("first"), F.max("offset").alias("last"),
                   F.slice(F.sort_array(F.collect_list("offset")), 1, 20).alias("offsets"))
              .orderBy("topic", "partition").collect())
    return result("unseen", [{"explanation": explain("unseen", topic=r["topic"], partition=r["partition"],
                                                     count=r["count"], first=r["first"], last=r["last"]),
                              "offsets": list(r["offsets"])} for r in missed])
