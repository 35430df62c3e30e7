"""Node faults: a node holding a role is killed, stopped, paused or restarted; or every node
restarts in turn."""

from __future__ import annotations

from typing import Any

from kchaos.clusters.base import Capability
from kchaos.faults.base import NODE_TARGETS, Fault, resolve_node_target
from kchaos.faults.kinds import FaultKind, register


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


register(
    FaultKind("kill", "SIGKILL the target node(s); heal restarts them", Capability.KILL, NODE_TARGETS, NodeFault),
    FaultKind("terminate", "graceful stop; heal restarts", Capability.TERMINATE, NODE_TARGETS, NodeFault),
    FaultKind("pause", "SIGSTOP; heal sends SIGCONT", Capability.PAUSE, NODE_TARGETS, NodeFault),
    FaultKind("restart", "graceful restart at once", Capability.RESTART,
              tuple(t for t in NODE_TARGETS if t != "minority"), NodeFault),
    FaultKind("rolling-restart", "restart every broker in turn, waiting for health between", Capability.RESTART,
              ("all",), RollingRestart),
)
