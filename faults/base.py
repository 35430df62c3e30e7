"""What every fault is made of: the context it acts in, the roles it aims at, resolved from the
brokers' own metadata at the moment of injection, and the invoke/heal contract.

Targets are roles: the transaction coordinator of one of the workload's transactional.ids, the
group coordinator of its group, the active controller, the leader of an input or output
partition, a random node or a minority. The resolved target names the node ids *and* the role
they held then, so the history and the report say "killed node 2 (transaction coordinator of
kchaos-ab12-w0)". The kinds themselves are in faults/kinds/, one module per family.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from kchaos.clusters.base import Cluster
from kchaos.errors import ClusterError, ConfigError
from kchaos.faults.protocols import FaultWorkload
from kchaos.faults.scheduled import ScheduledFault

#: the roles a node fault can aim at
NODE_TARGETS = ("random", "share-coordinator", "minority", "txn-coordinator", "group-coordinator", "controller",
                "leader-input", "leader-output")

#: what each target means, resolved when the fault is injected (``kchaos list targets``)
TARGETS = {
    "random": "a random broker (seeded)",
    "minority": "a random minority of the nodes",
    "all": "every broker",
    "txn-coordinator": "the transaction coordinator of one of the workload's transactional ids",
    "group-coordinator": "the group coordinator of the workload's consumer group",
    "share-coordinator": "the share coordinator of one of the input partitions (share workloads)",
    "controller": "the active KRaft controller",
    "leader-input": "the leader of one of the input topic's partitions",
    "leader-output": "the leader of one of the output topics' partitions",
    "all-clients": "every broker's client link",
    "random-worker": "one of the workload's worker processes (seeded)",
    "majority-minority": "the nodes split in a majority and a minority",
    "ring": "each node cut from its non-neighbours (three nodes: a bridge)",
    "controller-quorum": "the active controller cut from the rest of the quorum",
    **{f"isolate-{role}": f"{what}, cut from every other node"
       for role, what in (("random", "a random broker"), ("txn-coordinator", "the transaction coordinator"),
                          ("group-coordinator", "the group coordinator"), ("share-coordinator", "a share coordinator"),
                          ("controller", "the active controller"), ("leader-input", "an input partition's leader"),
                          ("leader-output", "an output partition's leader"))},
}


@dataclass(frozen=True)
class Aim:
    """Work in flight a fault is aimed at (faults/pacing.py): the operation under way, its process
    and transactional id, and the node that coordinates it, resolved before the fault so that it
    acts within milliseconds of seeing the operation."""

    f: str
    process: str
    txid: str | None
    txn_seq: int | None
    node: int
    invoked: float
    seen: float

    def to_json(self) -> dict[str, Any]:
        return {"f": self.f, "process": self.process, "txid": self.txid, "txn_seq": self.txn_seq, "node": self.node,
                "seen_after_ms": round((self.seen - self.invoked) * 1000, 1)}


@dataclass
class FaultContext:
    cluster: Cluster
    workload: FaultWorkload | None = None  # the pipeline: its topics, group, transactional ids, workers
    #: the in-flight operation this fault is aimed at (pacing's aim), or None
    aim: Aim | None = None

    def transactional_ids(self) -> list[str]:
        w = self.workload
        if w is None or not w.spec.transactional:
            return []
        return w.spec.transactional_ids(w.txid_prefix)


def resolve_node_target(ctx: FaultContext, target: str, rng: random.Random,
                        remote_writer: bool = False, avoid: set[int] | frozenset[int] = frozenset()) -> dict[str, Any]:
    """Node ids for a role, looked up now. Returns ``{"nodes": [...], "role": ..., "detail": {...}}``.
    ``remote_writer`` (share-coordinator, for a fault on requests between brokers): prefer an
    input partition whose leader is another broker than its share coordinator, since a leader's
    state writes to itself cross no link. ``avoid`` (random and leader targets): prefer a node
    outside it when the role allows one; empty, the seeded choices are those of old runs."""
    cluster = ctx.cluster
    brokers = sorted(n.node_id for n in cluster.brokers)
    w = ctx.workload
    if target == "random":
        return {"nodes": [rng.choice([b for b in brokers if b not in avoid] or brokers)], "role": "random broker",
                "detail": {}}
    if target == "minority":
        nodes = sorted(n.node_id for n in cluster.nodes)
        return {"nodes": sorted(rng.sample(nodes, max(1, (len(nodes) - 1) // 2))), "role": "minority", "detail": {}}
    if target == "txn-coordinator":
        txids = ctx.transactional_ids()
        if not txids:
            raise ConfigError("target txn-coordinator needs a transactional workload")
        txid = rng.choice(txids)
        if ctx.aim is not None and ctx.aim.txid in txids:
            return {"nodes": [ctx.aim.node], "role": "transaction coordinator",
                    "detail": {"transactional_id": ctx.aim.txid, "aimed_at": ctx.aim.to_json()}}
        return {"nodes": [cluster.transaction_coordinator(txid)], "role": "transaction coordinator",
                "detail": {"transactional_id": txid}}
    if target == "group-coordinator":
        if w is None:
            raise ConfigError("target group-coordinator needs a workload")
        aimed = {"aimed_at": ctx.aim.to_json()} if ctx.aim is not None else {}
        return {"nodes": [ctx.aim.node if ctx.aim is not None else cluster.group_coordinator(w.spec.group_id)],
                "role": "group coordinator", "detail": {"group": w.spec.group_id, **aimed}}
    if target == "share-coordinator":
        if w is None or w.spec.kind != "share":
            raise ConfigError("target share-coordinator needs a share workload (workload.kind = 'share')")
        meta = cluster.partition_metadata(w.spec.input_topic)
        candidates = sorted(meta)
        if remote_writer:
            remote = [p for p in candidates
                      if int(meta[p].leader) != cluster.share_coordinator(w.spec.group_id, w.spec.input_topic, p)]
            candidates = remote or candidates
        partition = rng.choice(candidates)
        node = cluster.share_coordinator(w.spec.group_id, w.spec.input_topic, partition)
        return {"nodes": [node], "role": f"share coordinator of {w.spec.input_topic}-{partition}",
                "detail": {"group": w.spec.group_id, "topic": w.spec.input_topic, "partition": partition,
                           "leader": int(meta[partition].leader)}}
    if target == "controller":
        return {"nodes": [cluster.active_controller()], "role": "active controller", "detail": {}}
    if target in ("leader-input", "leader-output"):
        if w is None:
            raise ConfigError(f"target {target} needs a workload")
        if avoid:  # any partition of the role's topics led outside ``avoid`` (after kills one broker may lead a whole topic)
            topics = [w.spec.input_topic] if target == "leader-input" else list(w.spec.output_topics)
            led = [(t, q, int(m.leader)) for t in topics for q, m in sorted(cluster.partition_metadata(t).items())]
            spared = [(t, q) for t, q, leader in led if leader not in avoid]
            topic, p = rng.choice(spared or [(t, q) for t, q, _ in led])
        else:
            topic = w.spec.input_topic if target == "leader-input" else rng.choice(list(w.spec.output_topics))
            p = rng.choice(sorted(cluster.partition_metadata(topic)))
        leader = cluster.leader(topic, p)
        if leader < 0:
            raise ClusterError(f"{topic}-{p} has no leader right now")
        return {"nodes": [leader], "role": f"leader of {topic}-{p}", "detail": {"topic": topic, "partition": p}}
    if target == "all":
        return {"nodes": brokers, "role": "every broker", "detail": {}}
    raise ConfigError(f"unknown node target {target!r}")


def start_if_stopped(cluster: Cluster, node_id: int) -> bool:
    """Start a node a fault killed or stopped (the heal of every fault that kills); whether it
    had to be started."""
    node = cluster.node(node_id)
    if getattr(node, "is_running", True):
        return False
    node.start()
    return True


class Fault:
    """Base: a fault is invoked once and healed once (heal is idempotent). What a kind needs (its
    capability, targets, parameters) is declared with it, in its module under faults/kinds/, and
    checked when a campaign loads; ``params`` are its scheduled parameters, typed, defaults filled."""

    def __init__(self, scheduled: ScheduledFault, ctx: FaultContext, params: Any = None):
        self.scheduled = scheduled
        self.ctx = ctx
        self.params = params
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
