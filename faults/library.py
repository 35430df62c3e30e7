"""Faults: small objects with ``invoke`` (inject, return the resolved target) and ``heal``.

Targets are roles resolved at the moment of injection, from the brokers' own metadata: the
transaction coordinator of one of the workload's transactional.ids, the group coordinator of
its group, the active controller, the leader of an input or output partition, a random node or
a minority. The returned dict names the node ids *and* the role they held then, so that the
history and the report say "killed node 2 (transaction coordinator of kchaos-ab12-w0)".
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kchaos.clusters.base import Capability, Cluster
from kchaos.clusters.toxiproxy import Toxic
from kchaos.faults.schedule import ScheduledFault
from kchaos.faults.spec import MESSAGE_DEFAULTS, MESSAGE_KINDS
from kchaos.workloads.client_settings import WORKER_CLIENT_PREFIX
from kchaos.errors import ClusterError, ConfigError


@dataclass
class FaultContext:
    cluster: Cluster
    workload: Any = None  # workloads.ctp.CtpWorkload (input/output topics, group, txids, worker pool)

    def transactional_ids(self) -> list[str]:
        w = self.workload
        if w is None or not w.spec.transactional:
            return []
        if w.spec.transactional_id_strategy == "per-worker":
            return [f"{w.txid_prefix}-w{i}" for i in range(w.spec.workers)]
        return [f"{w.txid_prefix}-{w.spec.input_topic}-{p}" for p in range(w.spec.input_partitions)]


def resolve_node_target(ctx: FaultContext, target: str, rng: random.Random) -> dict[str, Any]:
    """Node ids for a role, looked up now. Returns ``{"nodes": [...], "role": ..., "detail": {...}}``."""
    cluster = ctx.cluster
    brokers = sorted(n.node_id for n in cluster.brokers)
    w = ctx.workload
    if target == "random":
        return {"nodes": [rng.choice(brokers)], "role": "random broker", "detail": {}}
    if target == "minority":
        nodes = sorted(n.node_id for n in cluster.nodes)
        return {"nodes": sorted(rng.sample(nodes, max(1, (len(nodes) - 1) // 2))), "role": "minority", "detail": {}}
    if target == "txn-coordinator":
        txids = ctx.transactional_ids()
        if not txids:
            raise ConfigError("target txn-coordinator needs a transactional workload")
        txid = rng.choice(txids)
        return {"nodes": [cluster.transaction_coordinator(txid)], "role": "transaction coordinator",
                "detail": {"transactional_id": txid}}
    if target == "group-coordinator":
        if w is None:
            raise ConfigError("target group-coordinator needs a workload")
        return {"nodes": [cluster.group_coordinator(w.spec.group_id)], "role": "group coordinator",
                "detail": {"group": w.spec.group_id}}
    if target == "share-coordinator":
        if w is None or w.spec.kind != "share":
            raise ConfigError("target share-coordinator needs a share workload (workload.kind = 'share')")
        partition = rng.choice(sorted(cluster.partition_metadata(w.spec.input_topic)))
        node = cluster.share_coordinator(w.spec.group_id, w.spec.input_topic, partition)
        return {"nodes": [node], "role": f"share coordinator of {w.spec.input_topic}-{partition}",
                "detail": {"group": w.spec.group_id, "topic": w.spec.input_topic, "partition": partition}}
    if target == "controller":
        return {"nodes": [cluster.active_controller()], "role": "active controller", "detail": {}}
    if target in ("leader-input", "leader-output"):
        if w is None:
            raise ConfigError(f"target {target} needs a workload")
        topic = w.spec.input_topic if target == "leader-input" else rng.choice(list(w.spec.output_topics))
        partitions = sorted(cluster.partition_metadata(topic))
        p = rng.choice(partitions)
        leader = cluster.leader(topic, p)
        if leader < 0:
            raise ClusterError(f"{topic}-{p} has no leader right now")
        return {"nodes": [leader], "role": f"leader of {topic}-{p}", "detail": {"topic": topic, "partition": p}}
    if target == "all":
        return {"nodes": brokers, "role": "every broker", "detail": {}}
    raise ConfigError(f"unknown node target {target!r}")


class Fault:
    """Base: a fault is invoked once and healed once (heal is idempotent). The capability each
    kind needs is declared once, in faults.spec.FAULT_KINDS, and checked when a campaign loads."""

    def __init__(self, scheduled: ScheduledFault, ctx: FaultContext):
        self.scheduled = scheduled
        self.ctx = ctx
        self.rng = random.Random(scheduled.seed)
        self.target: dict[str, Any] = {}
        self.healed = False

    @property
    def name(self) -> str:
        return f"{self.scheduled.kind}:{self.scheduled.target}"

    def invoke(self) -> dict[str, Any]:
        raise NotImplementedError

    def heal(self) -> dict[str, Any]:
        self.healed = True
        return {}


class NodeFault(Fault):
    """kill / terminate / pause / restart of the node(s) holding a role."""

    def invoke(self) -> dict[str, Any]:
        kind = self.scheduled.kind
        self.ctx.cluster.require({"kill": Capability.KILL, "terminate": Capability.TERMINATE,
                                  "pause": Capability.PAUSE, "restart": Capability.RESTART}[kind])
        self.target = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        for nid in self.target["nodes"]:
            node = self.ctx.cluster.node(nid)
            {"kill": node.kill, "terminate": node.terminate, "pause": node.pause, "restart": node.restart}[kind]()
        return self.target

    def heal(self) -> dict[str, Any]:
        if self.healed:
            return {}
        self.healed = True
        kind = self.scheduled.kind
        for nid in self.target.get("nodes", []):
            node = self.ctx.cluster.node(nid)
            if kind == "pause":
                node.resume()
            elif kind in ("kill", "terminate") and not getattr(node, "is_running", True):
                node.start()
        return {"nodes": self.target.get("nodes", [])}


class RollingRestart(Fault):
    def invoke(self) -> dict[str, Any]:
        self.ctx.cluster.require(Capability.RESTART)
        order = sorted(n.node_id for n in self.ctx.cluster.nodes)
        for nid in order:
            self.ctx.cluster.node(nid).restart()
            self.ctx.cluster.wait_healthy(180)
        self.target = {"nodes": order, "role": "every node in turn", "detail": {}}
        return self.target


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
        cluster.require(Capability.NETWORK)
        net = cluster.network  # type: ignore[attr-defined]
        target = self.scheduled.target
        nodes = sorted(n.node_id for n in cluster.nodes)
        if target.startswith("isolate-"):
            resolved = resolve_node_target(self.ctx, target.removeprefix("isolate-"), self.rng)
            node = resolved["nodes"][0]
            cut = net.isolate(node)
            self.target = {**resolved, "nodes": [node], "role": f"isolated {resolved['role']}", "detail": {
                **resolved["detail"], "links_cut": cut}}
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
            names = [n for n in net.links_between([controller], [x for x in nodes if x != controller])
                     if n.startswith("quorum-")]
            for name in names:
                net.client.set_enabled(name, False)
            self.target = {"nodes": [controller], "role": "active controller cut from the quorum",
                           "detail": {"links_cut": names}}
        else:
            raise ConfigError(f"unknown partition target {target!r}")
        return self.target



class ClientLinkFault(NetworkFault):
    """client-link-down and the Toxiproxy toxics on client links."""
    DEFAULTS = {"latency": {"latency_ms": 300, "jitter_ms": 100}, "timeout": {"timeout_ms": 0},
                "reset-peer": {"timeout_ms": 500}, "bandwidth": {"rate_kbps": 64},
                "slicer": {"average_size": 64, "delay_us": 1000}}

    def _toxic(self) -> Toxic:
        kind = self.scheduled.kind
        p = {**self.DEFAULTS.get(kind, {}), **self.scheduled.params}
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
            for name in proxies:
                net.client.set_enabled(name, False)
            detail = {"proxies": proxies}
        else:
            toxic = self._toxic()
            for name in proxies:
                net.client.add_toxic(name, toxic)
            detail = {"proxies": proxies, "toxic": toxic.to_json()}
        self.target = {**resolved, "detail": {**resolved["detail"], **detail}}
        return self.target



class ClientFault(Fault):
    """Faults of the workload's own processes (crash, pause, zombie, transactional.id takeover)."""

    def invoke(self) -> dict[str, Any]:
        pool = getattr(self.ctx.workload, "pool", None)
        if pool is None:
            raise ConfigError(f"fault {self.scheduled.kind} needs a running workload")
        slot = self.rng.choice(sorted(pool.slots))
        kind = self.scheduled.kind
        if kind == "worker-crash":
            detail = pool.crash(slot)
        elif kind == "worker-pause":
            detail = pool.suspend(slot)
        elif kind == "zombie":
            detail = pool.zombie(slot)
        else:
            detail = pool.takeover(slot)
        self.target = {"nodes": [], "role": f"worker {slot}", "detail": detail}
        return self.target

    def heal(self) -> dict[str, Any]:
        if not self.healed and self.scheduled.kind == "worker-pause":
            self.ctx.workload.pool.resume_all()
        self.healed = True
        return {}


