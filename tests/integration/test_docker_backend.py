"""The Docker backend on a real engine: kchaos' own dockerd (installed with `kchaos setup --docker`
where it is missing), kchaos' locally built Kafka image, real containers. Long tier: the engine's
install, the image's first build and three containers take minutes on two cores.

Each test ends with nothing of the engine left: no dockerd, containerd or shim under the test's
exec root, no container JVM, and (after a crash) no container or network left in the engine."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from kchaos.clusters import ClusterSpec, create_cluster
from kchaos.clusters.docker.cluster import DockerCluster, cluster_prefix
from kchaos.clusters.docker.engine import PrivateDockerEngine, install_engine
from kchaos.runtime.kafka_tools import describe_features
from kchaos.runtime.processes import processes_with_marker
from kchaos.waiting import wait_until

pytestmark = [pytest.mark.long, pytest.mark.docker, pytest.mark.cluster]

KCHAOS = [sys.executable, "-m", "kchaos.cli"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def engine_installed():
    if os.geteuid() != 0:
        pytest.skip("kchaos' private Docker engine runs as root")
    install_engine()  # raises SetupError naming the fix where it cannot


def leftovers(exec_root: Path, prefix: str) -> list[str]:
    """Processes of the engine (dockerd, containerd, shims carry the exec root) or of the containers
    (their JVMs carry -Dkchaos.container=<prefix>-n<id>)."""
    pids = processes_with_marker(str(exec_root)) + processes_with_marker(f"kchaos.container={prefix}")
    return [Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200].decode(errors="replace")
            for pid in pids if Path(f"/proc/{pid}").exists()]


# Class scope: the cluster (and its engine, one per machine at a time) ends with the class, before
# the tests below start their own runs with their own engines.
@pytest.fixture(scope="class")
def docker_cluster(engine_installed, tmp_path_factory):
    work = tmp_path_factory.mktemp("docker-cluster")
    spec = ClusterSpec.load({"backend": "docker", "nodes": 3, "transaction_version": 1, "proxy_messages": True,
                             "docker": {"engine": "private"}})
    cluster = create_cluster(spec, work)
    assert isinstance(cluster, DockerCluster)
    cluster.start()
    exec_root = cluster._engine.exec_root if cluster._engine else None
    try:
        yield cluster
    finally:
        cluster.stop()
    assert exec_root is not None
    assert leftovers(exec_root, cluster.prefix) == []
    assert processes_with_marker(str(work)) == []  # Toxiproxy and the message proxy too
    assert not exec_root.exists()
    logs = (work / "node-1" / "logs" / "stdout.log").read_text(errors="replace")
    assert "Kafka Server started" in logs  # the container's own output is kept


def _status(cluster: DockerCluster) -> dict[int, str]:
    return {n.node_id: n._status() for n in cluster.nodes}  # type: ignore[attr-defined]


def _replicated_by(cluster: DockerCluster, node_id: int) -> list[tuple[str, int]]:
    md = cluster.admin().list_topics(timeout=10)
    return [(t, p) for t, topic in md.topics.items() for p, part in topic.partitions.items()
            if node_id in part.replicas and len(part.replicas) > 1]


class TestOneClusterOnDocker:
    """One 3-node cluster (TV1 at start, its clients through Toxiproxy and the message proxy) on
    kchaos' own engine and image."""

    def test_a_transaction_version_flip_and_back_through_the_stepper(self, docker_cluster, tmp_path):
        """certify-tv-flip's steps as a run makes them (faults/steps.py): TV 1 -> 2 -> 1 with the
        host's FeatureCommand through the client proxies, each read back from the cluster."""
        import threading

        from kchaos.faults.steps import Stepper, StepSpec
        from kchaos.workloads.history import HistoryWriter

        steps = tuple(StepSpec(at_s=0, action="feature", feature="transaction.version", level=level) for level in (2, 1))
        history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
        seen: list[int] = []
        stepper = Stepper(docker_cluster, steps, history, threading.Lock(),
                          on_event=lambda said: seen.append(describe_features(docker_cluster)["transaction.version"])
                          if said.startswith("step") and " done" in said else None)
        try:
            stepper.start()
            wait_until(lambda: stepper.done, 180, 0.5, "the steps")
        finally:
            stepper.stop()
            history.close()
        assert [s["outcome"] for s in stepper.executed] == ["ok", "ok"], stepper.executed
        assert [(s["from"], s["level"], s["changed"]) for s in stepper.executed] == [(1, 2, True), (2, 1, True)]
        assert seen == [2, 1]

    def test_message_faults_act_on_the_client_path(self, docker_cluster):
        """A transactional commit through the message proxy behind the client proxies: its EndTxn
        held back by a delay rule, recorded with its transactional id (certify-tv-flip's kip890
        package holds and duplicates EndTxn on this path)."""
        import time
        import uuid

        from confluent_kafka import Producer
        from confluent_kafka.admin import NewTopic

        cluster = docker_cluster
        topic = f"mf-{uuid.uuid4().hex[:8]}"
        cluster.admin().create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
        client_id = f"kchaos-w9-producer-{topic}"
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"txid-{topic}",
                             "client.id": client_id, "log_level": 0})
        producer.init_transactions(60)
        rule = cluster.messages.add_rule({"id": "t-delay", "kind": "delay", "client_prefix": client_id,
                                          "apis": ["EndTxn"], "delay_ms": 1500})
        producer.begin_transaction()
        producer.produce(topic, b"a")
        started = time.monotonic()
        producer.commit_transaction(30)
        took = time.monotonic() - started
        [event] = cluster.messages.remove_rule(rule["id"])
        assert took >= 1.4 and event["action"] == "delayed" and event["api"] == "EndTxn", (took, event)
        assert event["transactional_id"] == f"txid-{topic}" and event["answer"] == {"error": "NONE"}
        assert (cluster.work_dir / "messages" / "events.jsonl").read_text().count("EndTxn") >= 1

    def test_image_formats_with_the_requested_feature_levels(self, docker_cluster):
        """TV1 at start: the cluster's first records carry the level, no downgrade after start."""
        assert docker_cluster.image == "kchaos/kafka:4.2.1"
        assert describe_features(docker_cluster)["transaction.version"] == 1

    def test_node_operations_act_on_their_own_container(self, docker_cluster):
        cluster = docker_cluster
        cluster.node(2).kill()
        assert _status(cluster) == {1: "running", 2: "exited", 3: "running"}
        cluster.node(2).start()
        cluster.wait_healthy(120)
        cluster.node(3).pause()
        try:
            assert _status(cluster) == {1: "running", 2: "running", 3: "paused"}
            assert cluster.node(3).info().state == "paused"
        finally:
            cluster.node(3).resume()
        cluster.node(1).restart()
        assert _status(cluster) == {1: "running", 2: "running", 3: "running"}
        cluster.wait_healthy(120)

    def test_isolation_cuts_a_node_from_its_peers_and_heal_restores_it(self, docker_cluster):
        """The cut is in the node's own network namespace: its followers fall out of the ISR (the
        replication links are cut), clients still reach it through its proxy; heal brings it back."""
        from confluent_kafka.admin import NewTopic

        cluster = docker_cluster
        cluster.admin().create_topics([NewTopic("kchaos-isolation", 3, 3)])["kchaos-isolation"].result(30)
        wait_until(lambda: _replicated_by(cluster, 1), 30, 0.5, "the new topic in the metadata")
        cluster.wait_healthy(120)
        net = cluster.network
        cut = net.isolate(1)
        assert "repl-n1-to-n2" in cut and "quorum-n2-to-n1" in cut
        try:
            wait_until(lambda: any(1 not in cluster.isr(t, p) for t, p in _replicated_by(cluster, 1)), 90, 1.0,
                       "node 1 stayed in every ISR while cut off")
        finally:
            net.heal()
        cluster.wait_healthy(180)
        assert cluster.under_replicated_partitions() == []

    def test_a_rolling_upgrade_moves_every_container_to_the_next_release_with_its_data(self, docker_cluster, tmp_path):
        """Last in the class (the cluster ends on 4.3.1): the stepper's rolling upgrade as a run makes
        it, each node's container replaced by one on kchaos/kafka:4.3.1 with the same data; committed
        records and the finalized features survive, each old container's output is kept."""
        import threading

        from confluent_kafka import Consumer, Producer, TopicPartition
        from confluent_kafka.admin import NewTopic

        from kchaos.faults.steps import Stepper, StepSpec
        from kchaos.workloads.history import HistoryWriter

        cluster = docker_cluster
        cluster.admin().create_topics([NewTopic("kchaos-upgrade", 1, 3)])["kchaos-upgrade"].result(30)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        for i in range(20):
            producer.produce("kchaos-upgrade", str(i).encode())
        assert producer.flush(30) == 0
        history = HistoryWriter(tmp_path / "harness.jsonl", "harness")
        stepper = Stepper(cluster, (StepSpec(at_s=0, action="rolling-upgrade", version="4.3.1", settle_s=0),),
                          history, threading.Lock())
        try:
            stepper.start()
            wait_until(lambda: stepper.done, 900, 1.0, "the rolling upgrade")
        finally:
            stepper.stop()
            history.close()
        assert [s["outcome"] for s in stepper.executed] == ["ok"], stepper.executed
        nodes = stepper.executed[0]["nodes"]
        assert [(n["from"], n["to"]) for n in nodes] == [("4.2.1", "4.3.1")] * 3
        assert cluster.kafka_version == "4.3.1" and cluster.node_versions() == {1: "4.3.1", 2: "4.3.1", 3: "4.3.1"}
        assert {cluster.client.containers.get(n.spec.name).image.tags[0] for n in cluster.nodes} == {  # type: ignore[attr-defined]
            "kchaos/kafka:4.3.1"}
        assert describe_features(cluster)["transaction.version"] == 1  # the metadata log came across
        cluster.wait_healthy(180)
        consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": "kchaos-upgrade-check",
                             "enable.auto.commit": False})
        try:
            consumer.assign([TopicPartition("kchaos-upgrade", 0, 0)])
            seen: list[bytes] = []
            wait_until(lambda: seen.extend(m.value() for m in consumer.consume(20, 1.0) if not m.error()) or
                       len(seen) >= 20, 60, 0.1, "the records written before the upgrade")
        finally:
            consumer.close()
        assert seen == [str(i).encode() for i in range(20)]
        for nid in (1, 2, 3):  # the 4.2.1 container's output, kept apart from the running one's
            assert "Kafka Server started" in (cluster.work_dir / f"node-{nid}" / "logs" / "stdout.0.log").read_text()


