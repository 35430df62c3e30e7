"""The Spark engine's queries: one per registered check (verifier/checks.py holds what each
means; here only which records, transactions or log entries make a case), the facts, and
:func:`check_run_spark`, which runs them over a :class:`~kchaos.verifier.spark.run.SparkRun`.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kchaos.verifier import driver_checks, evidence  # noqa: F401 (driver_checks: its checks register for both engines)
from kchaos.verifier.spark import observations as spark_observations  # noqa: F401 (its read-side checks register)
from kchaos.verifier.acknowledged import seeder_count_cases
from kchaos.verifier.checks import OUTPUT_ID, explain, implements, lost_write_outputs, lost_write_text, output_id, passed_over_evidence, progress_result, reread_evidence, result, run_checks
from kchaos.verifier.engine import engine_class
from kchaos.verifier.late_requests import events_path, late_request_facts, read_message_events
from kchaos.verifier.markers import commit_marker_facts
from kchaos.verifier.sequences import sequence_reuse_facts
from kchaos.verifier.model import (DIGEST_MAX_CASES, MAX_CASES, OPEN_TXN_STATES, TXN_NEXT, abandoned_note,
                                   commits_by_client_tv, hanging_cases, pipeline_txids, zombie_successor)
from kchaos.verifier.producer_ids import PREPARED, judge_producer_ids
from kchaos.verifier.run_data import RunData
from kchaos.verifier.results import CheckResult, Results, VALID
from kchaos.verifier.share_checks import share_checks
from kchaos.verifier.spark.run import SparkRun, txn_log_entries, txn_log_entries_of_producers, raw_only

#: checks (and the facts) submitted to Spark at once. At a small run's size a query is mostly the
#: driver planning and compiling it, one thread at a time per query, while the executors idle;
#: queries from several threads overlap that (docs/benchmarks.md, 2026-11-25)
CHECK_THREADS = 3


def _first_cases(df: Any, *order: str) -> tuple[list[Any], int]:
    """The cases' rows in ``order`` and the exact total: every row up to DIGEST_MAX_CASES, so that
    the cross-check can compare every case's explanation (checks.result digests them; evidence
    is fetched for the first MAX_CASES only), else the first MAX_CASES. Counts only when there
    are more (a clean run costs one Spark job per check, not two)."""
    rows = df.orderBy(*order).limit(DIGEST_MAX_CASES + 1).collect()
    if len(rows) <= DIGEST_MAX_CASES:
        return rows, len(rows)
    return rows[:MAX_CASES], df.count()


def _evidence_for(rows: list[Any], total: int) -> list[Any]:
    """The cases whose records are fetched: the ones a result keeps (MAX_CASES), and every one
    when the result records each case's place (it holds them all, and more than it keeps:
    checks.result), since a case without a history time (a user's app keeps none) is placed by its
    records' timestamps and named by their transactional ids (certify.py): without them the
    certification could place none of the cases it was not shown (certify-tv-flip-app-unsafe seed
    45, 2026-12-02: 188 of 238 duplicates unplaced by this engine, none by the Python one)."""
    return rows if len(rows) == total and total > MAX_CASES else rows[:MAX_CASES]


def _records_of(d: SparkRun, df: Any, cases: list[Any], key: list[str], limit: int) -> dict[tuple, list[Any]]:
    """The evidence records (first ``limit`` in record order) of the cases a result keeps (the
    first MAX_CASES, or every case where their places are recorded: _evidence_for), by key. Checks find cases on counts alone and fetch
    records only for the cases they report: collecting every group's records would cost a clean
    run the most."""
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
    """Committed outputs per transaction (process, txn_seq), as records: torn reads it."""
    return d.shared("seen_per_transaction", lambda: (
        d.outputs["committed"].groupBy("process", "txn_seq").agg(d.F.count("*").alias("seen")).persist()))


def _aborted_inputs(d: SparkRun) -> Any:
    """Inputs in the raw view only (aborted or undecided input transactions)."""
    return d.shared("aborted_inputs", lambda: raw_only(d.inputs["raw"], d.inputs["committed"], ("p",), "o").persist())


# ---------------------------------------------------------------------------------------------
# Checks (each returns a CheckResult; looked up by name at call time)


@implements("duplicate", "spark")
def check_duplicate(d: SparkRun) -> CheckResult:
    key = ["in_partition", "in_offset", "slot"]
    rows, total = _first_cases(_duplicate_keys(d), *key)
    records = _records_of(d, d.outputs["committed"], _evidence_for(rows, total), key, 10)
    cases = []
    for r in rows:
        found = [d.record(x) for x in records.get(tuple(r[c] for c in key), [])]
        cases.append(d.case(explain("duplicate", p=r["in_partition"], o=r["in_offset"], slot=r["slot"], n=r["n"]),
                            found, **reread_evidence(d.history, r["in_partition"], found)))
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


@implements("lost-input", "spark")
def check_lost_input(d: SparkRun) -> CheckResult:
    F = d.F
    lost = _unexplained(d)
    if d.history.has_history:
        lost = lost.filter(F.col("processed").isNotNull())
    rows, total = _first_cases(lost, "p", "o")
    cases = []
    for r in rows:
        ops = d.history.input_ops.get((r["p"], r["o"]), [])
        cases.append({"explanation": explain("lost-input", in_id=r["in_id"], topic=d.workload.input_topic, p=r["p"],
                                             o=r["o"], final=d.final_offsets.get(r["p"])),
                      "input": {"partition": r["p"], "offset": r["o"], "id": r["in_id"]},
                      "transactions": [d.history.txn_evidence((op["process"], op["value"]["txn_seq"])) for op in ops],
                      **passed_over_evidence(d.history, r["p"], r["o"])})
    return result("lost-input", cases, total)


@implements("offsets-ahead", "spark")
def check_offsets_ahead(d: SparkRun) -> CheckResult:
    F = d.F
    ahead = _unexplained(d).filter(F.col("processed").isNull())
    rows, total = _first_cases(ahead, "p", "o")
    cases = []
    for r in rows:
        p, o = r["p"], r["o"]
        commit = next((c for c in d.offset_log or [] if c["partition"] == p and c["offset"] > o), None)
        cases.append({"explanation": explain("offsets-ahead", topic=d.workload.input_topic, p=p, in_id=r["in_id"], o=o),
                      "input": {"partition": p, "offset": o, "id": r["in_id"]},
                      "offset_commit": commit or {"partition": p, "offset": d.final_offsets.get(p),
                                                  "source": "final group offsets"}})
    return result("offsets-ahead", cases, total)


@implements("torn-transaction", "spark")
def check_torn_transaction(d: SparkRun) -> CheckResult:
    F = d.F
    committed = d.outputs["committed"]
    key = ["in_partition", "in_offset"]
    flagged = F.col("slots_seen") < d.k
    partial = (_outputs_of_flagged_inputs(d, flagged).groupBy(*key).agg(F.sort_array(F.collect_set("slot")).alias("have"))
               .filter(F.size("have") < d.k))
    rows, total = _first_cases(partial, *key)
    records = _records_of(d, committed, _evidence_for(rows, total), key, 20)
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
        hidden = _records_of(d, d.raw_only_outputs, _evidence_for(rows, more), key, 20)
        for r in rows:
            cases.append(d.case(explain("torn-transaction.hidden", seq=r["txn_seq"], process=r["process"], seen=r["seen"],
                                        written=r["written"]),
                                [d.record(x) for x in hidden.get((r["process"], r["txn_seq"]), [])]))
    return result("torn-transaction", cases, total)


@implements("aborted-read", "spark")
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
    coordinator_aborted = d.coordinator_aborted()
    if coordinator_aborted:  # the coordinator's log shows aborted (its client never learned the end, or saw a commit)
        keys = d.spark.createDataFrame(sorted((p, seq, kind) for (p, seq), kind in coordinator_aborted.items()),
                                       "process STRING, txn_seq BIGINT, kind STRING")
        rows, more = _first_cases(committed.join(F.broadcast(keys), ["process", "txn_seq"]), "topic", "partition",
                                  "offset")
        total += more
        cases += [d.case(explain(r["kind"], seq=r["txn_seq"], process=r["process"]), [d.record(r)]) for r in rows]
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
    topic = d.workload.input_topic
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


@implements("lost-acknowledged-input", "spark")
def check_lost_acknowledged_input(d: SparkRun) -> CheckResult:
    """pychecker.check_lost_acknowledged_input as joins: the seeder's committed acknowledgements
    against the committed input log, by position (and by id where positions were not recorded)."""
    F = d.F
    ack, topic = d.acknowledged, d.workload.input_topic
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
    counted = seeder_count_cases(d.final, d.shared("input_log_count", d.input_log.count), topic)
    return result("lost-acknowledged-input", cases + counted, total + len(counted))


@implements("input-mismatch", "spark")
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


@implements("lost-write", "spark")
def check_lost_write(d: SparkRun) -> CheckResult:
    """pychecker.check_lost_write as a join: the transactions the client saw commit, and those the
    coordinator's log shows committed though their client did not, against their visible outputs."""
    F = d.F
    key = ["process", "txn_seq"]
    # distinct outputs (input, slot): a copy written twice (F12) must not hide one never written
    seen = d.outputs["committed"].groupBy(*key).agg(F.countDistinct(*OUTPUT_ID).alias("seen"))
    committed = F.col("outcome") == "committed"
    by_coordinator = d.coordinator_committed()
    if by_coordinator:
        wanted = d.spark.createDataFrame(sorted(by_coordinator), "process STRING, txn_seq BIGINT").withColumn(
            "by_coordinator", F.lit(True))
        transactions = d.transactions.join(F.broadcast(wanted), key, "left")
        committed = committed | F.col("by_coordinator").isNotNull()
    else:
        transactions = d.transactions
    lost = (transactions.filter(committed & F.col("expected_outputs").isNotNull())
            .join(seen, key, "left").fillna(0, ["seen"]).filter(F.col("seen") < F.col("expected_outputs")))
    rows, total = _first_cases(lost, *key)
    cases = []
    for i, r in enumerate(rows):  # evidence for the cases the result keeps
        txn = (r["process"], r["txn_seq"])
        if i >= MAX_CASES:  # no records, but its transaction's history: where the certification places it
            cases.append(d.case(lost_write_text(txn, r["seen"], r["expected_outputs"], r["outcome"]), [],
                                transaction=d.history.txn_evidence(txn)))
            continue
        # every raw record of the transaction (a transaction's few): its distinct outputs, and the evidence
        raw = (d.outputs["raw"].filter((F.col("process") == r["process"]) & (F.col("txn_seq") == r["txn_seq"]))
               .orderBy("topic", "partition", "offset").collect())
        cases.append(d.case(lost_write_text(txn, r["seen"], r["expected_outputs"], r["outcome"]),
                            [d.record(x) for x in raw[:20]], transaction=d.history.txn_evidence(txn),
                            **lost_write_outputs(r["seen"], r["expected_outputs"], len({output_id(x) for x in raw}))))
    return result("lost-write", cases, total)


@implements("offsets-behind", "spark")
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


def _next_sql(src_col: str, col: str) -> str:
    """``col`` IN TXN_NEXT[``src_col``], as SQL."""
    # A state with no successor (Dead) must render as false: "status IN (NULL)" is NULL, and a
    # NULL filter drops the row, so a transition out of Dead would never be reported.
    whens = " ".join(f"WHEN '{src}' THEN " + (f"{col} IN ({', '.join(repr(t) for t in sorted(dst))})" if dst else "false")
                     for src, dst in TXN_NEXT.items())
    return f"(CASE {src_col} {whens} ELSE false END)"


def _step_from_before_sql(status: str, pid: str, epoch: str) -> str:
    """model._step_from(before, ...) as SQL, ``before`` being the ``prev2_*`` columns."""
    return (f"(NOT ({pid} = prev2_pid AND {epoch} NOT IN (prev2_epoch, prev2_epoch + 1)) "
            f"AND ({_next_sql('prev2_status', status)} "
            f"OR ({status} = prev2_status AND {pid} = prev2_pid AND {epoch} > prev2_epoch)))")


def _abandoned_append_sql() -> str:
    """model.abandoned_append as SQL over a step's columns (``prev2_*``: the record before ``prev_*``)."""
    return ("(prev_status <> 'Dead' AND NOT (prev_status = prev2_status AND prev_epoch = prev2_epoch) "
            f"AND {_step_from_before_sql('prev_status', 'prev_pid', 'prev_epoch')} AND prev_pid = prev2_pid "
            f"AND {_step_from_before_sql('status', 'producer_id', 'producer_epoch')})")


@implements("invalid-txn-transition", "spark")
def check_invalid_txn_transition(d: SparkRun) -> CheckResult:
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
             .withColumn("prev2_status", F.lag("status", 2).over(w)).withColumn("prev2_pid", F.lag("producer_id", 2).over(w))
             .withColumn("prev2_epoch", F.lag("producer_epoch", 2).over(w))
             .filter(F.col("producer_id").isNotNull() & F.col("prev_status").isNotNull() & ~F.col("prev_tombstone"))
             .withColumn("allowed", F.expr(_next_sql("prev_status", "status")))
             .withColumn("abandoned", F.coalesce(F.expr(_abandoned_append_sql()), F.lit(False))))
    illegal = (F.col("status") != F.col("prev_status")) & ~F.col("allowed")
    backwards = ~illegal & (F.col("producer_id") == F.col("prev_pid")) & (F.col("producer_epoch") < F.col("prev_epoch"))
    abandoned = steps.filter((illegal | backwards) & F.col("abandoned")).count()
    bad_state = illegal & ~F.col("abandoned")
    bad_epoch = backwards & ~F.col("abandoned")
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
    pid_cases, d.producer_id_facts = judge_producer_ids(*_producer_id_candidates(d, log, steps))
    found = result("invalid-txn-transition", cases + pid_cases, total + len(pid_cases))
    if abandoned:
        found.note = abandoned_note(abandoned)
    return found


