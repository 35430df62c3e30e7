"""The local JVM backend against real brokers."""

from __future__ import annotations

import socket
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from kchaos.clusters.base import coordinator_partition
from kchaos.clusters.clock_probe import measure_broker_clocks
from kchaos.clusters.clients import create_topic, quiet
from kchaos.harness.smoke import run_smoke
from kchaos.runtime.kafka_tools import (broker_transaction_state, describe_features, describe_quorum_leader, java_error_summary,
                                        parse_tool_table, run_tool, run_transactions_batch)
from kchaos.runtime.processes import processes_with_marker
from kchaos.waiting import wait_until

from tests.open_transaction import open_transaction

from .conftest import start_local


def _produce(cluster, topic, n, partition=0, timeout_s=30):
    producer = Producer(quiet({**cluster.client_config(), "acks": "all", "enable.idempotence": True,
                               "message.timeout.ms": int(timeout_s * 1000)}))
    errors = []
    for i in range(n):
        producer.produce(topic, value=f"v{i}".encode(), partition=partition,
                         callback=lambda err, msg: errors.append(err) if err else None)
    remaining = producer.flush(timeout_s)
    return remaining == 0 and not errors


def test_produce_and_consume_through_the_client_proxies(cluster3):
    # Every advertised client address is a Toxiproxy listener, not a broker port.
    proxy_ports = {str(p) for p in cluster3.ports.proxy_client.values()}
    md = cluster3.admin().list_topics(timeout=10)
    assert {str(b.port) for b in md.brokers.values()} == proxy_ports
    result = run_smoke(cluster3, records=500, batch=50)
    assert result.ok, result
    assert result.consumed == 500 and result.committed_transactions == 10


def test_replication_traffic_flows_through_the_pair_proxies(cluster3):
    """Cutting one pair proxy stops that follower's fetches: it leaves the ISR; healing brings it back."""
    topic = f"repl-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 3)
    assert _produce(cluster3, topic, 10)
    leader = cluster3.leader(topic, 0)
    follower = next(r for r in cluster3.replicas(topic, 0) if r != leader)
    proxy = f"repl-n{follower}-to-n{leader}"
    assert proxy in cluster3.toxiproxy.proxies()
    cluster3.toxiproxy.set_enabled(proxy, False)
    # A follower counts as caught up while its log end equals the leader's, so keep writing
    # (acks=1: acks=all would wait for the cut follower until it leaves the ISR).
    writer = Producer(quiet({**cluster3.client_config(), "acks": 1, "enable.idempotence": False}))

    def follower_left_isr() -> bool:
        writer.produce(topic, value=b"x", partition=0)
        writer.poll(0)
        return follower not in cluster3.isr(topic, 0)

    try:
        wait_until(follower_left_isr, 60, 0.5,
                   f"follower {follower} did not leave the ISR after its link to leader {leader} was cut")
        assert leader in cluster3.isr(topic, 0)
    finally:
        cluster3.network.heal()
        writer.flush(30)
    wait_until(lambda: follower in cluster3.isr(topic, 0), 60, 0.5, "follower did not rejoin the ISR after heal")


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


def _client_proxy_enabled(cluster, node_id: int) -> bool:
    return cluster.toxiproxy.proxy(f"client-n{node_id}").enabled


def test_killed_leader_moves_leadership_then_rejoins_isr(cluster3):
    topic = f"kill-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 3)
    assert _produce(cluster3, topic, 20)
    old_leader = cluster3.leader(topic, 0)
    node = cluster3.node(old_leader)
    node.kill()
    assert not node.is_running
    # the dead broker's client port refuses, through its proxy as without one
    assert _refused(cluster3.ports.client_entry(old_leader))
    try:
        new_leader = wait_until(
            lambda: (lambda l: l if l not in (-1, old_leader) else None)(cluster3.leader(topic, 0)),
            60, 0.5, "leadership did not move off the killed broker", retry_on=(Exception,))
        assert new_leader != old_leader
        assert _produce(cluster3, topic, 20), "the cluster stopped accepting writes after the leader was killed"
    finally:
        node.start()
    wait_until(lambda: old_leader in cluster3.isr(topic, 0), 90, 1.0,
               f"restarted broker {old_leader} did not rejoin the ISR", retry_on=(Exception,))
    wait_until(lambda: _client_proxy_enabled(cluster3, old_leader), 30, 0.1,
               "the restarted broker's client proxy stayed closed")
    cluster3.wait_healthy(90)


