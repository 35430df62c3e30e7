"""A cluster's links by name: the names of its proxies (one per client link, per ordered pair of
brokers (replication) and per node and controller (quorum)), and a local cluster's links as
Toxiproxy proxies: partitions, isolation, heal."""

from __future__ import annotations

import contextlib
from typing import Any


def proxy_name_client(broker: int) -> str:
    return f"client-n{broker}"


def proxy_name_repl(src: int, dst: int) -> str:
    return f"repl-n{src}-to-n{dst}"


def proxy_name_quorum(src: int, dst: int) -> str:
    return f"quorum-n{src}-to-n{dst}"


def link_names(brokers: set[int], controllers: set[int], side_a: list[int], side_b: list[int]) -> list[str]:
    """Every replication (broker to broker) and quorum (to a controller) link between the two sides,
    both directions, by the names the pair proxies have (backends without proxies cut them otherwise)."""
    out = set()
    for a in side_a:
        for b in side_b:
            for src, dst in ((a, b), (b, a)):
                if src in brokers and dst in brokers:
                    out.add(proxy_name_repl(src, dst))
                if dst in controllers:
                    out.add(proxy_name_quorum(src, dst))
    return sorted(out)


class LinkNetwork:
    """A cluster's links between nodes, by the names :func:`link_names` gives them; a backend cuts
    them by its own means (``cut``) and undoes every change in ``heal``."""

    def __init__(self, cluster: Any):
        self.cluster = cluster

    def links_between(self, side_a: list[int], side_b: list[int]) -> list[str]:
        """Every replication and quorum link between the two sides, both directions."""
        return link_names({n.node_id for n in self.cluster.brokers}, {n.node_id for n in self.cluster.controllers},
                          side_a, side_b)

    def cut(self, names: list[str]) -> list[str]:
        raise NotImplementedError

    def cut_clients(self, nodes: list[int]) -> list[str]:
        """Take the client links of ``nodes`` down (their Toxiproxy client proxies, or the front's,
        refuse connections) until the heal; a local broker that restarts meanwhile stays cut
        (LocalJvmCluster.client_port_follows). Returns the proxies."""
        names = [proxy_name_client(n) for n in nodes]
        with getattr(self.cluster, "port_lock", contextlib.nullcontext()):
            getattr(self.cluster, "client_links_cut", set()).update(nodes)
            for name in names:
                self.client.set_enabled(name, False)  # type: ignore[attr-defined]
        return names

    def partition(self, side_a: list[int], side_b: list[int]) -> list[str]:
        """Cut every inter-node link between the two sides; returns the links cut."""
        return self.cut(self.links_between(side_a, side_b))

    def heal(self) -> None:
        raise NotImplementedError


class ProxyNetwork(LinkNetwork):
    """Links of a local cluster, by proxy name; every change is undone by :meth:`heal`. A backend
    that cuts its links between nodes otherwise (clusters/docker/cluster.py) overrides
    ``links_between``, ``cut`` and ``heal``."""

    def __init__(self, cluster: Any):
        super().__init__(cluster)
        assert cluster.toxiproxy is not None
        self.client = cluster.toxiproxy

    def links_between(self, side_a: list[int], side_b: list[int]) -> list[str]:
        """Proxy names of every replication and quorum link between the two sides, both directions."""
        names = set(self.client.proxies())
        out = []
        for a in side_a:
            for b in side_b:
                for src, dst in ((a, b), (b, a)):
                    for name in (proxy_name_repl(src, dst), proxy_name_quorum(src, dst)):
                        if name in names:
                            out.append(name)
        return sorted(set(out))

    def cut(self, names: list[str]) -> list[str]:
        """Disable the named link proxies; returns them."""
        for name in names:
            self.client.set_enabled(name, False)
        return names

    def isolate(self, node_id: int, include_clients: bool = False) -> list[str]:
        others = [n.node_id for n in self.cluster.nodes if n.node_id != node_id]
        cut = self.partition([node_id], others)
        if include_clients and proxy_name_client(node_id) in self.client.proxies():
            cut += self.cut_clients([node_id])
        return cut

    def heal(self) -> None:
        self.client.reset()
        close = getattr(self.cluster, "close_dead_client_ports", None)
        if close is not None:  # a broker still down keeps refusing connections
            close()
