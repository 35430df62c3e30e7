"""Faults on a cluster kchaos did not start, on two labs that kchaos reaches only as a user's campaign
would (bootstrap servers and a node-access preset):

* ``ssh``, Jepsen's shape: three brokers in network namespaces of their own, each with its own
  address and sshd (tests/external_lab.py), driven by the ``ssh`` preset;
* ``docker``, Compose's shape: three Kafka containers on a bridge network, started by the test on
  kchaos' private engine (tests/compose_lab.py), driven by the ``docker`` preset.

Every test runs on both. Marked ``external`` (``pytest -m external``); the multi-minute campaign
runs, and everything on the docker lab (the engine's start and three containers), are ``long``
too. Costs here (2 cores): the ssh lab starts in about 15 s, the docker lab in about a minute
(the engine and three vfs-backed containers); the identity check and the chain test take
seconds; each campaign run 1.5-3 minutes."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kchaos.clusters.clock_probe import measure_broker_clocks
from kchaos.clusters.external import ExternalCluster
from kchaos.clusters.spec import ClusterSpec
from kchaos.faults.steps import Stepper, StepSpec
from kchaos.runtime.heal_journal import CLUSTER_WIDE, JOURNAL_NAME, HealJournal
from kchaos.runtime.kafka_tools import describe_features, finalized_level
from kchaos.runtime.processes import processes_with_marker, reap
from kchaos.waiting import wait_until
from kchaos.workloads.history import HistoryWriter
from tests.compose_lab import running_compose_lab
from tests.external_lab import Lab, running_lab, sh

pytestmark = [pytest.mark.cluster, pytest.mark.external]

REPO = Path(__file__).resolve().parents[2]
KCHAOS = [sys.executable, "-m", "kchaos.cli"]
KAFKA = "4.2.1"


@pytest.fixture(scope="module", params=["ssh", pytest.param("docker", marks=pytest.mark.long)])
def lab(request, tmp_path_factory):
    labs = {"ssh": running_lab, "docker": running_compose_lab}
    with labs[request.param](tmp_path_factory.mktemp(f"lab-{request.param}"), KAFKA) as started:
        yield started


def healthy(lab: Lab, timeout_s: float = 120) -> None:
    """Every broker registered (through the bootstrap servers, as a client sees the cluster)."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": lab.bootstrap_servers, "log_level": 0, **lab.client_config()})
    lab.wait(lambda: len(admin.list_topics(timeout=5).brokers) == len(lab.nodes), timeout_s, "every broker registered")


def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return "[" + ", ".join(toml_value(v) for v in value) + "]"