def test_a_client_link_cut_holds_across_a_restart_until_the_heal(cluster3):
    nid = cluster3.broker_ids[-1]
    node = cluster3.node(nid)
    node.kill()
    try:
        assert cluster3.network.cut_clients([nid]) == [f"client-n{nid}"]
        node.start()
        wait_until(lambda: not _refused(cluster3.ports.client[nid]), 90, 0.2, "the broker did not listen again")
        time.sleep(1.0)  # the port follower polls every 0.1 s: it had its chance to reopen the cut link
        assert not _client_proxy_enabled(cluster3, nid), "a restart undid the fault's cut of the client link"
    finally:
        cluster3.network.heal()
    assert _client_proxy_enabled(cluster3, nid)
    cluster3.wait_healthy(90)


def test_pause_and_resume_a_broker(cluster3):
    topic = f"pause-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 1, 3)
    victim = cluster3.leader(topic, 0)
    node = cluster3.node(victim)
    assert str(victim) in measure_broker_clocks(cluster3, samples=1)["brokers"]  # the probe topic exists
    node.pause()
    try:
        wait_until(lambda: node.is_paused, 5, 0.05, "node did not stop")
        assert node.info().state == "paused"
        # A paused leader stops heartbeating; the controller fences it and moves leadership.
        wait_until(lambda: cluster3.leader(topic, 0) not in (victim, -1), 90, 0.5,
                   "leadership did not move off the paused broker", retry_on=(Exception,))
        # the clock probe says a fenced broker was not measured, and measures the others; at
        # most one 15 s try for it (it once waited 15 s a try, 4 minutes after a hunt's run)
        started = time.monotonic()
        clocks = measure_broker_clocks(cluster3, samples=3)
        assert time.monotonic() - started < 25 and clocks["not_measured"] == [victim], clocks
        assert sorted(clocks["brokers"]) == sorted(str(n.node_id) for n in cluster3.brokers if n.node_id != victim), clocks
    finally:
        node.resume()
    assert node.info().state == "running"
    cluster3.wait_healthy(90)


def test_role_lookups_agree_with_the_brokers(cluster3):
    # Group coordinator: our hash-based answer vs. FindCoordinator as reported by DescribeGroups.
    group = f"g-{uuid.uuid4().hex[:6]}"
    topic = f"roles-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 3, 3)
    consumer = Consumer(quiet({**cluster3.client_config(), "group.id": group, "auto.offset.reset": "earliest"}))
    consumer.subscribe([topic])
    try:
        wait_until(lambda: consumer.assignment() or consumer.poll(0.5) or consumer.assignment(), 60, 0.1, "no assignment")
        desc = cluster3.admin().describe_consumer_groups([group])[group].result(timeout=30)
        assert desc.coordinator.id == cluster3.group_coordinator(group)
    finally:
        consumer.close()

    # Transaction coordinator: ours vs. TransactionsCommand describe (CoordinatorId column).
    txid = f"tx-{uuid.uuid4().hex[:6]}"
    producer = Producer(quiet({**cluster3.client_config(), "transactional.id": txid}))
    producer.init_transactions(60)
    out = run_tool("transactions", ["--bootstrap-server", cluster3.bootstrap_servers, "describe",
                                    "--transactional-id", txid], cluster3.kafka_version).stdout
    header, row = [line.split() for line in out.strip().splitlines()[:2]]
    assert int(row[header.index("CoordinatorId")]) == cluster3.transaction_coordinator(txid)

    # Active controller: quorum-state files vs. MetadataQuorumCommand (DescribeQuorum).
    assert cluster3.active_controller() == describe_quorum_leader(cluster3)

    # Partition leader as listed by metadata is one of the replicas and in the ISR.
    leader = cluster3.leader(topic, 1)
    assert leader in cluster3.replicas(topic, 1) and leader in cluster3.isr(topic, 1)


