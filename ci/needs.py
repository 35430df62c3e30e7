"""Which runs of a matrix need root, read from their campaigns, never written by hand.

A run needs root when its campaign asks its backend for a capability that backend provides only
as root: the capabilities its fault kinds declare (``faults/kinds``: ``FaultKind.capabilities``,
the same the capability check reads before a run starts) and the cluster settings those kinds
turn on when the campaign loads (``clock_control``, ``disk_limit_mb``). On the local backend:
disk faults mount a small filesystem on each broker's log directory (kchaos/runtime/small_disk.py,
root and mount(8)); clock faults preload libfaketime, which only root can install
(kchaos/runtime/faketime.py): where it is installed already they need nothing more. On the
Docker backend: partitions cut the links between containers with ``nsenter`` + ``iptables`` in
their network namespaces, and kchaos' own ``dockerd`` (``cluster.docker.engine = "private"``)
runs as root.

``kchaos ci nightly`` asks this for every run before it starts: a run that needs root, in a
process that is not root (``os.geteuid() != 0``), is skipped with these reasons, never run to
fail on permissions (ci/nightly.py).
"""

from __future__ import annotations

import os

from kchaos.clusters.base import Capability
from kchaos.faults.kinds import KINDS
from kchaos.runtime import faketime
from kchaos.verifier.campaign import Campaign

#: (backend, capability) -> why that backend needs root for it
ROOT_CAPABILITIES: dict[tuple[str, Capability], str] = {
    ("local", Capability.DISK): "disk faults mount a small filesystem on each broker's log directory (mount(8), root)",
    ("local", Capability.CLOCK): "clock faults preload libfaketime into the brokers' JVMs, which is not installed and "
                                 "only root installs (kchaos setup --clock)",
    ("docker", Capability.PARTITION): "the docker backend cuts links between containers with nsenter + iptables in "
                                      "their network namespaces (root)",
}


def capabilities_asked(campaign: Campaign) -> set[Capability]:
    """What the campaign asks of its backend: its fault kinds' declared capabilities and the
    cluster settings they turned on at load."""
    asked: set[Capability] = set()
    if campaign.faults.enabled:
        for entry in campaign.faults.entries():
            asked |= set(KINDS[entry.kind].capabilities(entry.params))
    if campaign.cluster.clock_control:
        asked.add(Capability.CLOCK)
    if campaign.cluster.disk_limit_mb:
        asked.add(Capability.DISK)
    return asked


def root_needs(campaign: Campaign) -> tuple[str, ...]:
    """Why a run of ``campaign`` needs root on this machine (empty: it does not)."""
    backend = campaign.cluster.backend
    reasons = []
    for capability in sorted(capabilities_asked(campaign), key=lambda c: c.value):
        reason = ROOT_CAPABILITIES.get((backend, capability))
        if reason is None:
            continue
        if capability is Capability.CLOCK and faketime.library() is not None:
            continue  # installed already: a non-root JVM preloads it
        reasons.append(reason)
    if backend == "docker" and campaign.cluster.docker.engine == "private":
        reasons.append("kchaos' own Docker engine (cluster.docker.engine = 'private') runs as root")
    return tuple(reasons)


def is_root() -> bool:
    return os.geteuid() == 0