def test_default_campaign_on_docker_is_valid(engine_installed, tmp_path):
    """`kchaos run --set cluster.backend=docker --seed 5`: the whole default campaign's faults
    (coordinator and leader kills, an isolated leader, a zombie worker, client latency, with its
    exposure bar) on containers, VALID, the
    containers' logs in the run directory, nothing left running."""
    out = tmp_path / "runs"
    proc = subprocess.run([*KCHAOS, "run", "--set", "cluster.backend=docker", "--seed", "5", "--out", str(out)],
                          capture_output=True, text=True, timeout=1200, cwd=REPO)
    run_dir = next(out.iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    assert proc.returncode == 0 and results["verdict"] == "valid", (proc.stderr[-3000:], results.get("errors"),
                                                                    results.get("anomaly_types"))
    cluster = json.loads((run_dir / "cluster.json").read_text())
    assert cluster["backend"] == "docker" and cluster["image"] == "kchaos/kafka:4.2.1"
    heal = json.loads((run_dir / "heal.json").read_text())
    kinds = {f["kind"] for f in heal["executed"] if not f.get("error")}
    assert {"kill", "partition", "latency"} <= kinds, heal["executed"]
    for nid in (1, 2, 3):
        assert "Kafka Server started" in (run_dir / "cluster" / f"node-{nid}" / "logs" / "stdout.log").read_text()
    assert processes_with_marker(f"kchaos.container={cluster_prefix(run_dir / 'cluster')}") == []
    assert processes_with_marker(str(run_dir)) == []


def test_killed_harness_on_docker_leaves_no_process_and_the_next_engine_no_container(engine_installed, tmp_path):
    out = tmp_path / "runs"
    proc = subprocess.Popen([*KCHAOS, "run", "--set", "cluster.backend=docker", "--set", "cluster.nodes=1",
                             "--duration", "60", "--out", str(out)],
                            cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: list(out.glob("*/workers/pids/w0.1.pid")), 300, 0.5, "the workers never started")
        run_dir = next(out.iterdir())
        prefix = cluster_prefix(run_dir / "cluster")
        assert processes_with_marker(f"kchaos.container={prefix}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    exec_root = PrivateDockerEngine(run_dir / "cluster", run_dir / "cluster" / "pids").exec_root
    wait_until(lambda: leftovers(exec_root, prefix) == [] and processes_with_marker(str(run_dir)) == [], 60, 0.5,
               "the reaper left processes behind")
    # the dead engine's records: the next engine removes them as it starts
    engine = PrivateDockerEngine(tmp_path / "next", tmp_path / "next" / "pids")
    client = engine.start()
    try:
        assert client.containers.list(all=True, filters={"label": "kchaos.cluster"}) == []
        assert client.networks.list(filters={"label": "kchaos.cluster"}) == []
        assert not exec_root.exists()
    finally:
        engine.stop(client)