def _producer_id_candidates(d: SparkRun, log: Any, steps: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                                                        list[dict[str, Any]], int, list[dict[str, Any]]]:
    """verifier/producer_ids.py's candidates, found with the transition window: producer id
    changes between consecutive records of one id, negative epochs, producer ids of two ids."""
    F = d.F
    changes = [{"transactional_id": r["transactional_id"], "log_partition": r["partition"],
                "from_offset": r["prev_offset"], "from_pid": r["prev_pid"], "from_epoch": r["prev_epoch"],
                "from_status": r["prev_status"], "to_offset": r["offset"], "to_pid": r["producer_id"],
                "to_epoch": r["producer_epoch"], "to_status": r["status"], "at_ms": r["last_update_ms"]}
               for r in steps.filter(F.col("producer_id") != F.col("prev_pid")).collect()]
    live = log.filter(F.col("producer_id").isNotNull())
    negative = [{"transactional_id": r["transactional_id"], "log_partition": r["partition"], "offset": r["offset"],
                 "producer_id": r["producer_id"], "epoch": r["producer_epoch"], "status": r["status"]}
                for r in live.filter(F.col("producer_epoch") < 0).collect()]
    shared = [{"producer_id": r["producer_id"], "transactional_ids": sorted(r["ids"])}
              for r in live.groupBy("producer_id").agg(F.collect_set("transactional_id").alias("ids"))
              .filter(F.size("ids") > 1).collect()]
    max_epoch = live.agg(F.max("producer_epoch").alias("m")).collect()[0]["m"]
    twice = (steps.filter((F.col("producer_id") == F.col("prev_pid")) & (F.col("prev_status") == "Ongoing")
                          & F.col("status").isin(*PREPARED) & (F.col("producer_epoch") - F.col("prev_epoch") == 2)))
    bumped_twice = [{"transactional_id": r["transactional_id"], "log_partition": r["partition"], "offset": r["offset"],
                     "status": r["status"], "from_epoch": r["prev_epoch"], "to_epoch": r["producer_epoch"]}
                    for r in twice.collect()]
    return changes, negative, shared, -1 if max_epoch is None else max_epoch, bumped_twice


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


