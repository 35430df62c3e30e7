"""Each fault kind, observed on a real cluster: the effect it must have, then health after heal."""

from __future__ import annotations

import statistics
import time
import uuid
from types import SimpleNamespace

import pytest
from confluent_kafka import Producer

from kchaos.faults.base import FaultContext
from kchaos.faults.kinds import make_fault
from kchaos.faults.schedule import ScheduledFault
from kchaos.clusters.clients import create_topic, quiet
from kchaos.clusters.proxy.links import proxy_name_client
from kchaos.waiting import wait_until
from kchaos.workloads.spec import WorkloadSpec



def _fault(kind, target, ctx, seed=1, params=None, hold=3.0):
    return make_fault(ScheduledFault(0, 0.0, kind, target, hold, seed, params or {}), ctx)


def _fake_workload(cluster, tag):
    """What role targets need from a workload: topics, group and transactional ids (no processes)."""
    spec = WorkloadSpec(input_topic=f"in-{tag}", output_topics=(f"out-{tag}",), group_id=f"g-{tag}", workers=2,
                        input_partitions=3)
    create_topic(cluster, spec.input_topic, 3, 3)
    create_topic(cluster, spec.output_topics[0], 3, 3)
    return SimpleNamespace(spec=spec, txid_prefix=f"tx-{tag}", pool=None)