class MessageFault(Fault):
    """A message-proxy rule (clusters/message_proxy.py) on the requests some workers send to the
    broker holding a role. Invoke resolves the broker and the workers now and adds the rule;
    heal removes it, which releases what it holds and returns every request it affected (API,
    correlation id, producer id and epoch, the broker's answer): they go into the history with
    the fault's completion, and into ``cluster/messages/events.jsonl`` as they happen."""

    def invoke(self) -> dict[str, Any]:
        cluster = self.ctx.cluster
        cluster.require(Capability.MESSAGES)
        params = {**MESSAGE_DEFAULTS, **self.scheduled.params}
        if self.scheduled.target == "all":
            resolved = {"nodes": sorted(n.node_id for n in cluster.brokers), "role": "every broker", "detail": {}}
        else:
            resolved = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        worker = params["worker"]
        if worker == "random":
            pool = getattr(self.ctx.workload, "pool", None)
            slots = sorted(pool.slots) if pool is not None else []
            if not slots:
                raise ConfigError("worker = 'random' needs a running workload")
            worker = self.rng.choice(slots)
        elif worker != "all":
            worker = f"w{int(worker)}"
        prefix = WORKER_CLIENT_PREFIX if worker == "all" else f"kchaos-{worker}-"
        rule = {"id": f"kchaos-fault-{self.scheduled.index}", "kind": MESSAGE_KINDS[self.scheduled.kind],
                "apis": list(params["apis"]), "nodes": resolved["nodes"], "client_prefix": prefix,
                "count": int(params["count"]), "delay_ms": int(params["delay_ms"]),
                "release_after_ms": int(params["release_after_ms"]),
                "duplicate_after_ms": int(params["duplicate_after_ms"]), "error": params["error"]}
        cluster.messages.add_rule(rule)  # type: ignore[attr-defined]
        to = "every broker" if self.scheduled.target == "all" else f"the {resolved['role']}"
        self.target = {**resolved, "role": f"{', '.join(rule['apis'])} of {'every worker' if worker == 'all' else worker} "
                                           f"to {to}",
                       "detail": {**resolved["detail"], "rule": rule}}
        return self.target

    def heal(self) -> dict[str, Any]:
        if self.healed or not self.target:
            self.healed = True
            return {}
        self.healed = True
        events = self.ctx.cluster.messages.remove_rule(self.target["detail"]["rule"]["id"])  # type: ignore[attr-defined]
        return {"messages": events}


def make_fault(scheduled: ScheduledFault, ctx: FaultContext) -> Fault:
    kind = scheduled.kind
    if kind in ("kill", "terminate", "pause", "restart"):
        return NodeFault(scheduled, ctx)
    if kind == "rolling-restart":
        return RollingRestart(scheduled, ctx)
    if kind == "partition":
        return PartitionFault(scheduled, ctx)
    if kind in ("client-link-down", "latency", "timeout", "reset-peer", "bandwidth", "slicer"):
        return ClientLinkFault(scheduled, ctx)
    if kind in ("worker-crash", "worker-pause", "zombie", "txid-takeover"):
        return ClientFault(scheduled, ctx)
    if kind in MESSAGE_KINDS:
        return MessageFault(scheduled, ctx)
    raise ConfigError(f"unknown fault kind {kind!r}")
