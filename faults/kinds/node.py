"""Node faults: a node holding a role is killed, stopped, paused or restarted; or every node
restarts in turn."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from kchaos.clusters.base import Capability
from kchaos.faults.base import NODE_TARGETS, Fault, resolve_node_target, start_if_stopped
from kchaos.faults.kinds import RESTARTS_BROKER, STOPS_BROKER, FaultKind, NoParams, register


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
            if kind == "pause":
                self.ctx.cluster.node(nid).resume()
            elif kind in ("kill", "terminate"):
                start_if_stopped(self.ctx.cluster, nid)
        return {"nodes": self.target.get("nodes", [])}


class IsolatedKillParams(NoParams):
    isolate_s: float = Field(3.0, gt=0, le=30, description=(
        "seconds the node is cut from every other node before it is killed; its clients still reach it, so it "
        "appends what they ask (a transaction's PrepareCommit) that no follower fetches"))

    @classmethod
    def extra_capabilities(cls, params: dict[str, Any]) -> tuple[Capability, ...]:
        return (Capability.PARTITION,)


class IsolatedKill(Fault):
    """A leader's crash with a tail its followers never fetched: the node holding the role is cut
    from every other node (replication and quorum; its clients still reach it) for ``isolate_s``,
    then SIGKILLed while still cut, then the links are healed; the heal starts it again. Killed
    before the controller's session timeout, it comes back as the leader of what it led, with
    its log end above the high watermark, until its registration is accepted (F8 and F6 in
    docs/findings.md). Interrupted while cut, it heals the links and leaves the node running."""

    def invoke(self) -> dict[str, Any]:
        cluster = self.ctx.cluster
        cluster.require(Capability.KILL)
        cluster.require(Capability.PARTITION)
        resolved = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        node = resolved["nodes"][0]
        cut = cluster.network.isolate(node)  # type: ignore[attr-defined]
        self.target = {**resolved, "nodes": [node],
                       "role": f"{resolved['role']}, isolated {self.params.isolate_s:g}s then killed",
                       "detail": {**resolved["detail"], "links_cut": cut}}
        try:
            time.sleep(float(self.params.isolate_s))  # the fault's own duration, as a hold's
            cluster.node(node).kill()  # before the links heal: no follower fetches the tail
        finally:
            cluster.network.heal()  # type: ignore[attr-defined]
        return self.target

    def heal(self) -> dict[str, Any]:
        if self.healed:
            return {}
        self.healed = True
        for nid in self.target.get("nodes", []):
            start_if_stopped(self.ctx.cluster, nid)
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


register(
    FaultKind("kill", "SIGKILL the target node(s); heal restarts them", Capability.KILL, NODE_TARGETS, NodeFault,
              evidence=frozenset({RESTARTS_BROKER}), aimed_at_work=True),
    FaultKind("terminate", "graceful stop; heal restarts", Capability.TERMINATE, NODE_TARGETS, NodeFault,
              evidence=frozenset({RESTARTS_BROKER}), aimed_at_work=True),
    FaultKind("pause", "SIGSTOP; heal sends SIGCONT", Capability.PAUSE, NODE_TARGETS, NodeFault,
              evidence=frozenset({STOPS_BROKER}), aimed_at_work=True),
    FaultKind("restart", "graceful restart at once", Capability.RESTART,
              tuple(t for t in NODE_TARGETS if t != "minority"), NodeFault, evidence=frozenset({RESTARTS_BROKER})),
    FaultKind("kill-isolated", "cut the target node from every other node (its clients still reach it), then "
              "SIGKILL it while cut; heal restarts it", Capability.KILL, tuple(t for t in NODE_TARGETS if t != "minority"),
              IsolatedKill, IsolatedKillParams, evidence=frozenset({RESTARTS_BROKER}), aimed_at_work=True),
    FaultKind("rolling-restart", "restart every broker in turn, waiting for health between", Capability.RESTART,
              ("all",), RollingRestart),
)
