"""Certification logic on hand-made histories: phases cut at steps, commits and anomaly cases
placed by time and client, vacuous phases and unexercised TV2 are never a pass; the shipped
certification campaigns and step rules validate on load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.verifier.certify import build_phases, certify
from kchaos.verifier.model import case_time_and_slots, commits_by_client_tv
from kchaos.errors import ConfigError
from kchaos.workloads.java_client import worker_properties

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


def _run(tmp_path: Path, events, verdict="valid", anomalies=None) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _history(events)))
    (run / "results.json").write_text(json.dumps({"verdict": verdict, "anomalies": anomalies or {}, "errors": []}))
    (run / "campaign.json").write_text(json.dumps({"cluster": {"kafka_version": "4.2.1"}}))
    return run


def _flip_history(java_v2_after=True, java_commits_after=2):
    flip_after = {**FEATURES, "transaction.version": 2}
    ev = [_op("harness", "setup", 0, 0, {"txid_prefix": "kc"}),
          _op("harness", "phase", 1, 1, {"phase": "steady"}),
          _op("harness", "worker-start", 1, 1, {"slot": "w0", "client": "confluent"}),
          _op("harness", "worker-start", 1, 1, {"slot": "w1", "client": "java"}),
          _op("w0.1", "commit", 2, 3, {"txn_seq": 1}), _op("w1.1", "commit", 2, 3, {"txn_seq": 1}, txn_v2=False),
          _op("harness", "step:feature", 10, 14, {"index": 0, "describe": "transaction.version -> 2",
                                                  "features_before": FEATURES, "features_after": flip_after}),
          _op("w0.1", "commit", 11, 12, {"txn_seq": 2}),
          _op("w0.1", "commit", 20, 21, {"txn_seq": 3})]
    ev += [_op("w1.2", "commit", 20 + i, 21 + i, {"txn_seq": i + 1}, txn_v2=java_v2_after)
           for i in range(java_commits_after)]
    ev.append(_op("harness", "phase", 40, 40, {"phase": "final-reads"}))
    return ev


def test_phases_are_cut_at_steps_and_carry_the_feature_level():
    ops = [{"process": e["process"], "f": e["f"], "invoke_time": e["time"], "complete_time": e["t1"],
            "value": e["value"], "outcome": e["outcome"]} for e in _flip_history()]
    phases, steps = build_phases(ops, "4.2.1")
    assert [(p.name, p.start, p.transaction_version) for p in phases] == [
        ("before any step", 1, 1), ("during step 0: transaction.version -> 2", 10, 1),
        ("after step 0: transaction.version -> 2", 14, 2)]
    assert steps[0]["outcome"] == "ok" and steps[0]["features_after"]["transaction.version"] == 2


def test_a_clean_flip_passes_with_commits_per_phase_and_client(tmp_path):
    cert = certify(_run(tmp_path, _flip_history()))
    assert cert["overall"] == "pass" and cert["exit_code"] == 0, cert["reasons"]
    rows = {(r["phase"].split(":")[0], r["client"]): r for r in cert["rows"]}
    assert rows[("before any step", "java")]["committed_transactions"] == 1
    assert rows[("after step 0", "java")]["tv2_commits"] == 2
    # no Java commit in the seconds the flip was applied: not required there
    assert rows[("during step 0", "java")]["verdict"] == "not-exercised"


def test_vacuous_phase_and_unexercised_tv2_are_unknown_not_pass(tmp_path):
    cert = certify(_run(tmp_path, _flip_history(java_v2_after=False)))
    assert cert["overall"] == "unknown" and cert["exit_code"] == 2
    assert any("TV2 not exercised" in r for r in cert["reasons"])
    (tmp_path / "b").mkdir()
    cert = certify(_run(tmp_path / "b", _flip_history(java_commits_after=0)))
    assert cert["overall"] == "unknown" and any("not exercised" in r for r in cert["reasons"])


def test_anomaly_cases_land_in_their_phase_and_client(tmp_path):
    case = {"explanation": "input in-1 written twice",
            "transactions": [{"process": "w1.2", "history_op": {"process": "w1.2", "invoke_time": 20.5}}]}
    timeless = {"explanation": "input in-9 never processed", "records": [{"in_partition": 0}]}
    cert = certify(_run(tmp_path, _flip_history(), verdict="invalid", anomalies={"duplicate": [case, timeless]}))
    assert cert["overall"] == "fail" and cert["exit_code"] == 1
    bad = [r for r in cert["rows"] if r["verdict"] == "invalid"]
    assert [(r["phase"].split(":")[0], r["client"]) for r in bad] == [("after step 0", "java")]
    assert bad[0]["cases"][0]["anomaly"] == "duplicate"
    assert cert["unattributed_cases"][0]["explanation"] == "input in-9 never processed"
    assert case_time_and_slots(case) == (20.5, {"w1"})
    # an offsets case carries the commit's invoke time; the earliest time named wins
    offsets = {"commit_invoked": 31.0, "worker": "w0.1", "transactions": [{"history_op": {"invoke_time": 33.0}}]}
    assert case_time_and_slots(offsets) == (31.0, {"w0"})
    assert case_time_and_slots(timeless) == (None, set())


def test_no_row_is_valid_when_the_verifier_could_not_judge_the_run(tmp_path):
    cert = certify(_run(tmp_path, _flip_history(), verdict="unknown"))
    assert cert["overall"] == "unknown" and cert["exit_code"] == 2
    exercised = [r for r in cert["rows"] if r["verdict"] != "not-exercised"]
    assert exercised and {r["verdict"] for r in exercised} == {"unknown"}
    assert all("could not judge" in r["note"] for r in exercised)


def test_a_failed_step_makes_the_certification_unknown(tmp_path):
    ev = _flip_history()
    step = next(e for e in ev if e["f"] == "step:feature")
    step["outcome"], step["error"] = "fail", "the controller refused"
    cert = certify(_run(tmp_path, ev))
    assert cert["overall"] == "unknown" and any("refused" in str(r) or "fail" in r for r in cert["reasons"])


@pytest.mark.parametrize("name", ["certify-tv-flip.toml", "certify-rolling-upgrade.toml"])
def test_shipped_certification_campaigns_load(name):
    campaign = load_campaign(CAMPAIGNS_DIR / name)
    assert campaign.steps and campaign.workload.client == "mixed"


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


def test_rolling_upgrade_needs_the_local_backend(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[cluster]\nbackend = "external"\n[cluster.external]\nbootstrap_servers = "h:9092"\n'
                    '[[steps]]\nat_s = 5\naction = "rolling-upgrade"\nversion = "4.3.1"\n')
    with pytest.raises(ConfigError, match="local backend"):
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
