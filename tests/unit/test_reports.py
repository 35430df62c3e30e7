"""Reports render from stored run directories alone: valid, invalid with several anomaly kinds,
unknown (vacuous) and incomplete runs; the campaign index and its trend across nights."""

from __future__ import annotations

import json
import time
from pathlib import Path

from kchaos.reports.index import render_index
from kchaos.verifier.attribution import attribute
from kchaos.reports.run_report import render_run_report
from kchaos.verifier.pychecker import check_run

from .test_checkers import RunBuilder, _out

T0 = 1_800_000_000.0


class ReportRun(RunBuilder):
    """A hand-made run on a clock of real times (the report reads broker log lines by time)."""

    T0, STEP = T0, 0.1


def _finish(run: Path, verdict_from_checker: bool = True, complete: bool = True) -> Path:
    """Add what `kchaos run` writes around the checker: metrics, faults, broker logs, results."""
    campaign = json.loads((run / "campaign.json").read_text())
    campaign.update(name="unit", run={"seed": 5}, cluster={"kafka_version": "4.2.1", "backend": "local", "nodes": 3,
                                                          "transaction_version": 2},
                    faults={"enabled": True, "order": "round-robin"})
    campaign["workload"].update(kind="ctp", records=4, rate=10, workers=1, input_partitions=1, isolation="read_committed",
                                transactional_id_strategy="per-worker")
    (run / "campaign.json").write_text(json.dumps(campaign))
    (run / "seed").write_text("5\n")
    (run / "replay.json").write_text(json.dumps({"command": f"kchaos run campaigns/unit.toml --seed 5  # or: kchaos replay {run}"}))
    seconds = [{"second": s, "inputs": 2 if s < 2 else 0, "commits": 1, "aborts": int(s == 1), "errors": 0, "retries": 0,
                "restarts": 0, "rebalances": 0, "commit_p50_ms": 20.0 + s, "commit_p99_ms": 40.0 + s} for s in range(4)]
    (run / "metrics.json").write_text(json.dumps({"start_time": T0, "seconds": seconds,
                                                  "totals": {"inputs": 4, "inputs_per_s": 1.0, "duration_s": 4}}))
    # the history's times start at T0 (ReportRun); add a fault op
    lines = [json.loads(l) for l in (run / "history.jsonl").read_text().splitlines()]
    lines += [{"time": T0 + 0.5, "process": "harness", "op": 999, "type": "invoke", "f": "fault:kill",
               "value": {"index": 0, "kind": "kill", "target": "txn-coordinator"}},
              {"time": T0 + 1.5, "process": "harness", "op": 999, "type": "ok", "f": "fault:kill",
               "value": {"resolved": {"nodes": [2], "role": "transaction coordinator"}}}]
    (run / "history.jsonl").write_text("".join(json.dumps(l) + "\n" for l in lines))
    log = run / "cluster" / "node-2" / "logs" / "server.log"
    log.parent.mkdir(parents=True)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(T0))
    log.write_text(f"[{stamp},100] INFO [TransactionCoordinator id=2] Initialized transactionalId tx-w0 (kafka)\n"
                   "continuation line of a stack trace\n")
    if complete:
        results = check_run(run).to_json()
        (run / "results.json").write_text(json.dumps(results))
        (run / "status.json").write_text(json.dumps({"phase": "done", "complete": True, "verdict": results["verdict"]}))
    else:
        (run / "status.json").write_text(json.dumps({"phase": "faults", "complete": False}))
    return run


def test_valid_run_report_shows_verdict_plots_faults_replay_and_facts(tmp_path):
    run = _finish(ReportRun().write(tmp_path / "20261122T010000Z-unit-seed5"))
    html = render_run_report(run).read_text()
    assert 'class="banner valid"' in html and "VALID" in html
    assert html.count("<svg") == 4 and "kill txn-coordinator -&gt; transaction coordinator (nodes 2)" in html
    assert "kchaos run campaigns/unit.toml --seed 5" in html
    assert "Kafka</th><td>4.2.1 (local, 3 nodes)" in html and "transaction.version 2" in html
    assert "inputs committed</th><td>4</td>" in html and "outputs committed / raw</th><td>8 / 8</td>" in html
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # opens from disk, no network
    # the kill's record says done; node 2's log holds no registration to judge it by: said so
    assert "not judged: the nodes&#39; logs hold no controller record of a broker&#39;s registration" in html