def test_transactions_queries_in_one_jvm_answer_as_each_in_its_own(cluster3):
    """The KIP-664 queries kchaos asks after every run come from one JVM (clusters/java/): each
    answers as TransactionsCommand alone does, a refused one included, and an open transaction
    shows in both."""
    producer, topic, txid = open_transaction(cluster3)
    try:
        server = ["--bootstrap-server", cluster3.bootstrap_servers]
        argvs = [[*server, "list"], [*server, "describe-producers", "--topic", topic, "--partition", "0"],
                 [*server, "describe", "--transactional-id", f"{txid}-never-used"],
                 [*server, "find-hanging", "--broker-id", str(cluster3.leader(topic, 0))]]
        batch, how = run_transactions_batch(argvs, cluster3.kafka_version)
        alone = [run_tool("transactions", argv, cluster3.kafka_version, check=False) for argv in argvs]
        assert how == "one JVM"
        assert [r.returncode for r in batch] == [r.returncode for r in alone] == [0, 0, 1, 0], [r.stderr for r in batch]
        assert java_error_summary(batch[2].stdout + batch[2].stderr) == java_error_summary(alone[2].stdout + alone[2].stderr)
        assert "could not be found" in java_error_summary(batch[2].stdout + batch[2].stderr)
        for mine, theirs in zip(batch, alone):
            if mine.returncode == 0:
                assert parse_tool_table(mine.stdout) == parse_tool_table(theirs.stdout) or mine.stdout == theirs.stdout
        listed = {row["TransactionalId"]: row for row in parse_tool_table(batch[0].stdout)}
        assert listed[txid]["TransactionState"] == "Ongoing"
        assert [row["ProducerId"] for row in parse_tool_table(batch[1].stdout)] == [listed[txid]["ProducerId"]]
        state = broker_transaction_state(cluster3, [1, 2, 3])
        assert state["queried_with"] == "one JVM" and state["list_error"] is None and state["hanging_errors"] == {}
        assert txid in {row["TransactionalId"] for row in state["transactions"]}
    finally:
        producer.abort_transaction(60)


def test_share_coordinator_lookup_names_the_leader_that_holds_the_state(cluster3, tmp_path):
    """A share group stores state; each share-partition's state records sit in the
    __share_group_state partition whose leader the look-up names."""
    import pyarrow.parquet as pq
    from confluent_kafka import ShareConsumer
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    from kchaos.protocol.share_state import decode_share_state_record
    from kchaos.workloads.dump import dump_topic

    topic, group = f"share-{uuid.uuid4().hex[:6]}", f"sg-{uuid.uuid4().hex[:6]}"
    create_topic(cluster3, topic, 2, 3)
    topic_id = cluster3.topic_id(topic)
    assert len(topic_id) == 22  # the share-partition key uses the topic id
    admin = cluster3.admin()
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([resource])[resource].result(30)
    producer = Producer(quiet(cluster3.client_config()))
    for i in range(10):
        producer.produce(topic, value=b"v", partition=i % 2)
    producer.flush(30)
    consumer = ShareConsumer(quiet({**cluster3.client_config(), "group.id": group}))
    consumer.subscribe([topic])
    seen, deadline = 0, time.monotonic() + 60
    while seen < 10 and time.monotonic() < deadline:
        seen += sum(1 for m in consumer.poll(2) if m.error() is None)
    consumer.close()  # implicit mode: close acknowledges
    assert seen == 10
    dump_topic(cluster3.client_config(), admin, "__share_group_state", "raw", tmp_path)
    holders: dict[int, int] = {}
    for r in pq.read_table(tmp_path / "__share_group_state.raw.parquet").to_pylist():
        rec = decode_share_state_record(r["key"], r["value"])
        if rec is not None and rec.group == group:
            holders[rec.partition] = r["partition"]
    assert sorted(holders) == [0, 1]
    state_partitions = len(cluster3.partition_metadata("__share_group_state"))
    computed = {p: coordinator_partition(f"{group}:{topic_id}:{p}", state_partitions) for p in (0, 1)}
    assert computed == holders
    # leadership of the state partitions may move between two metadata reads (preferred-leader
    # election after earlier kills); the look-up must agree with a read taken around it
    wait_until(lambda: cluster3.share_coordinators(group, topic)
               == {p: cluster3.leader("__share_group_state", holders[p]) for p in (0, 1)},
               30, 1, "share-coordinator look-up disagrees with the leaders of the state partitions")


