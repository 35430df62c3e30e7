"""The ``txn`` workload (issue 77, item 2) on hand-made data: its spec and campaign refusals, the
worker's decisions after each error and what each ending records (pure functions: the worker's
loop itself meets real brokers in the integration tier, not a fake), the history and the dumps read
as the isolation checker's inputs, and the reader with verifier/isolation/cycles.py end to end on a
run directory with a known wr-only cycle and on a clean one."""

from __future__ import annotations

import json
import random
from pathlib import Path
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from kchaos.cli.plan import estimate
from kchaos.errors import ConfigError
from kchaos.harness.campaign import load_campaign
from kchaos.reports.what_ran import workload_line
from kchaos.verifier.checks import CHECK_NAMES, NOT_FOR_TXN, TXN_ISOLATION_CHECK
from kchaos.verifier.isolation.cycles import LogRecord, Poll, Send, check
from kchaos.verifier.isolation.history import (log_from_dump, read_dumped_log, read_txn_run, txn_id,
                                               txns_from_history)
from kchaos.verifier.spec import VerifierSpec
from kchaos.verifier.verify import verify_run
from kchaos.workloads import make_workload
from kchaos.workloads.history import HistoryWriter, pair_operations, read_history
from kchaos.workloads.pool import WorkerPool
from kchaos.workloads.spec import WorkloadSpec
from kchaos.workloads.txn import TxnWorkload
from kchaos.workloads.txn_worker import (ABORT, FATAL, FENCED, OUTCOME_OF_ENDING, RETRY, UNKNOWN, ErrorFacts,
                                         PlannedPoll, PlannedSend, after_abort_error, after_commit_error,
                                         after_step_error, ending_after_abort_failure, plan_transaction, value_name)
from tests.txn_runs import TOPIC, complete, invoke, poll, send, txn_run, write_final, write_view
from tests.txn_runs import stable as _stable


# --- the spec --------------------------------------------------------------------------------------


def test_a_txn_spec_is_accepted_with_its_defaults_and_survives_the_workers_round_trip():
    spec = WorkloadSpec(kind="txn", workers=4, txn_partitions=8, txn_max_ops=3, txn_poll_fraction=0.4,
                        abort_fraction=0.02)
    assert (spec.txn_topic, spec.txn_partitions, spec.txn_max_ops, spec.txn_rate) == (TOPIC, 8, 3, 10.0)
    assert spec.transactional_ids("kchaos-x") == [f"kchaos-x-w{i}" for i in range(4)]
    # each worker validates the spec again from its config file (workloads/pool.py writes model_dump)
    assert WorkloadSpec.model_validate(spec.model_dump(mode="json")) == spec
    assert not spec.is_negative_control


@pytest.mark.parametrize("fields, needle", [
    ({"client": "java"}, "client = 'java'"),
    ({"client": "mixed"}, "client = 'mixed'"),
    ({"client": "franz-go"}, "client = 'franz-go'"),
    ({"external_command": ["my-app"]}, "external_command"),
    ({"delivery": "at-least-once"}, "delivery = 'at-least-once'"),
    ({"transactional_id_strategy": "per-partition"}, "transactional_id_strategy = 'per-partition'"),
    ({"records": 1000}, "workload.records (there is no seeder"),
    ({"static_membership": True}, "join no group"),
    ({"group_protocol": "consumer"}, "join no group"),
    ({"after_failed_transaction": "carry-on"}, "carry-on"),
    ({"epochs_before_rollover": 10}, "epochs_before_rollover"),
    ({"txn_topic": "kchaos-input"}, "txn_topic 'kchaos-input'"),
])
def test_what_a_txn_workload_cannot_run_is_refused_with_the_reason(fields, needle):
    with pytest.raises(ValidationError) as err:
        WorkloadSpec(kind="txn", **fields)
    assert needle in str(err.value)


@pytest.mark.parametrize("fields", [{"txn_partitions": 0}, {"txn_partitions": 65}, {"txn_max_ops": 0},
                                    {"txn_poll_fraction": 1.5}, {"txn_rate": 0}, {"txn_poll_max_records": 0}])