def test_invalid_run_report_has_a_section_per_anomaly_with_evidence_and_log_lines(tmp_path):
    b = ReportRun()
    b.committed["a"].append(_out(0, 2, 0))               # duplicate
    b.final_offsets = {"0": 3}                           # offsets-behind (input 3's outputs are committed)
    run = _finish(b.write(tmp_path / "20261122T020000Z-unit-seed5"))
    results = json.loads((run / "results.json").read_text())
    # the group's offset below input 3 also leaves it unprocessed by the final reads: stalled-pipeline
    assert results["anomaly_types"] == ["duplicate", "offsets-behind", "stalled-pipeline"]
    html = render_run_report(run).read_text()
    assert 'class="banner invalid"' in html
    for anomaly in ("duplicate", "offsets-behind"):
        assert f'id="anomaly-{anomaly}"' in html
    assert "is visible 2 times in committed outputs" in html
    assert "Initialized transactionalId tx-w0" in html and 'href="cluster/node-2/logs/server.log"' in html


def test_each_anomaly_section_says_whose_its_cases_are(tmp_path):
    b = ReportRun()
    b.committed["a"].append(_out(0, 2, 0))               # duplicate, both copies by one transaction: a client's
    b.final_offsets = {"0": 3}                           # offsets-behind: not a shape of KAFKA-17754
    run = _finish(b.write(tmp_path / "20261122T021000Z-unit-seed5"))
    results = json.loads((run / "results.json").read_text())
    results["attribution"] = attribute(results)          # as judge_run writes it
    (run / "results.json").write_text(json.dumps(results))
    assert results["attribution"]["by_anomaly"] == {"duplicate": {"candidate": 1},
                                                    "offsets-behind": {"candidate": 2}}
    html = render_run_report(run).read_text()
    assert "Whose: 1 not the classic protocol&#39;s (candidates against a client or broker)" in html
    assert "Whose: 2 not the classic protocol&#39;s (candidates against a client or broker)" in html


def test_unknown_and_incomplete_runs_say_so(tmp_path):
    b = ReportRun()
    b.committed, b.final_offsets, b.ops, b.inputs = {"a": [], "b": []}, {}, [], []
    vacuous = _finish(b.write(tmp_path / "20261122T030000Z-unit-seed5"))
    html = render_run_report(vacuous).read_text()
    assert 'class="banner unknown"' in html and "vacuous" in html
    unfinished = _finish(ReportRun().write(tmp_path / "20261122T040000Z-unit-seed5"), complete=False)
    html = render_run_report(unfinished).read_text()
    assert 'class="banner incomplete"' in html and "no result is claimed" in html


def test_interrupted_runs_and_campaign_client_properties_are_shown(tmp_path):
    run = _finish(ReportRun().write(tmp_path / "20261122T050000Z-unit-seed5"))
    campaign = json.loads((run / "campaign.json").read_text())
    campaign["workload"]["producer"] = {"request.timeout.ms": 3000}
    campaign["workload"]["client_properties"] = {"confluent": {"producer": {"socket.timeout.ms": 3000}}}
    (run / "campaign.json").write_text(json.dumps(campaign))
    results = json.loads((run / "results.json").read_text())
    results.update(interrupted=True, interruption={"signal": "SIGINT", "phase": "faults", "at_s": 31.5,
                                                   "final_reads": True})
    (run / "results.json").write_text(json.dumps(results))
    html = render_run_report(run).read_text()
    assert "interrupted by SIGINT in phase faults, 31.5s into the workload" in html
    assert "healed, drained and verified what ran" in html
    assert "producer request.timeout.ms=3000; confluent producer only: socket.timeout.ms=3000" in html


def test_unfinished_run_lists_every_check_as_not_checked(tmp_path):
    from kchaos.verifier.checks import CHECK_NAMES
    from kchaos.verifier.pychecker import check_unfinished_run

    run = ReportRun().write(tmp_path / "r")
    (run / "final.json").unlink()
    results = check_unfinished_run(run, phase="faults").to_json()
    assert results["verdict"] == "unknown" and "phase 'faults'" in results["errors"][0]
    assert set(results["not_checked"]) == set(CHECK_NAMES) and not results["checks"]
    assert results["facts"]["transactions"] == {"committed": 1}


def test_index_lists_every_run_and_the_trend_across_nights(tmp_path):
    root = tmp_path / "nightly"
    _finish(ReportRun().write(root / "20261120T000000Z-nightly" / "20261120T000100Z-unit-seed5"))
    b = ReportRun()
    b.committed["a"].append(_out(0, 2, 0))
    _finish(b.write(root / "20261121T000000Z-nightly" / "20261121T000100Z-unit-seed5"))
    html = render_index(root).read_text()
    assert html.count('<span class="pill valid">valid</span>') == 1
    assert html.count('<span class="pill invalid">invalid</span>') == 1
    assert "20261120T000000Z-nightly" in html and "20261121T000000Z-nightly" in html
    assert '<svg' in html  # the trend plot, drawn once there are two nights
    assert 'href="20261121T000000Z-nightly/20261121T000100Z-unit-seed5/report.html"' not in html  # no report yet


