"""bench/time_to_bug.py's summary on hand-made run directories: detections, phases, minutes."""

from __future__ import annotations

import json

from bench.time_to_bug import summarise, summarise_run


def _run(tmp_path, name, verdict, anomalies, started=1000.0, steady=1060.0, drain=1150.0, final=1210.0,
         verdict_at="2026-11-25T00:24:40", verified=99999.0):
    run = tmp_path / name
    (run / "history").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps({
        "verdict": verdict, "anomaly_types": sorted(anomalies), "anomalies": {k: [{}] * n for k, n in anomalies.items()},
        "run": {"seed": 7, "started": started, "verified": verified}}))
    (run / "history" / "harness.jsonl").write_text("\n".join(json.dumps(
        {"time": t, "type": "ok", "f": "phase", "value": {"phase": p}})
        for p, t in (("steady", steady), ("drain", drain), ("final-reads", final))))
    if verdict_at:
        (run / "kchaos.log").write_text(f"[kchaos 2026-11-25T00:20:00] starting\n[kchaos {verdict_at}] verdict: X\n")
    return run


def test_a_run_detects_when_invalid_with_the_anomaly_asked_for(tmp_path):
    run = _run(tmp_path, "a", "invalid", {"lost-write": 2, "split-transaction": 3})
    assert summarise_run(run, None)["detected"] and summarise_run(run, "split-transaction")["detected"]
    assert not summarise_run(run, "duplicate")["detected"]
    unknown = _run(tmp_path, "b", "unknown", {})
    assert not summarise_run(unknown, None)["detected"]


def test_phases_end_at_the_runs_own_verdict_not_a_later_analyze(tmp_path):
    # 2026-11-25T00:24:40Z is 1795566280: the verdict came 70 s after the final reads began
    run = _run(tmp_path, "a", "valid", {}, started=1795566000.0, steady=1795566060.0, drain=1795566150.0,
               final=1795566210.0, verdict_at="2026-11-25T00:24:40")
    seconds = summarise_run(run, None)["seconds"]
    assert seconds == {"setup": 60.0, "workload": 90.0, "drain": 60.0, "final_reads_and_verify": 70.0, "total": 280.0}
    # without the console log: results.json's verified, as recorded
    bare = _run(tmp_path, "b", "valid", {}, verdict_at=None, verified=1300.0)
    assert summarise_run(bare, None)["seconds"]["total"] == 300.0


def test_minutes_per_detection_count_every_run_including_the_misses(tmp_path):
    rows = [summarise_run(_run(tmp_path, n, v, a, verdict_at=None, verified=1240.0), None)
            for n, v, a in (("a", "invalid", {"lost-write": 1}), ("b", "valid", {}), ("c", "invalid", {"duplicate": 1}))]
    summary = summarise(rows)
    assert (summary["runs"], summary["detected"], summary["share"]) == (3, 2, 0.667)
    assert summary["minutes_per_run"] == 4.0 and summary["minutes_per_detection"] == 6.0
    assert summarise([rows[1]])["minutes_per_detection"] is None


def test_detections_are_counted_by_how_they_were_seen(tmp_path):
    from kchaos.verifier.checks import detection_kind

    rows = [summarise_run(_run(tmp_path, name, "invalid", kinds), None) for name, kinds in (
        ("end", {"lost-write": 1, "split-transaction": 2}),   # an end-state kind with a white-box one
        ("white", {"split-transaction": 1}),                  # only the coordinator's log saw it
        ("read", {"observed-aborted-read": 1, "split-transaction": 1}))]
    rows.append(summarise_run(_run(tmp_path, "valid", "valid", {}), None))
    assert [r["seen_by"] for r in rows] == ["end-state", "white-box", "read-side", None]
    assert summarise(rows)["detected_by"] == {"end-state": 1, "white-box": 1, "read-side": 1}
    assert detection_kind(["hanging-transaction"]) == "end-state" and detection_kind([]) is None
    assert detection_kind(["offsets-backwards", "invalid-txn-transition"]) == "white-box"


def test_ctrl_c_waits_for_the_runs_own_wind_down_and_stops_the_series(monkeypatch, tmp_path):
    """Ctrl-C reaches the child as well: run_seed keeps waiting for it (never kills it, which
    would leave its brokers running) and says the series was interrupted."""
    import bench.time_to_bug as ttb

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    calls = []

    class Child:
        returncode = 2

        def __init__(self, argv, **kwargs):
            calls.append("started")

        def communicate(self):
            calls.append("waited")
            if calls.count("waited") == 1:
                raise KeyboardInterrupt
            return f"log line\n{run_dir}\n", ""

        def kill(self):  # pragma: no cover - must not be called
            calls.append("killed")

    monkeypatch.setattr(ttb.subprocess, "Popen", Child)
    run, interrupted = ttb.run_seed("hunt-x", 1, [], tmp_path)
    assert (run, interrupted) == (run_dir, True)
    assert calls == ["started", "waited", "waited"]
    Child.returncode = 0
    calls.clear()
    monkeypatch.setattr(Child, "communicate", lambda self: (f"{run_dir}\n", ""))
    assert ttb.run_seed("hunt-x", 2, [], tmp_path) == (run_dir, False)


def test_coverage_counts_runs_by_release_and_the_faults_that_executed(tmp_path):
    """What a hunt that found nothing reports: its runs, releases, minutes and faults executed by
    kind. A fault whose operation failed did not happen and is not counted."""
    from bench.time_to_bug import render

    rows = []
    for name, release, ops in (("a", "4.4.0", [("kill-isolated", "ok"), ("kill-isolated", "ok"), ("clock-bump", "fail")]),
                               ("b", "4.2.1", [("kill-isolated", "ok"), ("message-hold", "ok")])):
        run = _run(tmp_path, name, "valid", {}, verdict_at=None, verified=1240.0)
        (run / "campaign.json").write_text(json.dumps({"cluster": {"kafka_version": release}}))
        with (run / "history" / "harness.jsonl").open("a") as f:
            for kind, outcome in ops:
                f.write("\n" + json.dumps({"type": "invoke", "f": f"fault:{kind}", "value": {}}))
                f.write("\n" + json.dumps({"type": outcome, "f": f"fault:{kind}", "value": {}}))
        rows.append(summarise_run(run, None))
    assert rows[0]["faults"] == {"kill-isolated": 2} and rows[0]["release"] == "4.4.0"
    coverage = summarise(rows)["coverage"]
    assert coverage == {"runs_by_release": {"4.2.1": 1, "4.4.0": 1}, "verdicts": {"valid": 2}, "minutes": 8.0,
                        "faults_executed": {"kill-isolated": 3, "message-hold": 1}}
    assert "faults executed: kill-isolated 3, message-hold 1" in render(rows, summarise(rows))