def test_txn_fields_out_of_range_are_refused(fields):
    with pytest.raises(ValidationError):
        WorkloadSpec(kind="txn", **fields)


CAMPAIGN = """
name = "txn-example"
[run]
duration_s = 60
[cluster]
backend = "local"
nodes = 3
[workload]
kind = "txn"
workers = 3
txn_partitions = 4
abort_fraction = 0.02
[faults]
[[faults.mix]]
kind = "kill"
target = "txn-coordinator"
duration_s = 6
"""


def test_a_txn_campaign_loads_and_what_needs_a_group_or_the_pipeline_topics_is_a_config_error(tmp_path):
    path = tmp_path / "txn.toml"
    path.write_text(CAMPAIGN)
    campaign = load_campaign(path)
    assert campaign.workload.kind == "txn" and campaign.observers.count == 0
    for override, needle in [("observers.count=1", "observers read the consume-transform-produce topics"),
                             ('faults.mix=[{kind = "kill", target = "leader-output"}]', "no output topic"),
                             ('faults.mix=[{kind = "kill", target = "group-coordinator"}]', "no consumer group"),
                             ('faults.mix=[{kind = "zombie", target = "random-worker"}]',
                              "joins no group"),
                             ("workload.client=java", "client = 'java'")]:
        with pytest.raises(ConfigError) as err:
            load_campaign(path, [override])
        assert needle in str(err.value) and err.value.exit_code == 3, override


def test_the_pool_starts_the_txn_worker_and_the_driver_is_the_txn_one(tmp_path):
    spec = WorkloadSpec(kind="txn")
    pool = WorkerPool(spec, {"bootstrap.servers": "b:9092"}, tmp_path, 1, "kchaos-x", None)
    argv = pool._argv(tmp_path / "w0.1.json", {"slot": pool.slot_info("w0")})
    assert argv[1:3] == ["-m", "kchaos.workloads.txn_worker"]
    run = SimpleNamespace(path=tmp_path)
    cluster = SimpleNamespace(client_config=lambda: {"bootstrap.servers": "b:9092"})
    driver = make_workload(spec, cluster, run, 1, None)
    assert isinstance(driver, TxnWorkload) and driver.user_topics == [TOPIC]
    assert driver.drain(5.0) is True and "no input waits" in driver.drain_record["not_applicable"]
    assert "partitions of kchaos-txn" in workload_line(spec)


def test_the_plan_of_a_txn_campaign_has_no_drain_and_the_verifier_its_engines_take(tmp_path):
    path = tmp_path / "txn.toml"
    path.write_text(CAMPAIGN)
    phases = estimate(load_campaign(path), [])
    assert phases["drain"] == 0.0 and phases["verify"] == 60.0 and phases["workload"] == 60  # the reference, then Spark
    assert estimate(load_campaign(path, ["verifier.engine=python"]), [])["verify"] == 5.0


# --- the worker's decisions (pure) -----------------------------------------------------------------


def facts(code: int, **flags: bool) -> ErrorFacts:
    return ErrorFacts.of(KafkaException(KafkaError(code, "test", **flags)))


def test_the_error_facts_are_read_from_librdkafkas_error():
    f = facts(KafkaError._TIMED_OUT, retriable=True)
    assert (f.code, f.retriable, f.fatal, f.txn_requires_abort, f.fenced) == (KafkaError._TIMED_OUT, True, False,
                                                                            False, False)
    assert facts(KafkaError.PRODUCER_FENCED).fenced and facts(KafkaError._FATAL).is_fatal
    assert ErrorFacts.of(RuntimeError("not kafka")).code is None


def test_after_a_failed_step_abortable_aborts_and_fenced_or_fatal_exits():
    assert after_step_error(facts(KafkaError._STATE)) == ABORT  # produce() after a background error
    assert after_step_error(facts(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, txn_requires_abort=True)) == ABORT
    assert after_step_error(facts(KafkaError.PRODUCER_FENCED)) == FENCED
    assert after_step_error(facts(KafkaError.INVALID_PRODUCER_EPOCH, txn_requires_abort=True)) == FENCED
    assert after_step_error(facts(KafkaError._FATAL)) == FATAL  # a bare _FATAL, no fatal flag
    assert after_step_error(ErrorFacts(KafkaError._FATAL, fenced_in_log=True)) == FENCED  # librdkafka's log said so
    assert after_step_error(facts(KafkaError._MSG_TIMED_OUT)) == FATAL  # unexpected: exit, the pool restarts it