@implements("hanging-transaction", "spark")
def check_hanging_transaction(d: SparkRun) -> CheckResult:
    cases, note = hanging_cases(d.workload, d.final, _open_transactions(d) if not d.final["liveness"].get("stable") else [],
                                pipeline_txids(d.campaign, d.history))
    return result("hanging-transaction", cases) if cases else CheckResult("hanging-transaction", VALID, note=note)


@implements("zombie-write", "spark")
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


@implements("nonmonotonic", "spark")
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
    kept = rows[:MAX_CASES]  # the cases a result keeps get their two records as evidence
    # each case's earlier record: the latest one before it in its stream with the highest in_offset
    wanted = d.spark.createDataFrame([(r["topic"], r["partition"], r["in_partition"], r["highest"], r["offset"])
                                      for r in kept], first.select(*stream_key, "in_offset", F.col("offset").alias("before")).schema)
    found = (first.join(F.broadcast(wanted), [*stream_key, "in_offset"]).filter(F.col("offset") < F.col("before"))
             .groupBy(*stream_key, "before").agg(F.max("offset").alias("earlier")).collect())
    earlier = {(x["topic"], x["partition"], x["in_partition"], x["before"]): x["earlier"] for x in found}
    records = _records_at(d, [(r["topic"], r["partition"], r["offset"]) for r in kept]
                          + [(r["topic"], r["partition"], earlier[(r["topic"], r["partition"], r["in_partition"], r["offset"])])
                             for r in kept])
    cases = [d.case(explain("nonmonotonic", topic=r["topic"], partition=r["partition"], p=r["in_partition"],
                            o=r["in_offset"], earlier=r["highest"]),
                    [d.record(records[(r["topic"], r["partition"], earlier[(r["topic"], r["partition"], r["in_partition"],
                                                                             r["offset"])])]),
                     d.record(records[(r["topic"], r["partition"], r["offset"])])] if i < MAX_CASES else [])
             for i, r in enumerate(rows)]
    return result("nonmonotonic", cases, total)