def campaign(path: Path, lab: Lab, faults: list[dict], duration_s: int = 45, records: int = 3000,
             hold_s: float = 4, interval_s: float = 8, client: str = "confluent", steps: list[dict] = (),
             cluster: dict | None = None, **external) -> Path:
    """The default campaign's workload, sized down, on the lab through the ssh preset (no fault:
    ``faults.enabled = false``; ``steps``: ``[[steps]]``; ``cluster``: more ``[cluster]`` keys)."""
    ext = lab.external(**external)
    nodes = ext.pop("nodes")
    lines = ['name = "external-ssh"', "[run]", f"duration_s = {duration_s}",
             "[cluster]", 'backend = "external"', f'kafka_version = "{KAFKA}"',
             *(f"{k} = {toml_value(v)}" for k, v in (cluster or {}).items()), "[cluster.external]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in ext.items()]
    for node in nodes:
        lines += ["[[cluster.external.nodes]]", *(f"{k} = {toml_value(v)}" for k, v in node.items())]
    lines += ["[workload]", 'kind = "ctp"', f"client = {toml_value(client)}", f"records = {records}", "rate = 100", "workers = 3", "input_partitions = 6",
              "max_batch = 4", 'output_topics = ["ext-invoices", "ext-shipments"]', "abort_fraction = 0.05",
              "transaction_timeout_ms = 10000", "session_timeout_ms = 10000",
              "[workload.consumer]", '"max.poll.interval.ms" = 20000',
              "[observers]", "count = 1",
              "[faults]", *(['order = "round-robin"', "start_after_s = 5", f"interval_s = {interval_s}",
                             f"duration_s = {hold_s}"] if faults else ["enabled = false"])]
    for fault in faults:
        lines += ["[[faults.mix]]", *(f"{k} = {toml_value(v)}" for k, v in fault.items())]
    for step in steps:
        lines += ["[[steps]]", *(f"{k} = {toml_value(v)}" for k, v in step.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def kchaos(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([*KCHAOS, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO)


def only_run(out: Path) -> Path:
    runs = [p for p in out.iterdir() if p.is_dir()]
    assert len(runs) == 1, runs
    return runs[0]


def test_a_wrong_cluster_id_is_refused_before_anything_is_touched(lab, tmp_path):
    before = {n.node_id: (lab.broker_pids(n), lab.all_rules(n)) for n in lab.nodes}
    path = campaign(tmp_path / "c.toml", lab, [{"kind": "kill", "target": "txn-coordinator"}],
                    cluster_id="not-this-cluster")
    proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "1", timeout=180)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "not the cluster_id 'not-this-cluster'" in proc.stderr and "nothing was touched" in proc.stderr
    assert f"the cluster at {lab.bootstrap_servers} is" in proc.stderr  # the servers named, not a port of kchaos'
    journals = list((tmp_path / "runs").rglob(JOURNAL_NAME))
    assert all(HealJournal(j).entries() == [] for j in journals)
    assert {n.node_id: (lab.broker_pids(n), lab.all_rules(n)) for n in lab.nodes} == before
    # without allow_faults, the campaign is refused when loaded
    path = campaign(tmp_path / "d.toml", lab, [{"kind": "kill", "target": "txn-coordinator"}], allow_faults=False)
    proc = kchaos("plan", str(path), timeout=60)
    assert proc.returncode == 3 and "allow_faults = true" in proc.stderr


def test_a_partition_is_a_kchaos_chain_in_the_nodes_namespace_and_heal_removes_only_it(lab, tmp_path):
    """In process, through the ExternalCluster a run uses: node 1 isolated by rules in its own
    namespace (its peers cannot reach it, the harness still can); a rule of the node's own firewall,
    made before, survives the heal; the journal holds the act and its healing."""
    node1, node2 = lab.nodes[0], lab.nodes[1]
    own_rule = ["-A", "INPUT", "-p", "tcp", "--dport", "7", "-j", "DROP"]  # the operator's, not kchaos'
    lab.on_node(node1, "iptables", "-w", *own_rule)
    spec = ClusterSpec.load({"backend": "external", "kafka_version": KAFKA, "external": lab.external()})
    cluster = ExternalCluster(spec, tmp_path / "cluster")
    try:
        cluster.start()
        assert cluster.cluster_id == lab.cluster_id
        clocks = measure_broker_clocks(cluster)  # one machine's clock: the offsets are tiny, and bounded
        assert set(clocks["brokers"]) == {"1", "2", "3"}, clocks
        assert all(abs(b["offset_ms"]) <= b["bound_ms"] + 5 and b["bound_ms"] < 1000 for b in clocks["brokers"].values())
        cut = cluster.network.isolate(1)
        assert cut and all("n1" in name for name in cut)
        assert any(f"-s {node2.address}" in rule for rule in lab.kchaos_rules(node1))
        probe = f"timeout 3 bash -c 'echo > /dev/tcp/{node1.address}/9092'"
        assert lab.on_node(node2, "sh", "-c", probe, check=False).returncode != 0  # peers cut
        assert sh("sh", "-c", probe, check=False).returncode == 0  # the harness (and ssh) still reach it
        pairs = {tuple(name.split("-")[1::2]) for name in cut}  # a pair's repl and quorum links: one pair of rules
        assert [e.action for e in cluster.journal.pending()] == ["partition"] * len(pairs) == ["partition"] * 4
        cluster.network.heal()
        assert all(lab.kchaos_rules(n) == [] for n in lab.nodes)
        assert "-A INPUT -p tcp -m tcp --dport 7 -j DROP" in lab.all_rules(node1)
        assert lab.on_node(node2, "sh", "-c", probe, check=False).returncode == 0
        assert cluster.journal.pending() == []
    finally:
        cluster.stop()
        lab.on_node(node1, "iptables", "-w", *["-D" if a == "-A" else a for a in own_rule], check=False)


@pytest.mark.long
def test_the_default_campaign_on_ssh_nodes_is_valid_with_every_fault_executed_and_healed(lab, tmp_path):
    healthy(lab)
    faults = [{"kind": "kill", "target": "txn-coordinator"}, {"kind": "partition", "target": "isolate-leader-output"},
              {"kind": "pause", "target": "group-coordinator"}, {"kind": "kill", "target": "group-coordinator"},
              {"kind": "zombie", "target": "random-worker"}]
    path = campaign(tmp_path / "c.toml", lab, faults, duration_s=50)
    proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "3", timeout=900)
    run = only_run(tmp_path / "runs")
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 0, (results["verdict"], results.get("anomalies"), proc.stderr[-3000:])
    assert results["verdict"] == "valid" and not results.get("required_not_checked")
    assert results["facts"]["coordinator"]["clock"]["how"].startswith("measured")
    coverage = results["run"]["faults"]
    assert coverage["short"] == {} and set(coverage["executed"]) == {"kill", "partition", "pause", "zombie"}, coverage
    entries = HealJournal(run / "cluster" / JOURNAL_NAME).entries()
    assert {e.action for e in entries} >= {"kill", "partition", "pause"}
    assert all(e.healed for e in entries), [e for e in entries if not e.healed]
    # nothing left: no rule, no paused or stopped broker; the brokers' logs were kept
    assert all(lab.kchaos_rules(n) == [] for n in lab.nodes)
    assert all(lab.process_state(n) not in ("", "T") for n in lab.nodes)
    assert all((run / "cluster" / f"node-{n.node_id}" / "server.log").stat().st_size > 0 for n in lab.nodes)


@pytest.mark.long
@pytest.mark.parametrize("kind, target, healer", [("partition", "isolate-txn-coordinator", "reaper"),
                                                  ("pause", "txn-coordinator", "kchaos heal")])
def test_what_a_killed_harness_left_is_undone(lab, tmp_path, kind, target, healer):
    """SIGKILL of the harness (and its workers) while a fault holds. Its reaper, a dead man's switch,
    undoes the fault by itself; with the reaper killed too (the control machine died), ``kchaos heal
    RUN_DIR`` does. Either way: no rule, no paused broker, every broker registered again."""
    healthy(lab)
    path = campaign(tmp_path / "c.toml", lab, [{"kind": kind, "target": target}], duration_s=200, hold_s=150,
                    interval_s=160)
    harness = subprocess.Popen([*KCHAOS, "run", str(path), "--out", str(tmp_path / "runs"), "--seed", "1"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def acted() -> bool:
        if kind == "partition":
            return any(lab.kchaos_rules(n) for n in lab.nodes)
        return any(lab.process_state(n) == "T" for n in lab.nodes)

    try:
        lab.wait(lambda: harness.poll() is not None or acted(), 180, f"the {kind} fault")
        assert acted(), f"the harness ended (exit {harness.returncode}) before the fault acted"
    finally:
        if healer == "kchaos heal":
            reaper = sh("pgrep", "-f", f"kchaos.runtime.reaper {harness.pid}", check=False).stdout.split()
            assert reaper, "the run has no reaper"
            for pid in reaper:
                os.kill(int(pid), signal.SIGKILL)
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
        if healer == "kchaos heal":  # the control machine died: its workers and proxies with it
            reap(tmp_path / "runs")
    run = only_run(tmp_path / "runs")
    journal = HealJournal(run / "cluster" / JOURNAL_NAME)
    if healer == "reaper":
        lab.wait(lambda: not acted(), 60, "the reaper's heal")
        healed_by = [json.loads(line).get("how") for line in journal.path.read_text().splitlines() if '"healed"' in line]
        assert healed_by and all("reaper" in how for how in healed_by)
    else:
        time.sleep(2)  # what a reaper would have done by now, had it lived
        assert acted()
        proc = kchaos("heal", str(run), timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "healed" in proc.stderr and "NOT healed" not in proc.stderr
    assert all(lab.kchaos_rules(n) == [] for n in lab.nodes)
    assert all(lab.process_state(n) not in ("", "T") for n in lab.nodes)
    healthy(lab)
    assert HealJournal(run / "cluster" / JOURNAL_NAME).pending() == []
    assert lab.wait(lambda: processes_with_marker(str(run)) == [], 30, "the run's processes gone") is None
    again = kchaos("heal", str(run), timeout=120)  # idempotent
    assert again.returncode == 0 and "nothing to heal" in again.stderr


@pytest.mark.long
def test_through_the_front_every_fault_family_works_and_no_client_reaches_a_broker_directly(lab, tmp_path):
    """Client toxics, message faults, a kill and a partition on the lab through the address-rewriting
    front. The front's connections come from an address of their own; on this machine (where every
    kchaos client runs) a rule per broker refuses, and counts, connections from the harness's
    ordinary address to that broker's client port, so a client that followed a real broker address
    (Metadata, FindCoordinator, KIP-951's endpoints...) would be refused and counted. The rules
    live in the host's OUTPUT chain, not in the nodes: a killed container comes back in a new
    network namespace, without the rules it had. The counts stay 0; the run is VALID."""
    healthy(lab)
    subnet = lab.nodes[0].address.rsplit(".", 1)[0]
    front_ip = f"{subnet}.2"
    guards = {n.node_id: ["OUTPUT", "-p", "tcp", "-s", f"{subnet}.1", "-d", n.address, "--dport", "9092",
                          "-j", "REJECT", "--reject-with", "tcp-reset"] for n in lab.nodes}

    def refused() -> dict[int, list[int]]:
        listing = sh("iptables", "-w", "-L", "OUTPUT", "-v", "-x", "-n").stdout.splitlines()
        return {n.node_id: [int(line.split()[0]) for line in listing
                            if "reject-with tcp-reset" in line and f" {n.address} " in line] for n in lab.nodes}

    sh("ip", "addr", "add", f"{front_ip}/24", "dev", lab.bridge)
    for guard in guards.values():
        sh("iptables", "-w", "-I", *guard)
    try:
        # the control: a direct connection is refused and counted; then the counts start from 0
        probe = f"timeout 3 bash -c 'echo > /dev/tcp/{lab.nodes[0].address}/9092'"
        assert sh("sh", "-c", probe, check=False).returncode != 0
        assert refused()[lab.nodes[0].node_id][0] > 0
        gc.collect()  # no client of an earlier test lingers in this process (they connect from .1 too)
        before = refused()  # counted from here (the host's other counters are left alone)
        faults = [{"kind": "latency", "target": "all-clients", "params": {"latency_ms": 150, "jitter_ms": 50}},
                  {"kind": "kill", "target": "txn-coordinator"},
                  {"kind": "message-delay", "target": "txn-coordinator", "params": {"apis": ["EndTxn"], "count": 2,
                                                                                    "delay_ms": 1500}},
                  {"kind": "partition", "target": "isolate-leader-output"}]
        path = campaign(tmp_path / "c.toml", lab, faults, duration_s=45, front_source_address=front_ip)
        # seed 4 (`kchaos plan`): the EndTxn delay comes before the kill as well as after it; on the
        # docker lab a killed coordinator's container can stall the workers for the rest of a 45 s
        # run, and a delay with nothing to hold would prove nothing
        proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "4", timeout=900)
        run = only_run(tmp_path / "runs")
        results = json.loads((run / "results.json").read_text())
        assert proc.returncode == 0, (results["verdict"], results.get("anomalies"), proc.stderr[-3000:])
        assert set(results["run"]["faults"]["executed"]) == {"latency", "kill", "message-delay", "partition"}
        counts = {node: [after - b for after, b in zip(c, before[node])] for node, c in refused().items()}
        assert counts == {n.node_id: [0] for n in lab.nodes}, f"clients reached brokers around the front: {counts}"
        front = json.loads((run / "cluster" / "messages" / "front.json").read_text())
        assert {v["upstream"] for v in front["nodes"].values()} == {f"{n.address}:9092" for n in lab.nodes}
        assert front["rewritten"].get("Metadata", 0) > 0 and front["rewritten"].get("FindCoordinator", 0) > 0, front
        events = (run / "cluster" / "messages" / "events.jsonl").read_text()
        assert '"kind": "delay"' in events and "EndTxn" in events
    finally:
        for guard in guards.values():
            sh("iptables", "-w", "-D", *guard, check=False)
        sh("ip", "addr", "del", f"{front_ip}/24", "dev", lab.bridge, check=False)


# -- transaction.version flips on the lab ----------------------------------------------------------

class LabTools:
    """Kafka's tools pointed at the lab as its operator would point them (not through kchaos)."""

    kafka_version = KAFKA

    def __init__(self, lab: Lab):
        self.bootstrap_servers = lab.bootstrap_servers

    def java_client_config_file(self):
        return None


def lab_tv(lab: Lab) -> int:
    return finalized_level(describe_features(LabTools(lab)), "transaction.version")


def flip(level: int, at_s: float, **extra) -> dict:
    return {"at_s": at_s, "action": "feature", "feature": "transaction.version", "level": level, **extra}


def test_a_flip_without_consent_or_on_another_level_is_refused_before_anything_is_touched(lab, tmp_path):
    """Without allow_feature_changes (the faults' allow_faults is not it) or without the cluster's id:
    refused on load, exit 3 in one line, before any cluster, worker or run directory. A campaign whose
    cluster.transaction_version is not the cluster's: stopped at start, exit 3, the journal empty,
    the level as it was."""
    original = lab_tv(lab)
    out = tmp_path / "runs"
    for missing, external in (("cluster.external.allow_feature_changes = true", {}),
                              ("cluster.external.cluster_id", {"allow_feature_changes": True, "cluster_id": ""})):
        path = campaign(tmp_path / "c.toml", lab, [], steps=[flip(1 if original == 2 else 2, 5)], **external)
        if not external.get("cluster_id", True):  # drop the pin altogether
            path.write_text(path.read_text().replace('cluster_id = ""\n', ""))
        for command in (["plan", str(path)], ["run", str(path), "--out", str(out), "--seed", "1"]):
            proc = kchaos(*command, timeout=120)
            assert proc.returncode == 3, proc.stdout + proc.stderr
            said = [line for line in proc.stderr.splitlines() if line.strip()]
            assert len(said) == 1 and f"needs {missing}" in said[0], proc.stderr
            assert "steps[0] (transaction.version ->" in said[0]
        assert not out.exists()  # nothing started, not even a run directory
    other = 1 if original == 2 else 2
    path = campaign(tmp_path / "d.toml", lab, [], cluster={"transaction_version": other})
    plan_text = kchaos("plan", str(path), timeout=60)
    assert plan_text.returncode == 0 and f"transaction.version {other} required (checked against the cluster" \
        in plan_text.stdout, plan_text.stdout + plan_text.stderr
    proc = kchaos("run", str(path), "--out", str(out), "--seed", "1", timeout=240)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert (f"has transaction.version {original} finalised, not the transaction.version {other} "
            "(cluster.transaction_version) the campaign names: nothing was touched") in proc.stderr, proc.stderr
    run = only_run(out)
    assert not (run / "workers").exists() and HealJournal(run / "cluster" / JOURNAL_NAME).entries() == []
    assert lab_tv(lab) == original


@pytest.mark.long  # about 20 runs of Kafka's tools (a JVM each): 60-80 s here
def test_a_flip_with_consent_is_journaled_first_and_undone(lab, tmp_path):
    """In process, through the ExternalCluster and the stepper a run uses, with consent. Steps that
    bring the level back themselves leave nothing to undo; a step that does not is undone when the
    cluster stops (the end of a run); either way the journal holds each change, with the level
    before, before it was made."""
    original = lab_tv(lab)
    other = 1 if original == 2 else 2
    spec = ClusterSpec.load({"backend": "external", "kafka_version": KAFKA, "transaction_version": original,
                             "external": lab.external(allow_feature_changes=True)})
    for steps, restored_by in (((flip(other, 0), flip(original, 0)), "the run's own step"), ((flip(other, 0),), "stop")):
        work = tmp_path / f"cluster-{len(steps)}"
        cluster = ExternalCluster(spec, work)
        history = HistoryWriter(tmp_path / f"harness-{len(steps)}.jsonl", "harness")
        try:
            cluster.start()  # the level the campaign names is the cluster's: it proceeds
            stepper = Stepper(cluster, tuple(StepSpec(**s) for s in steps), history, threading.Lock())
            stepper.start()
            wait_until(lambda: stepper.done, 180, 0.5, "the steps")
            stepper.stop()
            assert [s["outcome"] for s in stepper.executed] == ["ok"] * len(steps), stepper.executed
            entries = cluster.journal.entries()
            assert [(e.node, e.action, e.detail["before"], e.detail["level"], e.detail["original"]) for e in entries] \
                == [(CLUSTER_WIDE, "feature", original, other, original),
                    (CLUSTER_WIDE, "feature", other, original, original)][:len(steps)]
            assert all(f"transaction.version={original}" in e.undo[0]["shell"] for e in entries)
            assert all(lab.bootstrap_servers in e.command and "FeatureCommand" in e.command for e in entries)
            if restored_by == "stop":
                assert lab_tv(lab) == other and [e.id for e in cluster.journal.pending()] == [entries[0].id]
            else:  # the level is read back below: the stop has nothing to do
                assert cluster.journal.pending() == []
        finally:
            history.close()
            cluster.stop()
        assert lab_tv(lab) == original, restored_by
        assert cluster.journal.pending() == []
        how = [json.loads(line)["how"] for line in cluster.journal.path.read_text().splitlines() if '"healed"' in line]
        assert how and all(("by the run's own step" in h) == (restored_by != "stop") for h in how), how
    # the undo again, at the level already (a second heal, a reaper and `kchaos heal` both): each of
    # its two commands (downgrade, upgrade) is accepted by the controller there and changes nothing
    for half in entries[0].undo[0]["shell"].split(" || "):
        again = subprocess.run(["/bin/sh", "-c", half], capture_output=True, text=True, timeout=120)
        assert again.returncode == 0, (half.split()[-3:], again.stdout + again.stderr)
    assert lab_tv(lab) == original


@pytest.mark.long
def test_a_harness_killed_after_a_flip_is_healed_by_kchaos_heal(lab, tmp_path):
    """`kchaos run` with a flip and no step back, SIGKILLed (its reaper too: the control machine
    died) once the flip is made: the level stays flipped until `kchaos heal RUN_DIR` puts the one the
    run found back; a second heal has nothing to do."""
    healthy(lab)
    original = lab_tv(lab)
    other = 1 if original == 2 else 2
    path = campaign(tmp_path / "c.toml", lab, [], duration_s=200, records=20000, steps=[flip(other, 5)],
                    allow_feature_changes=True)
    harness = subprocess.Popen([*KCHAOS, "run", str(path), "--out", str(tmp_path / "runs"), "--seed", "1"], cwd=REPO,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def flipped() -> bool:
        journals = list((tmp_path / "runs").glob(f"*/cluster/{JOURNAL_NAME}"))
        return bool(journals and HealJournal(journals[0]).pending()) and lab_tv(lab) == other

    try:
        lab.wait(lambda: harness.poll() is not None or flipped(), 300, "the flip")
        assert harness.poll() is None, f"the harness ended (exit {harness.returncode}) before the flip"
    finally:
        reaper = sh("pgrep", "-f", f"kchaos.runtime.reaper {harness.pid}", check=False).stdout.split()
        for pid in reaper:
            os.kill(int(pid), signal.SIGKILL)
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
        reap(tmp_path / "runs")  # the control machine died: its workers with it
    assert reaper, "the run has no reaper"
    run = only_run(tmp_path / "runs")
    journal = HealJournal(run / "cluster" / JOURNAL_NAME)
    [entry] = journal.pending()
    assert (entry.node, entry.action, entry.detail["before"], entry.detail["level"]) == (CLUSTER_WIDE, "feature",
                                                                                         original, other)
    time.sleep(2)  # what a reaper would have done by now, had it lived
    assert lab_tv(lab) == other
    proc = kchaos("heal", str(run), timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "the cluster: feature (act 1) healed" in proc.stderr and "NOT healed" not in proc.stderr
    assert lab_tv(lab) == original and journal.pending() == []
    assert lab.wait(lambda: processes_with_marker(str(run)) == [], 30, "the run's processes gone") is None
    again = kchaos("heal", str(run), timeout=120)  # idempotent
    assert again.returncode == 0 and "nothing to heal" in again.stderr
