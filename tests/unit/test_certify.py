"""Certification logic on hand-made histories: phases cut at steps, commits and anomaly cases
placed by time and client, vacuous phases and unexercised TV2 are never a pass; the shipped
certification campaigns and step rules validate on load."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.verifier.coordinator_log import CoordinatorTxn, coordinator_transactions
from kchaos.verifier.campaign import Campaign
from kchaos.verifier.certify import build_phases, certify, switch_lines
from kchaos.verifier.exposure import logged_transactions
from kchaos.verifier.model import case_time_and_slots, commits_by_client_tv
from kchaos.errors import ConfigError
from kchaos.workloads.java_client import worker_properties
from kchaos.workloads.spec import WorkloadSpec

FEATURES = {"metadata.version": "4.2-IV1", "transaction.version": 1}


def _op(process, f, t0, t1, value=None, outcome="ok", **extra):
    return {"time": t0, "process": process, "f": f, "t1": t1, "value": value or {}, "outcome": outcome, **extra}


def _history(events):
    """JSON lines (invoke + completion) from compact event tuples."""
    lines, op = [], 0
    for e in events:
        op += 1
        base = {k: v for k, v in e.items() if k not in ("time", "t1", "outcome")}
        lines.append({**base, "op": op, "type": "invoke", "time": e["time"]})
        if e["t1"] is not None:
            lines.append({**base, "op": op, "type": e["outcome"], "time": e["t1"]})
    return lines


def load_campaign_data(data):
    return Campaign.model_validate(data)


def _run(tmp_path: Path, events, verdict="valid", anomalies=None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _history(events)))
    (run / "results.json").write_text(json.dumps({"verdict": verdict, "anomalies": anomalies or {}, "errors": []}))
    (run / "campaign.json").write_text(json.dumps({"cluster": {"kafka_version": "4.2.1"}}))
    return run


PREFIX = "kc"


def _txn(txid, began, ended, tv=0, completed="commit", prefix=PREFIX):
    """One transaction as the coordinator's log segments it (times in seconds)."""
    return CoordinatorTxn(f"{prefix}-{txid}" if prefix else txid, 7, 0, int(began * 1000), 30000, tv,
                          prepared=completed, completed=completed, complete_ms=int(ended * 1000))


def _flip_history(java_v2_after=True, java_commits_after=2, restart=True):
    """A flip to TV2 at 10-14 s with a confluent (w0) and a Java (w1) worker; the history and the
    coordinator's log (java's commits after the flip on TV2 unless ``java_v2_after`` is False)."""
    flip_after = {**FEATURES, "transaction.version": 2}
    ev = [_op("harness", "setup", 0, 0, {"txid_prefix": PREFIX}),
          _op("harness", "phase", 1, 1, {"phase": "steady"}),
          _op("harness", "worker-start", 1, 1, {"slot": "w0", "client": "confluent"}),
          _op("harness", "worker-start", 1, 1, {"slot": "w1", "client": "java", "client_version": "4.2.1",
                                                  "label": "java 4.2.1"}),
          _op("w0.1", "commit", 2, 3, {"txn_seq": 1}), _op("w1.1", "commit", 2, 3, {"txn_seq": 1}),
          _op("harness", "step:feature", 10, 14, {"index": 0, "describe": "transaction.version -> 2",
                                                  "features_before": FEATURES, "features_after": flip_after}),
          _op("w0.1", "commit", 11, 12, {"txn_seq": 2}),
          _op("w0.1", "commit", 20, 21, {"txn_seq": 3})]
    if restart:
        ev.append(_op("harness", "worker-start", 13, 13, {"slot": "w1", "client": "java", "client_version": "4.2.1",
                                                            "label": "java 4.2.1"}))
    ev += [_op("w1.2", "commit", 20 + i, 21 + i, {"txn_seq": i + 1}) for i in range(java_commits_after)]
    ev.append(_op("harness", "phase", 40, 40, {"phase": "final-reads"}))
    log = [_txn("w0", 2, 3), _txn("w1", 2, 3), _txn("w0", 11, 12), _txn("w0", 20, 21)]
    log += [_txn("w1", 20 + i, 21 + i, tv=2 if java_v2_after else 0) for i in range(java_commits_after)]
    return ev, log


def _certify(tmp_path, events, log, verdict="valid", anomalies=None, campaign=None, name="run"):
    (tmp_path / name).mkdir()
    return certify(_run(tmp_path / name, events, verdict=verdict, anomalies=anomalies), campaign, coordinator=log)


def test_phases_are_cut_at_steps_and_carry_the_feature_level():
    ops = [{"process": e["process"], "f": e["f"], "invoke_time": e["time"], "complete_time": e["t1"],
            "value": e["value"], "outcome": e["outcome"]} for e in _flip_history()[0]]
    phases, steps = build_phases(ops, "4.2.1")
    assert [(p.name, p.kind, p.start, p.transaction_version) for p in phases] == [
        ("before any step", "before", 1, 1), ("during step 0: transaction.version -> 2", "during", 10, 1),
        ("after step 0: transaction.version -> 2", "after", 14, 2)]
    assert phases[1].has_tv(1) and phases[1].has_tv(2) and not phases[2].has_tv(1)
    assert steps[0]["outcome"] == "ok" and steps[0]["features_after"]["transaction.version"] == 2