def test_certification_report_shows_steps_phases_and_the_overall_verdict(tmp_path):
    from kchaos.verifier.certify import certify

    run = _finish(ReportRun().write(tmp_path / "20261122T020000Z-unit-seed5"))
    lines = [json.loads(l) for l in (run / "history.jsonl").read_text().splitlines()]
    before = {"transaction.version": 1}
    lines += [{"time": T0 + 1.0, "process": "harness", "op": 998, "type": "invoke", "f": "step:feature",
               "value": {"index": 0, "describe": "transaction.version -> 2"}},
              {"time": T0 + 1.2, "process": "harness", "op": 998, "type": "ok", "f": "step:feature",
               "value": {"features_before": before, "features_after": {"transaction.version": 2}}}]
    (run / "history.jsonl").write_text("".join(json.dumps(l) + "\n" for l in sorted(lines, key=lambda l: l["time"])))
    cert = certify(run)
    (run / "certification.json").write_text(json.dumps(cert))
    html = render_run_report(run).read_text()
    assert "Certification: <span class=\"verdict-" in html and cert["overall"].upper() in html
    assert "step 0: transaction.version -&gt; 2" in html  # drawn as a band on the timelines
    assert "after step 0: transaction.version -&gt; 2" in html and "1 &rarr; 2" in html


def test_cases_with_one_explanation_are_one_entry_with_their_outputs():
    from kchaos.reports.run_report import group_cases, output_places

    def case(txn, topic, partition, offset):
        return {"explanation": f"committed output of transaction {txn} of w0.1, which the history shows aborted",
                "records": [{"topic": topic, "partition": partition, "offset": offset, "txn_seq": txn}]}

    cases = [case(220, "inv", 1, 7), case(9, "inv", 2, 3), case(220, "ship", 1, 7)]
    groups = group_cases(cases)
    assert [len(g["cases"]) for g in groups] == [2, 1]  # first-seen order, one entry per transaction
    assert groups[0]["explanation"].startswith("committed output of transaction 220")
    assert [p for c in groups[0]["cases"] for p in output_places(c)] == ["inv-1@7", "ship-1@7"]
    assert output_places({"explanation": "x", "records": [{"topic": "t"}]}) == []  # no place named: none made up


def test_run_phases_cover_setup_ageing_workload_drain_and_final_reads():
    from kchaos.reports.run_report import run_phases

    def op(f, t, value=None, done=None):
        return {"f": f, "invoke_time": t, "complete_time": done if done is not None else t, "value": value or {}}

    ops = [op("setup", 100.0), op("age-epoch", 103.0, done=200.0), op("age-epoch", 103.5, done=205.0),
           op("phase", 205.0, {"phase": "steady"}), op("fault:kill", 210.0, done=215.0),
           op("phase", 300.0, {"phase": "drain"}), op("phase", 320.0, {"phase": "final-reads"})]
    phases = run_phases(ops, 100.0, 330.0)
    assert [(p["label"], p["start"], p["end"]) for p in phases] == [
        ("setup", 0.0, 3.0), ("id ageing", 3.0, 105.0), ("workload", 105.0, 200.0), ("drain", 200.0, 220.0),
        ("final reads", 220.0, 230.0)]
    # no ageing and the workload from the first second: no setup mark either
    assert [p["label"] for p in run_phases(ops[3:], 205.0, 330.0)] == ["workload", "drain", "final reads"]
    assert run_phases([op("fault:kill", 1.0)], 0.0, 5.0) == []


def test_plot_marks_phases_and_leaves_names_that_do_not_fit_to_the_tooltip():
    from kchaos.reports.plots import Phase, Plot, Series, render_svg

    svg = render_svg(Plot("t", "y", [Series("s", [(0, 1.0), (300, 2.0)])],
                          phases=[Phase(0, 150, "id ageing"), Phase(150, 151, "final reads")]))
    assert svg.count('<g class="phase">') == 2
    assert ">id ageing</text>" in svg  # 150 s of a 300 s axis has room for its name
    assert ">final reads</text>" not in svg and "<title>final reads (150s-151s)</title>" in svg


def test_a_liveness_failure_is_said_on_the_first_screen(tmp_path):
    """F10's shape: the banner gives both verdicts, and before anything else the page says what
    went wrong, the liveness anomalies first, each by its first case."""
    from .test_checkers import _stalled

    view = {"at": 270.0, "state": "Stable",
            "members": [{"member_id": "m-0", "client_id": "kchaos-w0-StreamThread-1-consumer", "partitions": [0]}]}
    run = _finish(_stalled(view=view).write(tmp_path / "r"))
    html = render_run_report(run).read_text()
    first_screen = html[:html.index("<h2>What was tested</h2>")]
    assert "liveness <span class=\"pill invalid\">invalid</span>" in first_screen
    assert "What went wrong" in first_screen
    assert first_screen.index("stalled-pipeline") < first_screen.index("unprocessed-assignment")
    assert ("in/0: the group coordinator assigns it to kchaos-w0-StreamThread-1-consumer (Stable group), but that "
            "instance holds [] and is RUNNING: nobody processes it") in first_screen