def _use_group(cluster, workload):
    """Commit an offset for the workload's group, so that its coordinator exists."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(quiet({**cluster.client_config(), "group.id": workload.spec.group_id}))
    consumer.commit(offsets=[TopicPartition(workload.spec.input_topic, 0, 0)], asynchronous=False)
    consumer.close()


def _init_txids(cluster, txids):
    for txid in txids:
        Producer(quiet({**cluster.client_config(), "transactional.id": txid})).init_transactions(60)


def test_killing_the_transaction_coordinator_moves_it(cluster3):
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    _init_txids(cluster3, ctx.transactional_ids())
    fault = _fault("kill", "txn-coordinator", ctx)
    target = fault.invoke()
    txid = target["detail"]["transactional_id"]
    old = target["nodes"][0]
    assert target["role"] == "transaction coordinator" and not cluster3.node(old).is_running
    try:
        moved = wait_until(lambda: (lambda c: c if c not in (old, -1) else None)(cluster3.transaction_coordinator(txid)),
                           60, 0.5, "the transaction coordinator did not move off the killed broker",
                           retry_on=(Exception,))
        assert moved != old
    finally:
        fault.heal()
    assert cluster3.node(old).is_running
    cluster3.wait_healthy(120)


def test_killing_the_group_coordinator_and_the_controller(cluster3):
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    _use_group(cluster3, ctx.workload)
    for target, lookup in (("group-coordinator", lambda: cluster3.group_coordinator(ctx.workload.spec.group_id)),
                           ("controller", cluster3.active_controller)):
        before = lookup()
        fault = _fault("kill", target, ctx)
        resolved = fault.invoke()
        assert resolved["nodes"] == [before]
        try:
            wait_until(lambda: lookup() not in (before, -1), 60, 0.5, f"{target} did not move", retry_on=(Exception,))
        finally:
            fault.heal()
        cluster3.wait_healthy(120)


def test_isolating_a_leader_stops_replication_and_moves_leadership(cluster3):
    tag = uuid.uuid4().hex[:6]
    ctx = FaultContext(cluster3, _fake_workload(cluster3, tag))
    topic = ctx.workload.spec.output_topics[0]
    # A leader that is not also the quorum leader: isolating the active controller is a different
    # scenario (a quorum election first; see docs/faults.md, "Open findings").
    import random

    from kchaos.faults.base import resolve_node_target

    controller = cluster3.active_controller()
    seed = next(s for s in range(100)
                if resolve_node_target(ctx, "leader-output", random.Random(s))["nodes"][0] != controller)
    # clients = "cut": the isolated node still answers clients with its own stale view (it believes
    # it leads), so its client link goes down too and the clients (a fresh admin client here) read
    # the majority's view
    fault = _fault("partition", "isolate-leader-output", ctx, seed=seed, hold=0, params={"clients": "cut"})
    target = fault.invoke()
    p, leader = target["detail"]["partition"], target["nodes"][0]
    assert any(name.startswith("repl-") for name in target["detail"]["links_cut"])
    assert any(name.startswith("quorum-") for name in target["detail"]["links_cut"])
    assert target["detail"]["client_proxies_down"] == [f"client-n{leader}"]
    assert cluster3.toxiproxy.proxy(f"client-n{leader}").enabled is False
    cluster3._close_admin()

    def moved() -> bool:
        md = cluster3.partition_metadata(topic)[p]
        return md.leader not in (leader, -1) and leader not in md.isrs

    try:
        # cut from the controller quorum it is fenced: it leaves the ISR and leadership moves
        wait_until(moved, 90, 0.5, f"isolated leader {leader} kept leadership or stayed in the ISR",
                   retry_on=(Exception,))
    finally:
        fault.heal()
        cluster3._close_admin()
    assert cluster3.toxiproxy.proxy(f"client-n{leader}").enabled is True  # the heal gives the clients back
    wait_until(lambda: leader in cluster3.isr(topic, p), 120, 1.0, "the healed node did not rejoin the ISR",
               retry_on=(Exception,))
    cluster3.wait_healthy(120)


def test_isolating_the_active_controller_lets_the_others_elect_and_fence_it(cluster3):
    """The quorum cut for real: the two voters left elect a new controller, which fences the
    isolated broker. (Before each follower had its own advertised controller listener, their
    Raft fetches went to the leader's own port, around the cut proxies: the isolated controller
    kept its quorum and fenced the two others instead.)"""
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    fault = _fault("partition", "isolate-controller", ctx, seed=3, hold=0, params={"clients": "cut"})
    target = fault.invoke()
    before = target["nodes"][0]  # the quorum leader when the fault resolved its target
    assert any(name.startswith("quorum-") for name in target["detail"]["links_cut"])
    cluster3._close_admin()

    def elected() -> bool:
        now = cluster3.active_controller()
        return now is not None and now != before

    def fenced() -> bool:
        return cluster3.unregistered_brokers() == [before]  # and the two others are not

    try:
        wait_until(elected, 60, 0.5, f"no new controller while {before} was cut from the quorum", retry_on=(Exception,))
        wait_until(fenced, 60, 0.5, f"the isolated broker {before} was not fenced", retry_on=(Exception,))
    finally:
        fault.heal()
        cluster3._close_admin()
    cluster3.wait_healthy(120)


def test_an_isolation_that_spares_the_controller_cuts_another_leader(cluster3):
    """spare_controller: the output leader isolated is never the active controller while another
    node leads an output partition, whatever the seed; the target records the controller spared."""
    import random

    from kchaos.faults.base import resolve_node_target

    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    controller = cluster3.active_controller()
    leaders = {md.leader for t in ctx.workload.spec.output_topics for md in cluster3.partition_metadata(t).values()}
    assert leaders - {controller}, leaders  # three nodes lead the outputs' partitions: another one is there
    chosen = {resolve_node_target(ctx, "leader-output", random.Random(seed), avoid={controller})["nodes"][0]
              for seed in range(20)}
    assert controller not in chosen and chosen, (controller, chosen)
    fault = _fault("partition", "isolate-leader-output", ctx, seed=5, hold=0, params={"spare_controller": True})
    try:
        target = fault.invoke()
        assert target["nodes"][0] != controller
        assert target["detail"]["active_controller"] == controller and target["detail"]["controller_spared"] is True
    finally:
        fault.heal()
        cluster3._close_admin()
    cluster3.wait_healthy(120)


def _log_bytes(cluster, node_id, topic, partition):
    return sum(f.stat().st_size for f in (cluster.node(node_id).data_dir / f"{topic}-{partition}").glob("*.log"))


def test_kill_isolated_leaves_a_tail_no_follower_fetched_then_restarts_the_node(cluster3):
    """kill-isolated: records a leader acknowledged (acks=1) while cut from the others are on its
    disk and on no follower's when it is killed; the links are up again at once; heal starts it."""
    import threading

    tag = uuid.uuid4().hex[:6]
    ctx = FaultContext(cluster3, _fake_workload(cluster3, tag))
    topic = ctx.workload.spec.output_topics[0]
    fault = _fault("kill-isolated", "leader-output", ctx, params={"isolate_s": 3.0}, hold=0)
    leader_of = {p: md.leader for p, md in cluster3.partition_metadata(topic).items()}
    acked: list[int] = []
    producer = Producer(quiet({**cluster3.client_config(), "acks": 1, "linger.ms": 0}))
    for p in leader_of:  # connected and with metadata before the cut, so the writes below are quick
        producer.produce(topic, value=b"warm", partition=p)
    assert producer.flush(30) == 0

    def produce_while_cut():
        time.sleep(0.5)  # inside the 3 s isolation: the leader appends, no follower fetches
        for p in leader_of:
            producer.produce(topic, value=b"tail", partition=p,
                             on_delivery=lambda err, msg: acked.append(msg.partition()) if err is None else None)
        producer.flush(2.0)

    writer = threading.Thread(target=produce_while_cut, daemon=True)
    writer.start()
    target = fault.invoke()
    writer.join(10)
    leader = target["nodes"][0]
    try:
        assert not cluster3.node(leader).is_running
        assert any(n.startswith("repl-") for n in target["detail"]["links_cut"])
        # the links are up again; only the dead broker's client port stays closed, as its process is
        # (client_port_follows: a proxy that accepts and drops would fail some clients at once)
        down = {name for name, proxy in cluster3.toxiproxy.proxies().items() if not proxy.enabled}
        assert down <= {proxy_name_client(leader)}, f"links not healed: {sorted(down)}"
        own = [p for p in set(acked) if leader_of[p] == leader]
        assert own, f"no record acknowledged by the isolated leader {leader} (acked on {sorted(set(acked))})"
        followers = [n.node_id for n in cluster3.brokers if n.node_id != leader]
        for p in own:
            assert all(_log_bytes(cluster3, leader, topic, p) > _log_bytes(cluster3, f, topic, p) for f in followers)
    finally:
        fault.heal()
    assert cluster3.node(leader).is_running
    cluster3.wait_healthy(120)


