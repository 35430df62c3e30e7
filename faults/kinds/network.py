"""Network faults, through the proxies on every link: inter-node links cut (a partition), a
client link down, or a toxic (latency, a stalled link, resets, a bandwidth limit, slicing) on the
client links of the brokers holding a role."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from kchaos.clusters.base import Capability
from kchaos.clusters.proxy.toxiproxy import Toxic
from kchaos.errors import ConfigError
from kchaos.faults.base import Fault, resolve_node_target
from kchaos.faults.kinds import CUTS_BROKER_OFF, DELAYS_CLIENT_LINKS, ClusterNeeds, FaultKind, NoParams, register


#: the isolations whose role more than one node can hold, so the active controller can be spared
SPARES_CONTROLLER = ("isolate-random", "isolate-leader-input", "isolate-leader-output")


class Partition(NoParams):
    clients: Literal["reach", "cut"] = Field("reach", description=(
        "reach: the cut nodes' clients still reach them (an isolated leader goes on answering with "
        "its stale metadata); cut: their client links go down too, so the clients fail over to the "
        "rest of the cluster, as a node lost to a switch or a zone is"))
    spare_controller: bool = Field(False, description=(
        "isolate a node holding the role that is not the active controller, when one does (else the "
        "controller, recorded): a combined node's isolation that takes the controller with it spends "
        "the quorum's failover and then the broker's session timeout, about 20 s here, before anything "
        "moves (docs/faults.md, \"The controller's partition\"); isolate-controller aims at that"))

    @classmethod
    def target_problem(cls, target: str, params: dict[str, Any]) -> str | None:
        if params.get("spare_controller") and target not in SPARES_CONTROLLER:
            return f"spare_controller needs a role several nodes hold: {', '.join(SPARES_CONTROLLER)}"
        return None


class Latency(NoParams):
    latency_ms: float = Field(300, ge=0)
    jitter_ms: float = Field(100, ge=0)


class Timeout(NoParams):
    timeout_ms: float = Field(0, ge=0, description="0: the link passes nothing until healed")


class ResetPeer(NoParams):
    timeout_ms: float = Field(500, ge=0)


class Bandwidth(NoParams):
    rate_kbps: float = Field(64, gt=0)


class Slicer(NoParams):
    average_size: float = Field(64, gt=0)
    delay_us: float = Field(1000, ge=0)


class NetworkFault(Fault):
    """A fault made of proxy changes; healing resets every proxy (faults run one at a time)."""

    def heal(self) -> dict[str, Any]:
        if not self.healed:
            self.ctx.cluster.network.heal()  # type: ignore[attr-defined]
        self.healed = True
        return {}


class PartitionFault(NetworkFault):

    def invoke(self) -> dict[str, Any]:
        cluster = self.ctx.cluster
        cluster.require(Capability.PARTITION)
        net = cluster.network  # type: ignore[attr-defined]
        target = self.scheduled.target
        nodes = sorted(n.node_id for n in cluster.nodes)
        if target.startswith("isolate-"):
            spared = {cluster.active_controller()} if self.params.spare_controller else set()
            resolved = resolve_node_target(self.ctx, target.removeprefix("isolate-"), self.rng, avoid=spared)
            node = resolved["nodes"][0]
            cut = net.isolate(node)
            self.target = {**resolved, "nodes": [node], "role": f"isolated {resolved['role']}", "detail": {
                **resolved["detail"], "links_cut": cut}}
            if spared:
                self.target["detail"]["active_controller"] = next(iter(spared))
                self.target["detail"]["controller_spared"] = node not in spared
        elif target == "majority-minority":
            minority = sorted(self.rng.sample(nodes, max(1, (len(nodes) - 1) // 2)))
            majority = [n for n in nodes if n not in minority]
            cut = net.partition(minority, majority)
            self.target = {"nodes": minority, "role": "minority side", "detail": {"minority": minority,
                                                                                 "majority": majority, "links_cut": cut}}
        elif target == "ring":
            order = nodes[:]
            self.rng.shuffle(order)
            if len(order) <= 3:
                # three nodes: a bridge — the ends cannot talk, both still reach the middle one
                a, bridge, b = (order + order)[:3]
                cut = net.partition([a], [b])
                self.target = {"nodes": [a, b], "role": "bridge", "detail": {"bridge": bridge, "links_cut": cut}}
            else:
                cut = []
                for i, a in enumerate(order):
                    for j, b in enumerate(order):
                        if i < j and abs(i - j) not in (1, len(order) - 1):
                            cut += net.partition([a], [b])
                self.target = {"nodes": order, "role": "ring", "detail": {"ring": order, "links_cut": cut}}
        elif target == "controller-quorum":
            controller = cluster.active_controller()
            names = net.cut([n for n in net.links_between([controller], [x for x in nodes if x != controller])
                             if n.startswith("quorum-")])
            self.target = {"nodes": [controller], "role": "active controller cut from the quorum",
                           "detail": {"links_cut": names}}
        else:
            raise ConfigError(f"unknown partition target {target!r}")
        if self.params.clients == "cut":
            cluster.require(Capability.NETWORK)
            proxies = net.cut_clients(list(self.target["nodes"]))
            self.target["detail"] = {**self.target["detail"], "client_proxies_down": proxies}
        return self.target


class ClientLinkFault(NetworkFault):
    """client-link-down and the Toxiproxy toxics on client links."""

    def _toxic(self) -> Toxic:
        kind = self.scheduled.kind
        p = self.params.model_dump()
        name = f"kchaos-{self.scheduled.index}"
        if kind == "latency":
            return Toxic("latency", {"latency": int(p["latency_ms"]), "jitter": int(p["jitter_ms"])}, name=name)
        if kind == "timeout":
            return Toxic("timeout", {"timeout": int(p["timeout_ms"])}, name=name)
        if kind == "reset-peer":
            return Toxic("reset_peer", {"timeout": int(p["timeout_ms"])}, name=name)
        if kind == "bandwidth":
            return Toxic("bandwidth", {"rate": int(p["rate_kbps"])}, name=name)
        return Toxic("slicer", {"average_size": int(p["average_size"]), "size_variation": int(p["average_size"]) // 2,
                                "delay": int(p["delay_us"])}, name=name)

    def invoke(self) -> dict[str, Any]:
        cluster = self.ctx.cluster
        cluster.require(Capability.NETWORK)
        net = cluster.network  # type: ignore[attr-defined]
        if self.scheduled.target == "all-clients":
            resolved = {"nodes": sorted(n.node_id for n in cluster.brokers), "role": "every client link", "detail": {}}
        else:
            resolved = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        proxies = [f"client-n{n}" for n in resolved["nodes"]]
        if self.scheduled.kind == "client-link-down":
            net.cut_clients(list(resolved["nodes"]))
            detail = {"proxies": proxies}
        else:
            toxic = self._toxic()
            for name in proxies:
                net.client.add_toxic(name, toxic)
            detail = {"proxies": proxies, "toxic": toxic.to_json()}
        self.target = {**resolved, "detail": {**resolved["detail"], **detail}}
        return self.target


CLIENT_TARGETS = ("random", "txn-coordinator", "group-coordinator", "leader-input", "leader-output")
#: a client link's fault on a cluster kchaos did not start goes through its front
CLIENT_LINK_NEEDS = ClusterNeeds(external={"front": True})
register(
    FaultKind("partition", "cut inter-node links (replication and quorum): pair proxies, or packet filters on the nodes",
              Capability.PARTITION,
              ("isolate-random", "isolate-txn-coordinator", "isolate-group-coordinator", "isolate-share-coordinator",
               "isolate-controller", "isolate-leader-input", "isolate-leader-output", "majority-minority", "ring",
               "controller-quorum"), PartitionFault, Partition, evidence=frozenset({CUTS_BROKER_OFF})),
    FaultKind("client-link-down", "disable the client proxy of the target broker", Capability.NETWORK,
              ("random", "share-coordinator", "txn-coordinator", "group-coordinator", "leader-input", "leader-output"),
              ClientLinkFault, needs=CLIENT_LINK_NEEDS),
    FaultKind("latency", "latency with jitter on client links", Capability.NETWORK, ("all-clients", *CLIENT_TARGETS),
              ClientLinkFault, Latency, needs=CLIENT_LINK_NEEDS, evidence=frozenset({DELAYS_CLIENT_LINKS})),
    FaultKind("timeout", "client link stops passing data; connections close after the timeout", Capability.NETWORK,
              CLIENT_TARGETS, ClientLinkFault, Timeout, needs=CLIENT_LINK_NEEDS),
    FaultKind("reset-peer", "client connections reset (TCP RST) after a delay", Capability.NETWORK, CLIENT_TARGETS,
              ClientLinkFault, ResetPeer, needs=CLIENT_LINK_NEEDS),
    FaultKind("bandwidth", "client link bandwidth limited (KB/s)", Capability.NETWORK,
              ("all-clients", "random", "txn-coordinator", "leader-input", "leader-output"), ClientLinkFault, Bandwidth, needs=CLIENT_LINK_NEEDS),
    FaultKind("slicer", "client traffic sliced into small delayed packets", Capability.NETWORK,
              ("all-clients", "random", "txn-coordinator", "leader-input", "leader-output"), ClientLinkFault, Slicer, needs=CLIENT_LINK_NEEDS),
)
