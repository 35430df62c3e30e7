"""The ports of a local cluster, chosen once at start (``PortPlan``, kept in ``cluster.json``);
the names of its proxies are in clusters/proxy/links.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kchaos.clusters.spec import ClusterSpec
from kchaos.runtime.ports import allocate_ports


@dataclass
class PortPlan:
    """Every port of the cluster, chosen once at start and kept in ``cluster.json``."""

    toxiproxy_api: int
    client: dict[int, int]                 # broker -> CLIENT listener port
    repl: dict[str, int]                   # "i>k": port of listener REPL<i> on broker k
    controller: dict[int, int]             # controller c -> port of its own listener CTRL<c>
    proxy_client: dict[int, int]           # broker -> client proxy port
    proxy_repl: dict[str, int]             # "i>k": proxy for broker i fetching from broker k
    proxy_quorum: dict[str, int]           # "i>c": proxy for node i talking to controller c
    message_api: int | None = None         # message proxy control API
    proxy_message: dict[int, int] = field(default_factory=dict)  # broker -> message proxy listener
    #: "i>k" -> message proxy listener on the link of broker i to broker k (proxy_messages_between_brokers)
    proxy_message_repl: dict[str, int] = field(default_factory=dict)
    #: "i>c" -> port of listener CTRL<i> on controller c, which only node i reaches (through the
    #: proxy quorum-n<i>-to-n<c>): a Raft leader tells each follower its own listener's address
    controller_in: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, spec: ClusterSpec, broker_ids: list[int], controller_ids: list[int],
              node_ids: list[int]) -> "PortPlan":
        pairs = [f"{i}>{k}" for i in broker_ids for k in broker_ids]
        proxied_pairs = [p for p in pairs if p.split(">")[0] != p.split(">")[1]] if spec.proxy_internal else []
        quorum_pairs = ([f"{i}>{c}" for i in node_ids for c in controller_ids if i != c]
                        if spec.proxy_internal else [])
        client_proxies = broker_ids if spec.proxy_clients else []
        message_proxies = broker_ids if spec.proxy_messages else []
        message_pairs = proxied_pairs if spec.proxy_messages_between_brokers else []
        count = (1 + len(broker_ids) + len(pairs) + len(controller_ids) + len(client_proxies)
                 + len(proxied_pairs) + len(quorum_pairs) + (1 + len(message_proxies) if message_proxies else 0)
                 + len(message_pairs) + len(quorum_pairs))
        it = iter(allocate_ports(count, spec.base_port))
        return cls(
            toxiproxy_api=next(it),
            client={b: next(it) for b in broker_ids},
            repl={p: next(it) for p in pairs},
            controller={c: next(it) for c in controller_ids},
            proxy_client={b: next(it) for b in client_proxies},
            proxy_repl={p: next(it) for p in proxied_pairs},
            proxy_quorum={p: next(it) for p in quorum_pairs},
            message_api=next(it) if message_proxies else None,
            proxy_message={b: next(it) for b in message_proxies},
            proxy_message_repl={p: next(it) for p in message_pairs},
            controller_in={p: next(it) for p in quorum_pairs},
        )

    def quorum_upstream(self, pair: str) -> int:
        """Where the link proxy ``quorum-n<i>-to-n<c>`` forwards: controller c's listener CTRL<i>
        (its own listener in a plan made before there was one per node)."""
        return self.controller_in.get(pair, self.controller[int(pair.split(">")[1])])

    def client_upstream(self, broker: int) -> int:
        """Where the client proxy of ``broker`` forwards: the message proxy when there is one."""
        return self.proxy_message.get(broker, self.client[broker])

    def repl_upstream(self, pair: str) -> int:
        """Where the link proxy ``repl-n<i>-to-n<k>`` forwards: the message proxy when it is on
        the links between brokers."""
        return self.proxy_message_repl.get(pair, self.repl[pair])

    def client_entry(self, broker: int) -> int:
        """The port clients are told to use for ``broker``: the first proxy on the path."""
        return self.proxy_client.get(broker, self.client_upstream(broker))

    def to_json(self) -> dict[str, Any]:
        return {k: ({str(kk): vv for kk, vv in v.items()} if isinstance(v, dict) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "PortPlan":
        intkeys = ("client", "controller", "proxy_client", "proxy_message")
        return cls(**{k: ({int(kk) if k in intkeys else kk: vv for kk, vv in v.items()} if isinstance(v, dict) else v)
                      for k, v in data.items()})