def _produce_latency_ms(cluster, topic, n=15):
    producer = Producer(quiet({**cluster.client_config(), "acks": "all", "linger.ms": 0}))
    samples = []
    for i in range(n):
        started = time.monotonic()
        producer.produce(topic, value=b"x", partition=0)
        producer.flush(30)
        samples.append((time.monotonic() - started) * 1000)
    return statistics.median(samples)


def test_latency_raises_produce_latency_and_heal_removes_it(cluster3):
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    topic = ctx.workload.spec.input_topic
    before = _produce_latency_ms(cluster3, topic)
    fault = _fault("latency", "all-clients", ctx, params={"latency_ms": 300, "jitter_ms": 0})
    target = fault.invoke()
    assert target["detail"]["toxic"]["type"] == "latency"
    try:
        during = _produce_latency_ms(cluster3, topic, n=5)
    finally:
        fault.heal()
    after = _produce_latency_ms(cluster3, topic)
    assert during >= before + 250, (before, during)
    assert after < during / 2, (during, after)


@pytest.mark.parametrize("kind", ["client-link-down", "timeout", "reset-peer", "bandwidth", "slicer"])
def test_client_link_toxics_apply_and_heal(cluster3, kind):
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    fault = _fault(kind, "random", ctx)
    target = fault.invoke()
    name = f"client-n{target['nodes'][0]}"
    try:
        proxy = cluster3.toxiproxy.proxy(name)
        if kind == "client-link-down":
            assert proxy.enabled is False
        else:
            assert len(proxy.toxics) == 1 and proxy.toxics[0].type == kind.replace("-", "_")
    finally:
        fault.heal()
    proxy = cluster3.toxiproxy.proxy(name)
    assert proxy.enabled and proxy.toxics == ()


def test_pause_terminate_and_majority_partition_heal_to_a_healthy_cluster(cluster3):
    ctx = FaultContext(cluster3, _fake_workload(cluster3, uuid.uuid4().hex[:6]))
    for kind, target in (("pause", "random"), ("terminate", "leader-input"), ("partition", "majority-minority"),
                         ("partition", "ring"), ("partition", "controller-quorum")):
        fault = _fault(kind, target, ctx, seed=7)
        resolved = fault.invoke()
        try:
            assert resolved["nodes"], (kind, target, resolved)
            if kind == "pause":
                assert cluster3.node(resolved["nodes"][0]).is_paused
            if kind == "terminate":
                assert not cluster3.node(resolved["nodes"][0]).is_running
            time.sleep(0.5)  # held briefly: what is checked is that heal() brings the cluster back
        finally:
            fault.heal()
        started = time.monotonic()
        cluster3.wait_healthy(120)
        assert time.monotonic() - started < 120


def test_rolling_restart_restarts_every_node(cluster3):
    # the shared cluster (a cluster of its own cost 15 s more in CI): every node back and healthy
    # is what the next test needs anyway
    pids = {n.node_id: n.pid for n in cluster3.nodes}
    _fault("rolling-restart", "all", FaultContext(cluster3)).invoke()
    assert all(n.pid != pids[n.node_id] and n.is_running for n in cluster3.nodes)
    cluster3.wait_healthy(60)