def test_back_to_back_steps_leave_no_phase_between_them():
    """A rolling upgrade and a metadata.version raised right after it (as Kafka's upgrade test
    does): no "after the upgrade" phase of a fraction of a second that nobody could commit in;
    the phases stay contiguous."""
    mv = {**FEATURES, "metadata.version": 27}
    ops = [{"process": "harness", "f": f, "invoke_time": t0, "complete_time": t1, "value": v, "outcome": "ok"}
           for f, t0, t1, v in [
               ("phase", 1, 1, {"phase": "steady"}),
               ("step:rolling-upgrade", 10, 60, {"index": 0, "describe": "rolling upgrade to 4.2.1", "version": "4.2.1",
                                                 "features_before": FEATURES, "features_after": FEATURES}),
               ("step:feature", 60.4, 63, {"index": 1, "describe": "metadata.version -> latest",
                                           "features_before": FEATURES, "features_after": mv}),
               ("step:feature", 80, 81, {"index": 2, "describe": "transaction.version -> 2",
                                         "features_before": mv, "features_after": {**mv, "transaction.version": 2}}),
               ("phase", 99, 99, {"phase": "final-reads"})]]
    phases, _ = build_phases(ops, "3.9.1")
    assert [(p.name.split(":")[0], p.start, p.kafka_versions) for p in phases] == [
        ("before any step", 1, "3.9.1"), ("during step 0", 10, "3.9.1 -> 4.2.1 (mixed)"),
        ("during step 1", 60, "4.2.1"), ("after step 1", 63, "4.2.1"), ("after step 2", 80, "4.2.1")]
    assert all(a.end == b.start for a, b in zip(phases[1:], phases[2:])) and phases[-1].transaction_version == 2


def test_a_clean_flip_passes_from_the_coordinators_record(tmp_path):
    cert = _certify(tmp_path, *_flip_history())
    assert cert["overall"] == "pass" and cert["exit_code"] == 0, cert["reasons"]
    assert cert["evidence"] == "coordinator log" and cert["clients"] == ["confluent", "java 4.2.1"]
    rows = {(r["phase"].split(":")[0], r["client"]): r for r in cert["rows"]}
    assert rows[("before any step", "java 4.2.1")]["committed_transactions"] == 1
    after = rows[("after step 0", "java 4.2.1")]
    assert after["client_transaction_versions"] == {"2": 2} and after["protocol"] == {"seen": "tv2",
                                                                                       "kip890_expected": True}
    assert after["implementation"] == "java" and after["client_version"] == "4.2.1" and after["gating"]
    # librdkafka stays classic under TV2: said, not failed (it has no KIP-890)
    classic = rows[("after step 0", "confluent")]
    assert classic["verdict"] == "valid" and classic["protocol"]["seen"] == "classic"
    assert "classic protocol under TV2" in classic["note"]
    # no Java commit in the seconds the flip was applied: not required there
    assert rows[("during step 0", "java 4.2.1")]["verdict"] == "not-exercised"
    assert not rows[("before any step", "java 4.2.1")]["gating"]
    assert cert["switches"] == [
        {"slot": "w0", "client": "confluent", "step": 0, "first_tv2_s": None, "restarted_before": None,
         "switched_without_restart": False},
        {"slot": "w1", "client": "java 4.2.1", "step": 0, "first_tv2_s": 11.0, "restarted_before": True,
         "switched_without_restart": False}]
    assert switch_lines(cert["switches"]) == [
        "switch to KIP-890 after step 0: w0 (confluent) no TV2 commit; w1 (java 4.2.1) TV2 from 11.0s, after its restart"]


def test_a_switch_without_restart_is_seen_in_the_log(tmp_path):
    cert = _certify(tmp_path, *_flip_history(restart=False))
    java = next(s for s in cert["switches"] if s["slot"] == "w1")
    assert java["switched_without_restart"] and java["restarted_before"] is False
    assert "w1 (java 4.2.1) TV2 from" in switch_lines(cert["switches"])[0]
    assert switch_lines(cert["switches"])[0].endswith("without a restart")


def test_the_log_not_the_workers_word_decides_what_committed(tmp_path):
    events, log = _flip_history()
    log = [t for t in log if not (t.transactional_id.endswith("w1") and t.complete_ms > 14000)]
    cert = _certify(tmp_path, events, log)
    row = next(r for r in cert["rows"] if r["phase"].startswith("after") and r["client"] == "java 4.2.1")
    assert row["verdict"] == "unknown" and row["committed_transactions"] == 0 and row["client_reported_commits"] == 2
    assert cert["overall"] == "unknown" and any("committed no transaction" in r for r in cert["reasons"])


def test_vacuous_phase_and_unexercised_tv2_are_unknown_not_pass(tmp_path):
    cert = _certify(tmp_path, *_flip_history(java_v2_after=False))
    assert cert["overall"] == "unknown" and cert["exit_code"] == 2
    assert any("KIP-890 not exercised" in r for r in cert["reasons"])
    cert = _certify(tmp_path, *_flip_history(java_commits_after=0), name="b")
    assert cert["overall"] == "unknown" and any("committed no transaction" in r for r in cert["reasons"])


