"""Pure parts of the local backend: ids, port plans, per-node properties (no JVM started)."""

import socket
from unittest import mock

import pytest

from kchaos.clusters import ClusterSpec
from kchaos.clusters.local import LocalJvmCluster
from kchaos.clusters.local.port_plan import PortPlan
from kchaos.clusters.node_config import new_cluster_id
from kchaos.errors import ConfigError
from kchaos.runtime.ports import allocate_ports


def test_cluster_ids_are_22_chars_and_never_start_with_a_dash():
    ids = [new_cluster_id() for _ in range(2000)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids)
    with mock.patch("kchaos.clusters.node_config.uuid.uuid4") as uuid4:
        # bytes whose base64 starts with '-' (0xf8 -> '-' in the URL-safe alphabet), then a normal one
        uuid4.side_effect = [mock.Mock(bytes=b"\xf8" + b"\x00" * 15), mock.Mock(bytes=b"\x00" * 16)]
        assert new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAA"


def test_allocated_ports_are_distinct_and_a_taken_base_port_is_refused():
    ports = allocate_ports(31, None)
    assert len(set(ports)) == 31
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ConfigError, match=f"port {port} is already in use"):
            allocate_ports(3, port)


def _planned(tmp_path, **spec):
    cluster = LocalJvmCluster(ClusterSpec.load(spec), tmp_path)
    cluster.ports = PortPlan.build(cluster.spec, cluster.broker_ids, cluster.controller_ids,
                                   [n.node_id for n in cluster.nodes])
    return cluster


def test_every_directed_link_has_its_own_proxy(tmp_path):
    cluster = _planned(tmp_path, nodes=3)
    names = {p.name for p in cluster.planned_proxies()}
    assert names == {f"client-n{i}" for i in (1, 2, 3)} \
        | {f"repl-n{i}-to-n{k}" for i in (1, 2, 3) for k in (1, 2, 3) if i != k} \
        | {f"quorum-n{i}-to-n{k}" for i in (1, 2, 3) for k in (1, 2, 3) if i != k}
    props = cluster.node(2).properties()
    ports = cluster.ports
    assert props["inter.broker.listener.name"] == "REPL2"
    # broker 2 advertises, for listener REPL1, the proxy that broker 1 goes through to reach it
    assert f"REPL1://127.0.0.1:{ports.proxy_repl['1>2']}" in props["advertised.listeners"]
    assert f"REPL2://127.0.0.1:{ports.repl['2>2']}" in props["advertised.listeners"]  # itself: direct
    assert f"CLIENT://127.0.0.1:{ports.proxy_client[2]}" in props["advertised.listeners"]
    voters = props["controller.quorum.voters"].split(",")
    assert voters == [f"1@127.0.0.1:{ports.proxy_quorum['2>1']}", f"2@127.0.0.1:{ports.controller[2]}",
                      f"3@127.0.0.1:{ports.proxy_quorum['2>3']}"]
    assert props["transaction.state.log.num.partitions"] == "3"
    assert PortPlan.from_json(ports.to_json()) == ports


def test_unproxied_cluster_advertises_direct_ports_and_has_no_network_capability(tmp_path):
    cluster = _planned(tmp_path, nodes=1, proxy_clients=False, proxy_internal=False)
    assert cluster.planned_proxies() == []
    assert "network" not in {c.value for c in cluster.capabilities}
    props = cluster.node(1).properties()
    assert f"CLIENT://127.0.0.1:{cluster.ports.client[1]}" in props["advertised.listeners"]


def test_dedicated_controllers_get_only_controller_listeners(tmp_path):
    cluster = _planned(tmp_path, nodes=2, dedicated_controllers=1)
    ctl = cluster.node(1).properties()
    assert ctl["process.roles"] == "controller"
    assert {l.split(":")[0] for l in ctl["listeners"].split(",")} == {"CTRL1", "CTRL2", "CTRL3"}
    assert "inter.broker.listener.name" not in ctl
    broker = cluster.node(3).properties()
    assert broker["process.roles"] == "broker" and broker["controller.listener.names"] == "CTRL3"
    assert "CTRL" not in broker["listeners"]


def test_a_raft_leader_tells_each_follower_the_address_of_its_own_proxy(tmp_path):
    """A Raft leader sends its followers its advertised controller endpoints (KIP-853), and each
    follower fetches from the endpoint of its own first controller listener name: node 2 must
    be told quorum-n2-to-n1, node 3 quorum-n3-to-n1, or its fetches bypass the proxy that a
    partition cuts (they did: an isolated controller kept its followers and fenced them)."""
    cluster = _planned(tmp_path, nodes=3)
    ports = cluster.ports
    leader = cluster.node(1).properties()
    advertised = leader["advertised.listeners"].split(",")
    assert f"CTRL2://127.0.0.1:{ports.proxy_quorum['2>1']}" in advertised
    assert f"CTRL3://127.0.0.1:{ports.proxy_quorum['3>1']}" in advertised
    assert f"CTRL1://127.0.0.1:{ports.controller[1]}" in advertised
    assert leader["controller.listener.names"].split(",")[0] == "CTRL1"
    for follower in (2, 3):
        names = cluster.node(follower).properties()["controller.listener.names"].split(",")
        assert names[0] == f"CTRL{follower}"
    # each quorum proxy forwards to the listener only its node is told about
    upstream = {p.name: p.upstream for p in cluster.planned_proxies()}
    assert upstream["quorum-n2-to-n1"] == f"127.0.0.1:{ports.controller_in['2>1']}"
    listeners = leader["listeners"].split(",")
    assert f"CTRL2://127.0.0.1:{ports.controller_in['2>1']}" in listeners
    assert len(set(ports.controller_in.values()) | set(ports.controller.values())) == 9


def _jar_set(tmp_path, version, with_tools):
    from kchaos.runtime.artifacts import JarSet

    directory = tmp_path / f"kafka-{version}"
    directory.mkdir()
    (directory / f"kafka_2.13-{version}.jar").touch()
    if with_tools:
        (directory / f"kafka-tools-{version}.jar").touch()
    return JarSet(f"kafka-{version}", directory)


@pytest.mark.parametrize("own_tools, registry, expected", [
    (True, ["4.3.1", "4.4.0"], "4.4.0"),  # the release's own tools
    (False, ["4.2.1", "4.3.1"], "4.3.1"),  # none yet (kafka-tools 4.4.0 until late 2026): the newest older
    (False, ["4.2.1", "4.3.1", "4.5.0"], "4.3.1"),  # never a newer release's
])
def test_admin_tools_are_the_release_s_own_or_the_newest_older_that_resolves(tmp_path, own_tools, registry, expected):
    from kchaos.runtime import artifacts

    sets = {v: _jar_set(tmp_path, v, with_tools=(v != "4.4.0" or own_tools)) for v in {"4.4.0", *registry}}
    with mock.patch.object(artifacts, "resolve_kafka", lambda v: sets[v]), \
            mock.patch.object(artifacts, "released_versions", lambda group, artifact: registry):
        jars, tools = artifacts.resolve_kafka_tools("4.4.0")
    assert tools == expected and jars is sets[expected]
