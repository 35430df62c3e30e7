"""Disk faults: a broker's log directory runs out of space while it runs.

``disk-full`` fills the target's log directory, a filesystem of its own of
``cluster.disk_limit_mb`` (kchaos/runtime/small_disk.py; set on load when a campaign has disk faults),
with one file, leaving ``leave_mb``. The broker meets ENOSPC on its next append and handles it as
Kafka does: the log directory goes offline, and a node whose only log directory failed (its
metadata log included, in combined mode) shuts itself down. Heal deletes the file and starts the
node again if it stopped. The fault records what it took and, at heal, whether the broker had
stopped and what its log said about the failed directory: the broker's own handling is the
effect to study.

A slow disk is not made here: it needs the device mapper's delay target, which this machine's
kernel does not have, or a FUSE layer kchaos does not have (docs/faults.md).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from kchaos.clusters.base import Capability
from kchaos.faults.base import NODE_TARGETS, Fault, resolve_node_target, start_if_stopped
from kchaos.faults.kinds import ClusterNeeds, FaultKind, NoParams, register

#: what the broker's log says when it takes a directory offline or stops for it
FAILED_DIR_MARKERS = ("No space left on device", "Stopping serving logs in dir", "Shutdown broker because all log dirs",
                      "Error while writing to checkpoint file", "KafkaStorageException")


class DiskFullParams(NoParams):
    leave_mb: float = Field(0, ge=0, le=1024, description="MB left free (0: none)")


class DiskFull(Fault):
    def invoke(self) -> dict[str, Any]:
        self.ctx.cluster.require(Capability.DISK)
        self.target = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        filled = {str(nid): self.ctx.cluster.node(nid).fill_disk(self.params.leave_mb) for nid in self.target["nodes"]}
        self.target = {**self.target, "detail": {**self.target["detail"], "filled": filled}}
        return self.target

    def heal(self) -> dict[str, Any]:
        if self.healed:
            return {}
        self.healed = True
        out: dict[str, Any] = {"nodes": self.target.get("nodes", []), "freed_bytes": {}, "stopped": [], "broker_said": {}}
        for nid in self.target.get("nodes", []):
            node = self.ctx.cluster.node(nid)
            out["freed_bytes"][str(nid)] = node.free_disk()
            said = [line.strip()[:300] for path in node.log_paths if path.name == "server.log"
                    for line in path.read_text(errors="replace").splitlines()
                    if any(marker in line for marker in FAILED_DIR_MARKERS)]
            if said:
                out["broker_said"][str(nid)] = said[:5]
            if start_if_stopped(self.ctx.cluster, nid):
                out["stopped"].append(nid)
        return out


register(
    FaultKind("disk-full", "fill the target's log directory (a small filesystem of its own) but leave_mb; heal frees it "
              "and starts the node again if it stopped", Capability.DISK, (*NODE_TARGETS, "all"), DiskFull, DiskFullParams,
              # each log directory on a small filesystem
              needs=ClusterNeeds(cluster={"disk_limit_mb": 256})),
)