def test_after_a_failed_commit_retriable_retries_abortable_aborts_the_rest_is_unknown():
    timed_out = facts(KafkaError._TIMED_OUT, retriable=True)
    assert [after_commit_error(timed_out, n, 5) for n in (1, 4, 5)] == [RETRY, RETRY, UNKNOWN]
    assert after_commit_error(facts(KafkaError._OUTDATED, txn_requires_abort=True), 1) == ABORT
    assert after_commit_error(facts(KafkaError.PRODUCER_FENCED, retriable=True), 1) == FENCED
    assert after_commit_error(facts(KafkaError._FATAL, fatal=True), 1) == FATAL
    assert after_commit_error(facts(KafkaError._TRANSPORT), 1) == UNKNOWN
    assert after_abort_error(facts(KafkaError.PRODUCER_FENCED)) == FENCED
    assert after_abort_error(facts(KafkaError._TIMED_OUT, retriable=True)) == FATAL


def test_each_ending_records_its_outcome_honestly():
    assert OUTCOME_OF_ENDING == {"committed": "ok", "aborted": "fail", "abandoned": "fail", "commit-unknown": "info"}
    # an abort that was not confirmed: never asked to commit (or refused) cannot have committed
    assert ending_after_abort_failure(commit_requested=False, commit_refused=False) == "abandoned"
    assert ending_after_abort_failure(commit_requested=True, commit_refused=True) == "abandoned"
    assert ending_after_abort_failure(commit_requested=True, commit_refused=False) == "commit-unknown"


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32), st.integers(1, 8), st.integers(1, 6), st.sampled_from([0.0, 0.3, 1.0]))
def test_a_plan_has_one_to_max_ops_steps_on_the_keys_with_fresh_values(seed, partitions, max_ops, poll_fraction):
    counter = iter(value_name("w1.2", n) for n in range(10_000))
    plans = [plan_transaction(random.Random(seed), partitions, max_ops, poll_fraction, counter) for _ in range(5)]
    steps = [s for p in plans for s in p]
    assert all(1 <= len(p) <= max_ops for p in plans)
    sends = [s for s in steps if isinstance(s, PlannedSend)]
    assert all(0 <= s.partition < partitions for s in sends)
    assert len({s.value for s in sends}) == len(sends) and all(s.value.startswith("w1.2-") for s in sends)
    if poll_fraction == 0.0:
        assert not any(isinstance(s, PlannedPoll) for s in steps)
    if poll_fraction == 1.0:
        assert sends == []
    again = plan_transaction(random.Random(seed), partitions, max_ops, poll_fraction, iter(f"v{n}" for n in range(99)))
    assert [type(s) for s in again] == [type(s) for s in plans[0]]  # the seed decides the plan


# --- the history, as the worker writes it ---------------------------------------------------------


def paired(tmp_path: Path) -> list[dict]:
    return pair_operations(read_history(tmp_path / "history"))