def test_anomaly_cases_land_in_their_phase_and_client(tmp_path):
    case = {"explanation": "input in-1 written twice",
            "transactions": [{"process": "w1.2", "history_op": {"process": "w1.2", "invoke_time": 20.5}}]}
    timeless = {"explanation": "input in-9 never processed", "records": [{"in_partition": 0}]}
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies={"duplicate": [case, timeless]})
    assert cert["overall"] == "fail" and cert["exit_code"] == 1
    bad = [r for r in cert["rows"] if r["verdict"] == "invalid"]
    assert [(r["phase"].split(":")[0], r["client"]) for r in bad] == [("after step 0", "java 4.2.1")]
    assert bad[0]["cases"][0]["anomaly"] == "duplicate"
    assert cert["unattributed_cases"][0]["explanation"] == "input in-9 never processed"
    assert case_time_and_slots(case) == (20.5, {"w1"})
    # an offsets case carries the commit's invoke time; the earliest time named wins
    offsets = {"commit_invoked": 31.0, "worker": "w0.1", "transactions": [{"history_op": {"invoke_time": 33.0}}]}
    assert case_time_and_slots(offsets) == (31.0, {"w0"})
    assert case_time_and_slots(timeless) == (None, set())
    # the faults active over a case are its context: the clients their messages name (a held
    # EndTxn of every worker), and their own times, are not the case's
    held = {"fault": "fault:message-hold", "value": {"invoke_time": 5.0, "heal": {"messages": [
        {"transactional_id": f"{PREFIX}-w{i}", "process": f"w{i}.1"} for i in range(2)]}}}
    read = {"explanation": "observer 0 read an output of transaction 3 of w1.2 before its commit",
            "transactions": [{"process": "w1.2", "history_op": {"invoke_time": 20.5}, "faults_active": [held]}],
            "faults_active": [held]}
    assert case_time_and_slots(read) == (20.5, {"w1"})
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies={"observed-aborted-read": [read]},
                    name="context")
    assert [(r["phase"].split(":")[0], r["client"]) for r in cert["rows"] if r["verdict"] == "invalid"] == [
        ("after step 0", "java 4.2.1")]


def _case(t, slot, txid=None):
    return {"explanation": f"a case at {t}", "transactions": [{"history_op": {"process": f"{slot}.1", "invoke_time": t},
                                                                 **({"txid": txid} if txid else {})}]}


def _campaign(**certification):
    return load_campaign_data({"cluster": {"kafka_version": "4.2.1"}, "certification": certification,
                               "steps": [{"at_s": 10, "action": "feature", "feature": "transaction.version", "level": 2}]})


def test_the_baseline_is_reported_and_does_not_gate_unless_the_campaign_says_so(tmp_path):
    anomalies = {"split-transaction": [_case(2.5, "w0")]}
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies=anomalies)
    baseline = next(r for r in cert["rows"] if r["phase"] == "before any step" and r["client"] == "confluent")
    assert baseline["verdict"] == "invalid" and not baseline["gating"]
    assert cert["overall"] == "pass" and cert["exit_code"] == 0
    assert cert["known_risks"] == ["before any step / confluent (baseline, not gating): invalid: split-transaction"]
    assert "1 rows with a known risk" in cert["summary"]
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies=anomalies, campaign=_campaign(gate="all"),
                    name="all")
    assert cert["overall"] == "fail" and "before any step / confluent: invalid" in cert["reasons"][0]


def test_kafka_17754s_shapes_include_an_observers_read_of_a_commit_ended_early():
    """A late EndTxn(COMMIT) ends the producer's next transaction early: an observer reads its
    outputs before its client asked to commit (observed-aborted-read), the read side of the same
    shape the pipeline's own checks name; liveness anomalies are never a known exposure."""
    from kchaos.verifier.spec import KnownExposure

    shapes = KnownExposure(reason="KAFKA-17754").anomalies
    assert {"observed-aborted-read", "aborted-read", "split-transaction"} <= set(shapes)
    assert not {"stalled-pipeline", "hanging-transaction"} & set(shapes)


def test_a_named_known_exposure_passes_the_gate_and_an_unnamed_anomaly_fails_it(tmp_path):
    anomalies = {"aborted-read": [_case(20.5, "w0")]}
    known = {"client": "confluent", "protocol": "classic", "reason": "KAFKA-17754: librdkafka has no KIP-890"}
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies=anomalies,
                    campaign=_campaign(known_exposure=[known]))
    row = next(r for r in cert["rows"] if r["phase"].startswith("after") and r["client"] == "confluent")
    assert row["verdict"] == "known-exposure" and row["known_exposure"] == known["reason"]
    assert cert["overall"] == "pass" and cert["known_risks"][0].endswith(known["reason"])
    # the same exposure named for TV1 phases only does not cover the TV2 phase: the gate fails
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", anomalies=anomalies, name="tv1",
                    campaign=_campaign(known_exposure=[{**known, "protocol": None, "transaction_version": 1}]))
    assert cert["overall"] == "fail" and "aborted-read not covered" in cert["reasons"][0]
    # an anomaly type the exposure does not name fails too (liveness is never covered)
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", name="types",
                    anomalies={**anomalies, "hanging-transaction": [_case(21, "w0")]},
                    campaign=_campaign(known_exposure=[known]))
    assert cert["overall"] == "fail"
    # a client the exposure does not name: the Java row fails
    cert = _certify(tmp_path, *_flip_history(), verdict="invalid", name="java",
                    anomalies={"aborted-read": [_case(20.5, "w1")]}, campaign=_campaign(known_exposure=[known]))
    assert cert["overall"] == "fail" and "java 4.2.1: invalid" in cert["reasons"][0]