def _records_at(d: SparkRun, coordinates: list[tuple[str, int, int]]) -> dict[tuple[str, int, int], Any]:
    """Committed outputs by (topic, partition, offset): the few records a check cites."""
    key = ["topic", "partition", "offset"]
    found = _records_of(d, d.outputs["committed"], [dict(zip(key, c)) for c in sorted(set(coordinates))], key, 1)
    return {coordinate: records[0] for coordinate, records in found.items()}


@implements("no-progress", "spark")
def check_no_progress(d: SparkRun) -> CheckResult:
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


def facts(d: SparkRun) -> dict[str, Any]:
    from collections import Counter


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
        "sequence_reuse": sequence_reuse_facts(d.segments, d.history.ops),
        "commits_by_client_tv_per_txid": per_txid,
        "liveness": d.final.get("liveness"),
        "topic_source": d.source,
        # small data (the proxy's events and their transactional ids' log records), one definition
        # for both engines; only when the run had message faults
        "late_requests": (late_request_facts(d.run, txn_log_entries(d, read_message_events(d.run)), d.history.ops)
                          if events_path(d.run).exists() else None),
        "commit_markers": commit_marker_facts(d.segments, lambda pids: txn_log_entries_of_producers(d, pids),
                                              driver_checks.clock_skew_windows(d.history)),
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
        share = run_checks(results, data, SparkEngine(), pool)
        try:
            results.facts = {**counted.result(), **evidence.white_box_facts(data)}
        except Exception as exc:
            results.errors.append(f"facts could not be computed: {exc!r}")
    if share:
        # The share ledger is per record and per delivery, built in the driver from the client
        # dumps and the history (verifier/share_checks.py); the other checks above ran on Spark.

        checks, share_facts = share_checks(RunData(Path(run), data.history.ops))
        results.checks.extend(checks)
        results.facts["share"] = share_facts
    spark.catalog.clearCache()
    return results


#: the Spark job: the queries above, the read-side ones (spark/observations.py) and the driver-side checks
SparkEngine = engine_class("spark", "The Spark job's engine (verifier/engine.py).", __name__)