def test_the_history_of_every_ending_becomes_transactions(tmp_path):
    w0 = HistoryWriter(tmp_path / "history" / "w0.1.jsonl", "w0.1")
    op = invoke(w0, 1, [send(0, "w0.1-0") | {"offset": None}, {"f": "poll"}], 0)
    complete(w0, op, 1, "ok", "committed", [send(0, "w0.1-0", 3), poll((1, 0, "w1.1-0"), (2, 5, "w1.1-1"),
                                                                        (1, 1, "w1.1-2")), poll()])
    op = invoke(w0, 2, [send(1, "w0.1-1")], 1)
    complete(w0, op, 2, "fail", "aborted", [send(1, "w0.1-1")], abort_reason="intentional")
    op = invoke(w0, 3, [send(2, "w0.1-2")], 2)
    complete(w0, op, 3, "info", "commit-unknown", [send(2, "w0.1-2")])
    invoke(w0, 4, [send(3, "w0.1-3"), {"f": "poll"}, send(0, "w0.1-4")], 3)  # killed: no completion
    w0.close()
    txns = {t.id: t for t in txns_from_history(paired(tmp_path))}
    assert list(txns) == ["w0.1#1", "w0.1#2", "w0.1#3", "w0.1#4"] and txn_id("w0.1", 1) == "w0.1#1"
    first = txns["w0.1#1"]
    assert (first.process, first.outcome) == ("w0.1", "committed") and first.complete >= first.invoke
    # a poll is one Poll per partition it returned, in first-seen order; an empty poll is none
    assert first.ops == (Send((TOPIC, 0), "w0.1-0"), Poll((TOPIC, 1), ((0, "w1.1-0"), (1, "w1.1-2"))),
                         Poll((TOPIC, 2), ((5, "w1.1-1"),)))
    assert txns["w0.1#2"].outcome == "aborted" and txns["w0.1#3"].outcome == "unknown"
    killed = txns["w0.1#4"]
    assert killed.outcome == "unknown" and killed.complete == killed.invoke
    assert killed.ops == (Send((TOPIC, 3), "w0.1-3"), Send((TOPIC, 0), "w0.1-4"))  # the plan's sends stand for it


def test_operations_that_are_not_transactions_are_left_out_and_a_topic_is_needed():
    ops = [{"f": "commit", "process": "w0.1", "invoke_time": 1.0, "complete_time": 2.0, "outcome": "ok",
            "value": {"txn_seq": 1}},
           {"f": "txn", "process": "w0.1", "invoke_time": 1.0, "complete_time": 2.0, "outcome": "ok",
            "value": {"txn_seq": 1, "ops": [send(0, "a")]}}]
    assert [t.ops for t in txns_from_history(ops, topic="t")] == [(Send(("t", 0), "a"),)]
    with pytest.raises(ValueError, match="names no topic"):
        txns_from_history(ops)


# --- the dumps ------------------------------------------------------------------------------------


def test_the_raw_dump_against_the_committed_one_gives_each_records_fate(tmp_path):
    # p0: a committed record, an aborted one, its marker's gap, a committed one, an undecided one past the LSO
    raw = [(0, 0, "a"), (0, 1, "b"), (0, 3, "c"), (0, 5, "open"), (1, 0, "x"), (2, 0, "half")]
    committed = [(0, 0, "a"), (0, 3, "c"), (1, 0, "x")]
    write_view(tmp_path, "raw", raw)
    write_view(tmp_path, "committed", committed)
    write_final(tmp_path, {0: 5, 1: 2, 2: 0, 3: 0}, partitions=4, incomplete=(2,))
    dumped = read_dumped_log(tmp_path, TOPIC)
    assert dumped.log == {
        (TOPIC, 0): [LogRecord(0, "a", True), LogRecord(1, "b", False), LogRecord(3, "c", True)],
        (TOPIC, 1): [LogRecord(0, "x", True)],
        (TOPIC, 3): [],  # read, empty: a key with no versions, not an absent one
    }
    assert dumped.undecided == {(TOPIC, 0): [5]} and dumped.incomplete == ((TOPIC, 2),)
    assert dumped.end_from == "final.json" and log_from_dump(tmp_path, TOPIC) == dumped.log


def test_without_the_final_reads_record_the_lso_file_bounds_the_committed_view(tmp_path):
    write_view(tmp_path, "raw", [(0, 0, "a"), (0, 1, "b")])
    write_view(tmp_path, "committed", [(0, 0, "a")])
    (tmp_path / "topics" / "stable_offsets.json").write_text(json.dumps({TOPIC: {"0": {"high": 2, "lso": 1}}}))
    dumped = read_dumped_log(tmp_path, TOPIC)
    assert dumped.log == {(TOPIC, 0): [LogRecord(0, "a", True)]} and dumped.undecided == {(TOPIC, 0): [1]}
    assert dumped.end_from == "stable_offsets.json"
    with pytest.raises(FileNotFoundError, match="raw dump of other"):
        read_dumped_log(tmp_path, "other")


# --- end to end: a run directory, the reader, the checker -----------------------------------------