def test_required_exposure_per_row_makes_a_row_that_hit_nothing_unknown(tmp_path):
    events, log = _flip_history()
    events.append(_op("harness", "fault:kill", 19.5, 21.5, {"index": 0, "target": "txn-coordinator"}))
    cert = _certify(tmp_path, events, log, campaign=_campaign(exposure={"kill": 2}))
    rows = {(r["phase"].split(":")[0], r["client"]): r for r in cert["rows"]}
    java, confluent = rows[("after step 0", "java 4.2.1")], rows[("after step 0", "confluent")]
    assert java["exposure"]["committed_by_kind"] == {"kill": 2} and java["verdict"] == "valid"
    assert confluent["exposure"]["committed_by_kind"] == {"kill": 1} and confluent["verdict"] == "unknown"
    assert "kill: 1 committed transactions under its windows, 2 required" in confluent["note"]
    # the baseline is not gating: no exposure is asked of it
    assert rows[("before any step", "java 4.2.1")]["exposure"]["required"] == {}
    assert cert["overall"] == "unknown"
    # a row whose cases a known exposure covers is still unknown when a kind hit too little of its work
    cert = _certify(tmp_path, events, log, campaign=_campaign(exposure={"kill": 2}, known_exposure=[
        {"anomalies": ["duplicate"], "reason": "KAFKA-0"}]), verdict="invalid", name="known-short",
        anomalies={"duplicate": [_case(20.5, "w0")]})
    confluent = next(r for r in cert["rows"] if r["phase"].startswith("after") and r["client"] == "confluent")
    assert confluent["verdict"] == "unknown" and confluent["note"].startswith("exposure short: kill")


def _app_flip():
    """A user's app (no worker history) across a flip to TV2 at 10-14 s: the harness history, the
    coordinator's log of its one transactional id (two commits each side) and its campaign."""
    flip_after = {**FEATURES, "transaction.version": 2}
    events = [_op("harness", "setup", 0, 0, {"txid_prefix": PREFIX}), _op("harness", "phase", 1, 1, {"phase": "steady"}),
              _op("harness", "step:feature", 10, 14, {"index": 0, "describe": "transaction.version -> 2",
                                                      "features_before": FEATURES, "features_after": flip_after}),
              _op("harness", "phase", 40, 40, {"phase": "final-reads"})]
    log = [_txn("copier-0", t, t + 0.5, prefix=None) for t in (2, 3, 20, 21)]
    campaign = load_campaign_data({"cluster": {"kafka_version": "4.2.1"},
                                   "workload": {"external_command": ["my-app"], "lineage": "id",
                                                "outputs_per_input": 2}})
    return events, log, campaign


def test_a_user_app_is_certified_from_the_coordinators_log_alone(tmp_path):
    """No worker history at all: the app's transactions, protocol and exposure are the log's."""
    events, log, campaign = _app_flip()
    cert = _certify(tmp_path, events, log, campaign=campaign)
    assert cert["clients"] == ["app"] and cert["overall"] == "pass", cert["reasons"]
    after = next(r for r in cert["rows"] if r["phase"].startswith("after"))
    assert after["committed_transactions"] == 2 and after["client_reported_commits"] is None
    cert = _certify(tmp_path, events, log, campaign=campaign, verdict="invalid", name="bad",
                    anomalies={"duplicate": [{"explanation": "twice", "txid": "copier-0", "invoke_time": 20.2}]})
    assert cert["overall"] == "fail" and cert["rows"][-1]["verdict"] == "invalid"


def test_an_apps_case_without_a_history_time_is_placed_by_its_records_broker_timestamps(tmp_path):
    """A user's app keeps no history: its duplicate names output records (topic, partition,
    offset, its transactional id). The dump of the committed records gives their broker
    timestamps, which place the case in its phase and row; a record the dump lacks places nothing."""
    events, log, campaign = _app_flip()

    def record(offset):
        return {"topic": "out", "partition": 1, "offset": offset, "txid": "copier-0", "worker": "copier"}

    case = {"explanation": "input 0@5 is visible 2 times", "records": [record(7), record(9)]}
    lost = {"explanation": "input 0@6 is visible 2 times", "records": [record(99)]}
    (tmp_path / "run").mkdir()
    run = _run(tmp_path / "run", events, verdict="invalid", anomalies={"duplicate": [case, lost]})
    (run / "topics").mkdir()
    pq.write_table(pa.table({"partition": pa.array([1, 1, 1, 0], pa.int32()), "offset": pa.array([7, 8, 9, 7]),
                             "timestamp": pa.array([21_500, 21_600, 20_400, 2_000])}),
                   run / "topics" / "out.committed.parquet")
    cert = certify(run, campaign, coordinator=log)
    after = next(r for r in cert["rows"] if r["phase"].startswith("after"))
    assert after["verdict"] == "invalid" and after["case_count"] == 1
    assert after["cases"][0]["time"] == 20.4 and after["cases"][0]["placed_by"] == "record timestamps"
    (unplaced,) = cert["unattributed_cases"]
    assert unplaced["time"] is None and unplaced["explanation"].startswith("input 0@6")
    assert cert["overall"] == "fail"