def test_features_show_the_release_default_transaction_version(cluster3):
    features = describe_features(cluster3)
    assert features["transaction.version"] == 2


def test_transaction_version_chosen_at_format(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    cluster = start_local(tmp_path / "cluster", nodes=1, transaction_version=1)
    try:
        assert describe_features(cluster)["transaction.version"] == 1
        assert run_smoke(cluster, records=50, batch=10).ok
    finally:
        cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == []
    # the format tool logs into the node's directory, not a "${sys:kafka.logs.dir}" in the user's
    assert list(cwd.iterdir()) == []


def test_dedicated_controller_mode(tmp_path):
    cluster = start_local(tmp_path, nodes=2, dedicated_controllers=1)
    try:
        roles = {n.node_id: sorted(r.value for r in n.roles) for n in cluster.nodes}
        assert roles == {1: ["controller"], 2: ["broker"], 3: ["broker"]}
        assert cluster.active_controller() == 1
        assert len(cluster.brokers) == 2 and run_smoke(cluster, records=50, batch=10).ok
    finally:
        cluster.stop()
    assert processes_with_marker(str(cluster.work_dir)) == []


def test_invalid_broker_config_fails_before_any_broker_starts(tmp_path):
    from kchaos.clusters import ClusterSpec
    from kchaos.clusters.local import LocalJvmCluster
    from kchaos.errors import ClusterError

    cluster = LocalJvmCluster(ClusterSpec.load({"nodes": 1, "broker": {"num.io.threads": "zero"}}), tmp_path)
    with pytest.raises(ClusterError) as err:
        cluster.start()
    message = str(err.value)
    assert "node 1 could not be formatted" in message and "num.io.threads" in message, message
    assert "\n" not in message  # one line; the stack trace is in .detail
    assert processes_with_marker(str(tmp_path.resolve())) == []


def test_broker_that_dies_during_start_fails_fast_and_leaves_nothing(tmp_path):
    from kchaos.clusters import ClusterSpec
    from kchaos.clusters.local import LocalJvmCluster
    from kchaos.errors import ClusterError

    # Valid for the config parser (so format succeeds), fatal when the broker loads the class.
    cluster = LocalJvmCluster(ClusterSpec.load({"nodes": 1, "ready_timeout_s": 90,
                                                "broker": {"authorizer.class.name": "no.such.Authorizer"}}), tmp_path)
    started = time.monotonic()
    with pytest.raises(ClusterError) as err:
        cluster.start()
    assert "node 1 exited during start-up" in str(err.value)
    assert "no.such.Authorizer" in err.value.detail  # the log tail comes with the error
    assert time.monotonic() - started < 60, "a dead node must fail the start at once, not at the timeout"
    assert processes_with_marker(str(tmp_path.resolve())) == []