def test_a_run_whose_transactions_read_each_others_writes_is_a_wr_only_cycle(tmp_path):
    # w0's transaction sent a to p0 and polled w1's b from p1; w1's sent b and polled w0's a: each
    # read what the other wrote, which read_committed cannot return before both committed
    run = txn_run(tmp_path, "cycle", [
        ("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0), poll((1, 0, "w1.1-0"))]),
        ("w1.1", 1, 0, 0, "ok", [send(1, "w1.1-0", 0), poll((0, 0, "w0.1-0"))]),
    ], raw=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")], committed=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")])
    txns, dumped = read_txn_run(run)
    result = check(txns, dumped.log)
    assert result["valid"] == "invalid" and result["anomaly_types"] == ["wr-only"]
    (case,) = result["anomalies"]["wr-only"]
    assert case["cycle"] == ["w0.1#1", "w1.1#1", "w0.1#1"] and case["elle"] == "G1c"
    assert [s["kind"] for s in case["steps"]] == ["wr", "wr"]


def test_a_clean_run_with_an_aborted_and_an_unknown_transaction_has_no_anomaly(tmp_path):
    run = txn_run(tmp_path, "clean", [
        ("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0), send(1, "w0.1-1", 0)]),
        ("w0.1", 2, 0, 0, "fail", [send(0, "w0.1-2", 2)]),                          # aborted on purpose
        ("w1.1", 1, 0, 0, "ok", [poll((0, 0, "w0.1-0"), (1, 0, "w0.1-1")), send(1, "w1.1-0", 2)]),
        ("w1.1", 2, 0, 0, "info", [send(0, "w1.1-1", 4)]),                          # commit unknown: it did
        ("w0.1", 3, 0, 0, "ok", [poll((1, 2, "w1.1-0")), poll((0, 4, "w1.1-1"))]),
    ], raw=[(0, 0, "w0.1-0"), (0, 2, "w0.1-2"), (0, 4, "w1.1-1"), (1, 0, "w0.1-1"), (1, 2, "w1.1-0")],
        committed=[(0, 0, "w0.1-0"), (0, 4, "w1.1-1"), (1, 0, "w0.1-1"), (1, 2, "w1.1-0")])
    txns, dumped = read_txn_run(run)
    assert {t.id: t.outcome for t in txns}["w0.1#2"] == "aborted"
    result = check(txns, dumped.log)
    assert result["valid"] == "valid" and result["anomalies"] == {} and result["not_checked"] == []
    assert result["checked"]["committed"] == 4 and result["checked"]["committed_from_log"] == 1
    assert result["edges"]["wr"] == 3


def test_the_verifier_judges_a_txn_run_by_its_isolation_cycles_progress_and_stability(tmp_path):
    # w1 read w0's committed send: a run that exercised a read, no cycle, every partition stable
    run = txn_run(tmp_path, "verified", [("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0)]),
                                         ("w1.1", 1, 0, 0, "ok", [poll((0, 0, "w0.1-0")), send(1, "w1.1-0", 0)])],
                  raw=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")], committed=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")])
    _stable(run)
    results = verify_run(run, VerifierSpec(engine="python"))
    verdicts = {c.name: c.verdict for c in results.checks}
    assert verdicts == {TXN_ISOLATION_CHECK: "valid", "no-progress": "valid", "hanging-transaction": "valid"}
    assert results.verdict == "valid" and results.required == [TXN_ISOLATION_CHECK]
    assert set(results.not_checked) == set(NOT_FOR_TXN) - {"no-progress", "hanging-transaction"}
    assert results.facts["isolation"]["edges"]["wr"] == 1
    assert results.facts["engines"] == {"python": "judged", "spark": "not run (verifier.engine = python)"}