def test_a_row_is_not_clean_of_cases_the_checker_did_not_keep(tmp_path):
    """The checker keeps 50 cases per anomaly and counts them all: with 60 duplicates of which one
    is kept (java's, after the flip), every other row could hold the other 59, so none of them is
    valid; a known exposure that covers the anomaly in a row still covers the ones not kept."""
    ev, log = _flip_history()
    (tmp_path / "run").mkdir()
    run = _run(tmp_path / "run", ev, verdict="invalid", anomalies={"duplicate": [_case(20.5, "w1")]})
    results = json.loads((run / "results.json").read_text())
    results["checks"] = {"duplicate": {"verdict": "invalid", "cases": 1, "total": 60}}
    (run / "results.json").write_text(json.dumps(results))
    cert = certify(run, None, coordinator=log)
    rows = {(r["phase"].split(":")[0], r["client"]): r for r in cert["rows"]}
    assert rows[("after step 0", "java 4.2.1")]["verdict"] == "invalid"
    other = rows[("after step 0", "confluent")]
    assert other["verdict"] == "unknown" and "duplicate: 59 of 60 not kept" in other["note"]
    assert cert["overall"] == "fail"
    # a known exposure of duplicates covers the cases not kept too
    cert = certify(run, _campaign(known_exposure=[{"anomalies": ["duplicate"], "reason": "KAFKA-0"}]),
                   coordinator=log)
    committed = [r for r in cert["rows"] if r["committed_transactions"]]
    assert {r["verdict"] for r in committed} == {"known-exposure", "valid"} and cert["overall"] == "pass"
    assert all("each under a known exposure: duplicate: 59 of 60" in r["note"] for r in committed
               if r["verdict"] == "valid")
    # with every case's place recorded (case_places), each is counted in its own row: 59 more
    # java duplicates after the flip, none elsewhere; no row is unknown for them
    results["case_places"] = {"duplicate": [{"t": 20.5 + i / 100, "slots": ["w1"], "txids": []} for i in range(60)]}
    (run / "results.json").write_text(json.dumps(results))
    cert = certify(run, None, coordinator=log)
    rows = {(r["phase"].split(":")[0], r["client"]): r for r in cert["rows"]}
    java_after = rows[("after step 0", "java 4.2.1")]
    assert java_after["case_counts"] == {"duplicate": 60} and len(java_after["cases"]) == 1
    assert rows[("after step 0", "confluent")]["verdict"] == "valid"
    del results["case_places"]
    # results written before the checks carried their total: the note's count says it
    results["checks"] = {"duplicate": {"verdict": "invalid", "cases": 1, "note": "60 cases"}}
    (run / "results.json").write_text(json.dumps(results))
    assert certify(run, None, coordinator=log)["rows"][0]["verdict"] == "unknown"


def test_no_row_is_valid_when_the_verifier_could_not_judge_the_run(tmp_path):
    cert = _certify(tmp_path, *_flip_history(), verdict="unknown")
    assert cert["overall"] == "unknown" and cert["exit_code"] == 2
    exercised = [r for r in cert["rows"] if r["verdict"] != "not-exercised"]
    assert exercised and {r["verdict"] for r in exercised} == {"unknown"}
    assert all("could not judge" in r["note"] for r in exercised)


def test_a_failed_step_makes_the_certification_unknown(tmp_path):
    ev, log = _flip_history()
    step = next(e for e in ev if e["f"] == "step:feature")
    step["outcome"], step["error"] = "fail", "the controller refused"
    cert = _certify(tmp_path, ev, log)
    assert cert["overall"] == "unknown" and any("refused" in str(r) or "fail" in r for r in cert["reasons"])


def test_logged_transactions_are_the_coordinators_completed_ones():
    records = [{"partition": 0, "offset": i, "transactional_id": "t", "producer_id": 1, "producer_epoch": 0,
                "status": status, "partitions": {"out": [0]}, "last_update_ms": ms, "start_ms": start,
                "timeout_ms": 1000, "client_transaction_version": 2}
               for i, (status, ms, start) in enumerate([("Ongoing", 1000, 1000), ("PrepareCommit", 1500, 1000),
                                                       ("CompleteCommit", 2000, 1000), ("CompleteCommit", 2000, 1000),
                                                       ("Ongoing", 3000, 3000), ("PrepareAbort", 3500, 3000),
                                                       ("CompleteAbort", 4000, 3000), ("Ongoing", 5000, 5000)])]
    txns = logged_transactions(coordinator_transactions(records))
    assert [(t.began, t.ended, t.committed, t.client_tv) for t in txns] == [(1, 2, True, 2), (3, 4, False, 2)]
    assert logged_transactions(coordinator_transactions(records), excluded={"t"}) == []