def test_the_facts_name_commit_markers_the_coordinators_log_never_prepared(tmp_path):
    run = _finish(ReportRun().write(tmp_path / "20261122T030000Z-unit-seed5"))
    results = json.loads((run / "results.json").read_text())
    assert results["facts"]["commit_markers"] is None  # a hand-made run holds no broker segments
    results["facts"]["commit_markers"] = {
        "nodes": ["node-1", "node-2"], "commit_markers": 120, "no_log_record_before": 0, "clock_skew_set_aside": 3,
        "unprepared": [{"topic": "out", "partition": 2, "offset": 77, "producer_id": 9, "producer_epoch": 0,
                        "coordinator_epoch": 4, "log": {"status": "Ongoing", "before_marker_ms": 8100}}]}
    (run / "results.json").write_text(json.dumps(results))
    html = render_run_report(run).read_text()
    assert "120 read from node-1, node-2" in html and "<b>1 written while the coordinator" in html
    assert "<code>out-2@77</code> producer 9/0, coordinator epoch 4: the log said Ongoing (8100 ms before)" in html
    assert "3 in a clock fault" in html


def test_the_facts_name_batches_sent_with_an_aborted_batchs_sequence_numbers(tmp_path):
    run = _finish(ReportRun().write(tmp_path / "20261122T031000Z-unit-seed5"))
    results = json.loads((run / "results.json").read_text())
    assert results["facts"]["sequence_reuse"] is None  # a hand-made run holds no broker segments
    results["facts"]["sequence_reuse"] = {"transactional_batches": 40, "unread": 4, "reused": [
        {"topic": "out", "partition": 1, "producer_id": 7, "producer_epoch": 0,
         "aborted_batch": {"offset": 100, "base_sequence": 10, "count": 2, "transaction": ["w0.1", 5]},
         "empty_commit": {"offset": 103, "coordinator_epoch": 0},
         "next_batch": {"offset": 104, "base_sequence": 12, "transaction": ["w0.1", 7]}}]}
    (run / "results.json").write_text(json.dumps(results))
    html = render_run_report(run).read_text()
    assert "40 transactional batches read (4 with values not read" in html and "<b>1 batches sent with an aborted" in html
    assert "the aborted batch at 100 (sequence 10, 2 records, w0.1 transaction 5), the empty commit at 103" in html


def test_a_valid_runs_first_screen_says_f8s_signature_and_the_index_counts_it(tmp_path):
    """Issue 77, item 6: a VALID run whose brokers wrote COMMIT markers the coordinator's surviving
    log never prepared says so in the verdict block, in the outcome's own line; one without says
    nothing more; the index names it and counts it per night."""
    root = tmp_path / "root"
    clean = _finish(ReportRun().write(root / "20261122T040000Z-unit-seed5"))
    run = _finish(ReportRun().write(root / "20261122T041000Z-unit-seed5"))
    results = json.loads((run / "results.json").read_text())
    results["facts"]["commit_markers"] = {
        "nodes": ["node-1", "node-2"], "commit_markers": 120, "no_log_record_before": 0, "clock_skew_set_aside": 0,
        "unprepared": [{"topic": "out", "partition": p, "offset": 77, "producer_id": 9, "producer_epoch": 0,
                        "coordinator_epoch": 4, "covers_from": 70, "log": {"status": "Ongoing", "before_marker_ms": 8100}}
                       for p in range(4)]}
    (run / "results.json").write_text(json.dumps(results))
    html = render_run_report(run).read_text().replace("&#39;", "'")
    banner = html[html.index('<div class="banner'):html.index("</div>")]
    assert 'class="banner valid"' in banner and (
        '<small id="kafka-bug-signature">valid; F8\'s signature seen: 4 COMMIT markers from a record that did not '
        'survive, no visible effect (<a href="#commit-markers">the markers</a>)</small>') in banner
    assert 'id="commit-markers"' in html  # where the link goes: the facts' row of the markers
    assert "kafka-bug-signature" not in render_run_report(clean).read_text()
    index = render_index(root).read_text().replace("&#39;", "'")
    assert index.count("F8's signature seen: 4 COMMIT markers") == 1
    trend = index[index.index('<table id="trend">'):index.index("</table>")]
    assert "bug signatures</th>" in trend and "<td>2</td><td>2</td><td>0</td><td>0</td><td>0</td><td>0</td><td>1</td>" in trend