def test_a_txn_run_that_read_nothing_of_each_other_is_unknown_and_a_pinned_partition_invalid(tmp_path):
    run = txn_run(tmp_path, "vacuous", [("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0)])],
                  raw=[(0, 0, "w0.1-0")], committed=[(0, 0, "w0.1-0")])
    _stable(run)
    results = verify_run(run, VerifierSpec(engine="python"))
    assert results.verdict == "unknown"
    assert {c.name: c.verdict for c in results.checks}["no-progress"] == "unknown"
    _stable(run, pinned={f"{TOPIC}-1": {"lso": 3, "high": 5}})
    results = verify_run(run, VerifierSpec(engine="python"))
    assert results.liveness == "invalid" and results.anomalies["hanging-transaction"][0]["partition"] == f"{TOPIC}-1"


def test_a_txn_run_with_a_wr_only_cycle_is_invalid_naming_the_class(tmp_path):
    run = txn_run(tmp_path, "cycle", [
        ("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0), poll((1, 0, "w1.1-0"))]),
        ("w1.1", 1, 0, 0, "ok", [send(1, "w1.1-0", 0), poll((0, 0, "w0.1-0"))]),
    ], raw=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")], committed=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")])
    _stable(run)
    results = verify_run(run, VerifierSpec(engine="python"))
    assert results.verdict == "invalid" and results.to_json()["anomaly_types"] == [TXN_ISOLATION_CHECK]
    (case,) = results.anomalies[TXN_ISOLATION_CHECK]
    assert case["class"] == "wr-only" and case["cycle"] == ["w0.1#1", "w1.1#1", "w0.1#1"]


def test_a_poll_of_an_aborted_transactions_send_is_g1a(tmp_path):
    # w0's transaction was aborted (its abort returned), yet w1 polled its value: read_committed forbids it
    run = txn_run(tmp_path, "g1a", [
        ("w0.1", 1, 0, 0, "fail", [send(0, "w0.1-0", 0)]),
        ("w1.1", 1, 0, 0, "ok", [poll((0, 0, "w0.1-0"))]),
    ], raw=[(0, 0, "w0.1-0")], committed=[])
    txns, dumped = read_txn_run(run)
    assert dumped.log[(TOPIC, 0)] == [LogRecord(0, "w0.1-0", False)]
    result = check(txns, dumped.log)
    assert result["anomaly_types"] == ["G1a"]
    (case,) = result["anomalies"]["G1a"]
    assert (case["reader"], case["writer"], case["writer_outcome"]) == ("w1.1#1", "w0.1#1", "aborted")


def test_a_txn_runs_fault_that_hit_no_committed_transaction_keeps_the_verdict_unknown(tmp_path):
    # the isolation is clean and every partition stable, but the one planned kill ran while no
    # transaction was under way: the floor (1 committed transaction per fault of each kind) holds
    run = txn_run(tmp_path, "idle-fault", [("w0.1", 1, 0, 0, "ok", [send(0, "w0.1-0", 0)]),
                                           ("w1.1", 1, 0, 0, "ok", [poll((0, 0, "w0.1-0")), send(1, "w1.1-0", 0)])],
                  raw=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")], committed=[(0, 0, "w0.1-0"), (1, 0, "w1.1-0")])
    _stable(run)
    (run / "schedule.json").write_text(json.dumps({"faults": [{"kind": "kill", "index": 0, "at_s": 1}]}))
    lines = [{"time": t, "process": "harness", "op": 1, "type": kind, "f": "fault:kill",
              "value": {"index": 0, "kind": "kill", "target": "txn-coordinator", "nodes": [2]}}
             for t, kind in ((1000.0, "invoke"), (1010.0, "ok"))]
    with (run / "history.jsonl").open("a") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)
    results = verify_run(run, VerifierSpec(engine="python"))
    assert {c.name: c.verdict for c in results.checks}[TXN_ISOLATION_CHECK] == "valid"
    assert results.verdict == "unknown", results.to_json()
    assert any("the faults hit next to no work" in e and "kill" in e for e in results.errors), results.errors
    assert results.facts["exposure"]["kinds"]["kill"]["committed"] == 0


def test_the_verdict_line_of_a_txn_run_says_its_transactions_and_the_classes_kafka_allows():
    from kchaos.verifier.verdict import isolation_said

    facts = {"isolation": {"checked": {"committed": 12}, "edges": {"wr": 30}, "allowed": {"G0": 2, "G1c": 1},
                           "not_judged": {"G2": 4}}}
    assert isolation_said(facts) == ("transactions committed 12, 30 reads of each other's sends; allowed (writes are "
                                     "not isolated): G0 2, G1c 1; not judged (no serializability promised): G2 4")