def test_certification_table_needs_steps(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[certification]\ngate = "all"\n')
    with pytest.raises(ConfigError, match="certification"):
        load_campaign(path)


@pytest.mark.parametrize("name", ["certify-tv-flip.toml", "certify-tv-flip-exposed.toml",
                                  "certify-rolling-upgrade.toml", "certify-upgrade-from-3x.toml"])
def test_shipped_certification_campaigns_load(name):
    campaign = load_campaign(CAMPAIGNS_DIR / name)
    assert campaign.steps and campaign.workload.client in ("mixed", "fleet")


def test_the_app_certification_swaps_only_the_apps_mode():
    """The worked example of a team's app (tests/apps): the unsafe campaign is the safe one with
    the app's mode changed, so the two verdicts differ by the app alone."""
    apps = Path(__file__).resolve().parents[1] / "apps"
    safe, unsafe = (load_campaign(apps / f"certify-tv-flip-app{s}.toml") for s in ("", "-unsafe"))
    assert safe.steps == unsafe.steps and safe.faults == unsafe.faults and safe.certification == unsafe.certification
    assert safe.workload.external_command[-2].endswith("outside_pipeline.py safe 10")
    assert unsafe.workload.external_command[-2].endswith("outside_pipeline.py unsafe 10")
    assert safe.workload.model_copy(update={"external_command": None}) == \
        unsafe.workload.model_copy(update={"external_command": None})


def test_the_exposed_fleet_extends_the_shipped_certification_and_keeps_its_gate():
    safe, exposed = (load_campaign(CAMPAIGNS_DIR / f"{n}.toml") for n in ("certify-tv-flip", "certify-tv-flip-exposed"))
    assert exposed.name == "certify-tv-flip-exposed" and exposed.steps == safe.steps
    assert exposed.certification == safe.certification and exposed.faults == safe.faults
    assert [(s.client, s.version) for s in exposed.workload.fleet] == [("confluent", None), ("java", "3.9.1")]
    assert exposed.workload.group_protocol == "classic" and safe.workload.group_protocol == "consumer"
    assert safe.certification.exposure and safe.certification.known_exposure[0].transaction_version == 1


def test_a_campaign_that_extends_itself_is_refused(tmp_path):
    (tmp_path / "a.toml").write_text('extends = "b.toml"\n')
    (tmp_path / "b.toml").write_text('extends = "a.toml"\n')
    with pytest.raises(ConfigError, match="cycle"):
        load_campaign(tmp_path / "a.toml")


@pytest.mark.parametrize("steps, needle", [
    ([{"at_s": 5, "action": "feature", "feature": "transaction.version"}], "takes feature and level"),
    ([{"at_s": 5, "action": "rolling-upgrade", "version": "4.1.2"}], "not newer than 4.2.1"),
    ([{"at_s": 5, "action": "rolling-upgrade", "version": "latest"}], "not a release number"),
    ([{"at_s": 500, "action": "feature", "feature": "transaction.version", "level": 2}], "not within run.duration_s"),
    ([{"at_s": 5, "action": "feature", "feature": "transaction.version", "level": 3}], "levels are 0, 1 and 2"),
    ([{"at_s": 9, "action": "feature", "feature": "transaction.version", "level": 2},
      {"at_s": 5, "action": "feature", "feature": "transaction.version", "level": 1}], "list steps in order"),
])
def test_bad_steps_are_refused_on_load(tmp_path, steps, needle):
    path = tmp_path / "c.toml"
    text = "[run]\nduration_s = 60\n" + "".join(
        "[[steps]]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in step.items()) for step in steps)
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_campaign(path)
    assert needle in str(err.value)


def test_rolling_upgrade_needs_a_cluster_kchaos_starts(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[cluster]\nbackend = "external"\n[cluster.external]\nbootstrap_servers = "h:9092"\n'
                    '[[steps]]\nat_s = 5\naction = "rolling-upgrade"\nversion = "4.3.1"\n')
    with pytest.raises(ConfigError, match="a rolling upgrade needs a cluster kchaos starts"):
        load_campaign(path)


def test_java_client_needs_the_exactly_once_ctp_pipeline(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[workload]\nclient = "java"\ndelivery = "at-least-once"\n')
    with pytest.raises(ConfigError, match="client = 'java'"):
        load_campaign(path)


def test_java_worker_properties_escape_and_carry_the_settings():
    from kchaos.workloads.spec import WorkloadSpec

    config = {"workload": WorkloadSpec(client="java").model_dump(mode="json"), "worker": "w1", "incarnation": 3,
              "client": {"bootstrap.servers": "127.0.0.1:1,127.0.0.1:2", "client.id": "a=b c"}, "seed": 7,
              "txid_prefix": "kc-x", "history_path": "/tmp/h/w1.3.jsonl"}
    props = dict(line.split("=", 1) for line in worker_properties(config).splitlines() if "\\=" not in line)
    assert props["bootstrap.servers"] == "127.0.0.1\\:1,127.0.0.1\\:2"
    assert props["kchaos.transactional.id"] == "kc-x-w1" and props["kchaos.incarnation"] == "3"
    assert "client.id=a\\=b c" in worker_properties(config)
    # the Java driver reads the group protocol: without it, a KIP-848 campaign's Java workers
    # joined through the classic protocol
    assert props["kchaos.group.protocol"] == "classic"
    config["workload"] = WorkloadSpec(client="java", group_protocol="consumer").model_dump(mode="json")
    assert "kchaos.group.protocol=consumer" in worker_properties(config).splitlines()


def test_stopping_the_stepper_waits_for_a_node_restart_and_starts_no_other():
    """Ctrl-C during a rolling upgrade: the node being restarted finishes, no further node is
    touched, so nothing starts after the cluster is stopped (never leak)."""
    import threading
    import time as _time

    from kchaos.faults.steps import Stepper, StepSpec

    class Node:
        def __init__(self, node_id):
            self.node_id = node_id

    class FakeCluster:
        nodes = [Node(1), Node(2), Node(3)]
        upgraded: list[int] = []
        in_restart = threading.Event()

        def active_controller(self):
            return 1

        def upgrade_node(self, node_id, version):
            self.in_restart.set()
            _time.sleep(0.5)
            self.upgraded.append(node_id)
            return {"node": node_id}

        def wait_healthy(self, timeout_s):
            pass

        def finish_upgrade(self, version):
            raise AssertionError("not every node was upgraded")

    class History:
        def invoke(self, *a, **k):
            return 0

        def complete(self, *a, **k):
            pass

        def event(self, *a, **k):
            pass

    cluster = FakeCluster()
    step = StepSpec(at_s=0, action="rolling-upgrade", version="4.3.1", settle_s=0)
    stepper = Stepper(cluster, (step,), History(), threading.Lock())
    stepper._features = lambda: {}  # no tools in a unit test
    stepper.start()
    assert cluster.in_restart.wait(5)
    stepper.stop()
    assert cluster.upgraded == [2]  # the active controller (1) would have been last
    _time.sleep(0.7)
    assert cluster.upgraded == [2]
    assert stepper.executed and stepper.executed[0]["outcome"] == "fail"


def test_commits_by_client_tv_counts_only_this_runs_commits():
    rows = [("run1-w0", "CompleteCommit", 0, 3), ("run1-w1", "CompleteCommit", 2, 5), ("run1-w1", "CompleteCommit", 0, 1),
            ("run1-w1", "CompleteAbort", 2, 4), ("run1-w1", "PrepareCommit", 2, 5), ("other-w0", "CompleteCommit", 2, 9),
            ("run1-w0", "CompleteCommit", None, 1)]
    assert commits_by_client_tv(rows, "run1") == {"run1-w0": {"0": 4}, "run1-w1": {"0": 1, "2": 5}}
    assert commits_by_client_tv(rows, None)["other-w0"] == {"2": 9}


@pytest.mark.parametrize("settings,words", [
    ('delivery = "at-least-once-no-idempotence"', "client = 'streams'"),
    ('group_protocol = "consumer"', "group_protocol 'classic' or 'streams'"),
    ('transactional_id_strategy = "per-partition"', "Streams' own transactional ids"),
    ('external_command = ["app"]', "no external_command"),
])
def test_streams_refuses_what_a_streams_application_cannot_be(tmp_path, settings, words):
    path = tmp_path / "c.toml"
    path.write_text(f'[workload]\nclient = "streams"\n{settings}\n')
    with pytest.raises(ConfigError, match=words):
        load_campaign(path)


@pytest.mark.parametrize("delivery,guarantee", [("exactly-once", "exactly_once_v2"), ("at-least-once", "at_least_once")])
def test_streams_properties_carry_the_guarantee_threads_and_a_state_dir_per_process(delivery, guarantee):
    from kchaos.workloads.spec import WorkloadSpec

    spec = WorkloadSpec(client="streams", delivery=delivery, streams_threads=2, streams_commit_interval_ms=500)
    config = {"workload": spec.model_dump(mode="json"), "worker": "w1", "incarnation": 3,
              "client": {"bootstrap.servers": "h:1"}, "seed": 7, "txid_prefix": "kc-x",
              "history_path": "/run/history/w1.3.jsonl"}
    props = dict(line.split("=", 1) for line in worker_properties(config).splitlines())
    assert props["kchaos.streams.guarantee"] == guarantee
    assert props["kchaos.streams.threads"] == "2" and props["kchaos.streams.commit.interval.ms"] == "500"
    # a paused instance and its replacement (w1.4) must never share Streams' state directory lock
    assert props["kchaos.streams.state.dir"] == "/run/workers/w1.3-state"
    assert props["kchaos.group.id"] == spec.group_id  # Streams' application.id: the group the verifier reads


def test_the_streams_protocol_needs_the_streams_client_and_kafka_4_2_and_sets_streams_version(tmp_path):
    """KIP-1071, read from the jars: 4.1's streams.version 1 is early access, 4.2 makes it production."""
    from kchaos.workloads.spec import WorkloadSpec

    path = tmp_path / "c.toml"
    path.write_text('[workload]\nclient = "streams"\ngroup_protocol = "streams"\n[faults]\nenabled = false\n')
    campaign = load_campaign(path)
    assert campaign.cluster.streams_version == 1
    spec = WorkloadSpec(client="streams", group_protocol="streams")
    config = {"workload": spec.model_dump(mode="json"), "worker": "w0", "incarnation": 1,
              "client": {"bootstrap.servers": "h:1"}, "seed": 7, "txid_prefix": "kc-x",
              "history_path": "/run/history/w0.1.jsonl"}
    assert "kchaos.streams.group.protocol=streams" in worker_properties(config).splitlines()
    for settings, words in (('group_protocol = "streams"', "it needs client = 'streams'"),
                            ('client = "streams"\ngroup_protocol = "streams"\n[cluster]\nkafka_version = "4.1.1"',
                             "needs Kafka 4.2 or later"),
                            ('client = "streams"\ngroup_protocol = "streams"\njava_client_version = "4.1.1"',
                             "needs kafka-streams 4.2 or later")):
        path.write_text(f"[faults]\nenabled = false\n[workload]\n{settings}\n")
        with pytest.raises(ConfigError, match=words):
            load_campaign(path)


def test_clock_and_disk_faults_turn_on_what_they_need_when_the_campaign_loads(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[faults]\n[[faults.mix]]\nkind = "clock-bump"\n[[faults.mix]]\nkind = "disk-full"\n')
    campaign = load_campaign(path)
    assert campaign.cluster.clock_control and campaign.cluster.disk_limit_mb == 256
    path.write_text('[cluster]\nbackend = "docker"\n[faults]\n[[faults.mix]]\nkind = "clock-bump"\n')
    from kchaos.errors import CapabilityError

    with pytest.raises(CapabilityError, match="'clock' capability") as refused:  # refused when it loads
        load_campaign(path)
    assert refused.value.exit_code == 3


def test_a_fault_held_over_a_step_lands_before_the_change_and_the_step_lasts_until_it_healed(tmp_path):
    """``[[steps]] fault``: the nemesis strikes it without the cluster lock (the change runs under
    it), it is one fault operation in the history naming the step, and the step waits for its heal."""
    import time as _time
    from types import SimpleNamespace

    from kchaos.faults.base import FaultContext
    from kchaos.faults.nemesis import Nemesis
    from kchaos.faults.steps import StepSpec, Stepper
    from kchaos.workloads.history import HistoryWriter

    order: list[str] = []

    class Node:
        node_id, is_running = 1, True

        def kill(self):
            order.append("kill")
            self.is_running = False

        terminate = pause = restart = kill

        def start(self):
            order.append("start")
            self.is_running = True

    class FakeCluster:
        nodes = brokers = [Node()]

        def require(self, capability, what=""):
            pass

        def transaction_coordinator(self, txid):
            return 1

        def node(self, node_id):
            return self.nodes[0]

        def change_feature(self, feature, target, current):
            order.append(f"feature {current}->{target}")

    history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
    lock = threading.Lock()
    ctx = FaultContext(FakeCluster(), SimpleNamespace(spec=WorkloadSpec(), txid_prefix="tx", work=None, pool=None))
    nemesis = Nemesis(ctx, [], history, cluster_lock=lock)
    step = StepSpec(at_s=0, action="feature", feature="transaction.version", level=2,
                    fault={"kind": "kill", "target": "txn-coordinator", "duration_s": 0.5})
    stepper = Stepper(FakeCluster(), (step,), history, lock, nemesis=nemesis, seed=1)
    stepper._features = lambda: {"transaction.version": 1}
    started = _time.monotonic()
    stepper.execute(0, step)
    history.close()
    assert _time.monotonic() - started >= 0.5  # the step lasted until its fault healed
    ops = [json.loads(line) for line in (tmp_path / "harness.jsonl").read_text().splitlines()]
    kill = [op for op in ops if op["f"] == "fault:kill"]
    assert kill[0]["value"]["during"] == "step 0: transaction.version -> 2" and kill[-1]["type"] == "ok"
    assert kill[0]["value"]["index"] == Stepper.STRIKE_INDEX
    assert order[:2] == ["kill", "feature 1->2"] and order[-1] == "start"
    assert not nemesis.struck


def test_a_fault_held_over_a_step_needs_faults(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[faults]\nenabled = false\n[[steps]]\nat_s = 5\naction = "feature"\nfeature = "transaction.version"\n'
                    'level = 2\nfault = { kind = "kill", target = "txn-coordinator", duration_s = 5 }\n')
    with pytest.raises(ConfigError, match="hold a fault over the change"):
        load_campaign(path)


def test_the_phase_of_a_step_that_held_a_fault_is_required_and_its_exposure_asked(tmp_path):
    events, log = _flip_history()
    step = next(e for e in events if e["f"] == "step:feature")
    step["value"]["fault"] = {"kind": "kill", "target": "txn-coordinator", "duration_s": 3}
    events.append(_op("harness", "fault:kill", 10.5, 13.5, {"index": 10000, "target": "txn-coordinator",
                                                            "during": "step 0: transaction.version -> 2"}))
    cert = _certify(tmp_path, events, log, campaign=_campaign(exposure_during={"kill": 1}))
    during = {r["client"]: r for r in cert["rows"] if r["phase"].startswith("during")}
    # confluent committed under the kill (11-12 s); java committed nothing during the change
    assert during["confluent"]["verdict"] == "valid" and during["confluent"]["exposure"]["committed_by_kind"] == {"kill": 1}
    assert during["java 4.2.1"]["verdict"] == "unknown" and cert["overall"] == "unknown"


def test_the_verdict_line_counts_an_apps_transactions_from_the_coordinators_log():
    """A user's app keeps no client history: the verdict line says what the coordinator's log
    committed, not "transactions: none"; kchaos' own workers keep their history's counts."""
    from kchaos.verifier.verdict import transactions_said

    app = {"transactions": {}, "exposure": {"evidence": "coordinator log", "committed": 283}}
    assert transactions_said(app) == "transactions (the coordinator's log): committed 283"
    ours = {"transactions": {"committed": 7, "aborted": 1}, "exposure": {"evidence": "history", "committed": 7}}
    assert transactions_said(ours).startswith("transactions: ") and "committed 7" in transactions_said(ours)
