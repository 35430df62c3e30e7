"""Message faults: a rule of kchaos' message proxy (clusters/proxy/server.py) on single Kafka
requests some workers send to the brokers holding a role (or, with ``link = "inter-broker"``,
that other brokers send them: transaction markers, partition verification, replication):
delayed, held past the sender's timeout, answered to the broker but not the sender, duplicated,
or answered with a forged error.
The parameters are checked with the proxy's own rule validation (clusters/proxy/rules.py)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from kchaos.clusters.base import Capability
from kchaos.clusters.proxy.rules import check_answer_field, check_apis, check_error, check_number
from kchaos.errors import ConfigError
from kchaos.faults.base import Fault, resolve_node_target, start_if_stopped
from kchaos.faults.kinds import ClusterNeeds, FaultKind, NoParams, message_rules, register
from kchaos.waiting import WaitTimeout, wait_until
from kchaos.workloads.client_settings import WORKER_CLIENT_PREFIX

#: brokers a message fault's requests go to, resolved when it is invoked
MESSAGE_TARGETS = ("txn-coordinator", "group-coordinator", "share-coordinator", "leader-output", "leader-input", "random",
                   "all")


#: every message kind needs the message proxy on the client path, or, on a cluster kchaos did not
#: start, its front
MESSAGE_NEEDS = ClusterNeeds(cluster={"proxy_messages": True}, external={"front": True})

#: the fields of a proxy rule a kind does not take (each kind's own class sets its own default)
RULE_FIELDS: dict[str, Any] = {"delay_ms": 0, "release_after_ms": 0, "duplicate_after_ms": 0, "error": None, "total": 0,
                               "release_on": [], "answer_carries": None}


class MessageParams(NoParams):
    """What every message fault takes: which requests, from which workers, how many per worker."""

    apis: list[str] = Field(default_factory=lambda: ["EndTxn"])
    worker: str | float = Field("all", description="a worker slot number, \"random\" or \"all\"")
    count: float = 1
    link: Literal["client", "inter-broker"] = Field(
        "client", description="client: the workers' requests; inter-broker: the requests brokers send the target broker "
                              "(transaction markers, partition verification, replication fetches)")

    @classmethod
    def extra_capabilities(cls, params: dict[str, Any]) -> tuple[Capability, ...]:
        return (Capability.MESSAGES_BETWEEN_BROKERS,) if params.get("link") == "inter-broker" else ()

    @classmethod
    def cluster_needs(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Aimed at the links between brokers (its own link, or its kind's default): the message
        proxy goes there too."""
        link = params.get("link", cls.model_fields["link"].default)
        return {"proxy_messages_between_brokers": True} if link == "inter-broker" else {}

    @field_validator("apis", mode="before")
    @classmethod
    def _apis(cls, value: Any) -> list[str]:
        return check_apis(value)

    @field_validator("worker")
    @classmethod
    def _worker(cls, value: Any) -> Any:
        if not (value in ("all", "random") or (isinstance(value, float) and value >= 0 and value == int(value))):
            raise ValueError(f"worker is a worker slot number, \"random\" or \"all\"; got {value!r}")
        return value

    @model_validator(mode="after")
    def _between_brokers(self) -> "MessageParams":
        if self.link == "inter-broker" and self.worker != "all":
            raise ValueError("link = 'inter-broker' affects requests between brokers: worker must stay 'all'")
        return self

    @model_validator(mode="after")
    def _numbers(self) -> "MessageParams":
        for name, value in self.model_dump().items():
            if name in ("count", "delay_ms", "release_after_ms", "duplicate_after_ms"):
                check_number(name, value)
        return self


class Delay(MessageParams):
    delay_ms: float = 2000


class Hold(MessageParams):
    release_after_ms: float = Field(0, description="0: held until the fault heals")
    release_on: list[str] = Field(default_factory=list, description=(
        "API names: a held request goes on as soon as the broker answers NONE to one of these from the same "
        "client (e.g. [\"InitProducerId\"]: a Produce delivered once its producer's abort is complete)"))

    @field_validator("release_on", mode="before")
    @classmethod
    def _release_on(cls, value: Any) -> list[str]:
        try:
            return check_apis(value) if value else []
        except ValueError as exc:
            raise ValueError(f"release_on: {exc}") from None


class DropResponse(MessageParams):
    answer_carries: str | None = Field(None, description=(
        "drop only an answer that carries this (\"assignment\": a StreamsGroupHeartbeat or ConsumerGroupHeartbeat "
        "answer with the tasks or partitions of a member already in the group); the other exchanges pass, recorded, "
        "and do not count"))

    @model_validator(mode="after")
    def _carried(self) -> "DropResponse":
        if self.answer_carries is not None:
            check_answer_field(self.answer_carries, self.apis)
        return self


class Duplicate(MessageParams):
    duplicate_after_ms: float = 1000


class ForgedError(MessageParams):
    error: str = "NOT_COORDINATOR"

    @model_validator(mode="after")
    def _forgeable(self) -> "ForgedError":
        check_error(self.error, self.apis)
        return self


class MessageFault(Fault):
    """A message-proxy rule (clusters/proxy/server.py) on the requests some workers send to the
    broker holding a role. Invoke resolves the broker and the workers now and adds the rule;
    heal removes it, which releases what it holds and returns every request it affected (API,
    correlation id, producer id and epoch, the broker's answer): they go into the history with
    the fault's completion, and into ``cluster/messages/events.jsonl`` as they happen."""

    def invoke(self) -> dict[str, Any]:
        cluster = self.ctx.cluster
        # the proxy's rule carries every field; a kind's own parameters override the neutral rest
        params = {**RULE_FIELDS, **self.params.model_dump()}
        for capability in (Capability.MESSAGES, *MessageParams.extra_capabilities(params)):
            cluster.require(capability)
        between_brokers = params["link"] == "inter-broker"
        if self.scheduled.target == "all":
            resolved = {"nodes": sorted(n.node_id for n in cluster.brokers), "role": "every broker", "detail": {}}
        else:
            resolved = resolve_node_target(self.ctx, self.scheduled.target, self.rng, remote_writer=between_brokers)
        worker = params["worker"]
        if worker == "random":
            pool = self.ctx.workload.pool if self.ctx.workload is not None else None
            slots = sorted(pool.slots) if pool is not None else []
            if not slots:
                raise ConfigError("worker = 'random' needs a running workload")
            worker = self.rng.choice(slots)
        elif worker != "all":
            worker = f"w{int(worker)}"
        prefix = "" if between_brokers else WORKER_CLIENT_PREFIX if worker == "all" else f"kchaos-{worker}-"
        rule = {"id": f"kchaos-fault-{self.scheduled.index}", "kind": message_rules()[self.scheduled.kind],
                "link": params["link"],
                "apis": list(params["apis"]), "nodes": resolved["nodes"], "client_prefix": prefix,
                "count": int(params["count"]), "delay_ms": int(params["delay_ms"]),
                "release_after_ms": int(params["release_after_ms"]),
                "duplicate_after_ms": int(params["duplicate_after_ms"]), "error": params["error"],
                "total": int(params["total"]), "release_on": list(params["release_on"]),
                "answer_carries": params["answer_carries"]}
        cluster.messages.add_rule(rule)  # type: ignore[attr-defined]
        to = "every broker" if self.scheduled.target == "all" else f"the {resolved['role']}"
        sender = "every broker" if between_brokers else "every worker" if worker == "all" else worker
        self.target = {**resolved, "role": f"{', '.join(rule['apis'])} of {sender} to {to}",
                       "detail": {**resolved["detail"], "rule": rule}}
        return self.target

    def heal(self) -> dict[str, Any]:
        if self.healed or not self.target:
            self.healed = True
            return {}
        self.healed = True
        events = self.ctx.cluster.messages.remove_rule(self.target["detail"]["rule"]["id"])  # type: ignore[attr-defined]
        return {"messages": events}


class HeldRequestFailoverParams(Hold):
    """One request held between brokers, then its sender killed. Each kind fixes its API."""

    HELD_API: ClassVar[str] = "WriteTxnMarkers"
    link: Literal["client", "inter-broker"] = "inter-broker"
    #: one request in all: the successor's (another broker's client id) must pass
    total: float = Field(1, ge=1, le=1)
    wait_s: float = Field(6.0, gt=0, le=120, description="how long to wait for a request to hold before giving up "
                                                         "(then nothing is killed)")

    @classmethod
    def extra_capabilities(cls, params: dict[str, Any]) -> tuple[Capability, ...]:
        return (Capability.MESSAGES_BETWEEN_BROKERS, Capability.KILL)

    @model_validator(mode="before")
    @classmethod
    def _default_api(cls, value: Any) -> Any:
        return {"apis": [cls.HELD_API], **value} if isinstance(value, dict) else value

    @model_validator(mode="after")
    def _fixed(self) -> "HeldRequestFailoverParams":
        if self.link != "inter-broker" or self.apis != [self.HELD_API]:
            raise ValueError(f"this kind holds {self.HELD_API} between brokers (apis and link are fixed)")
        return self


class HeldMarkerFailoverParams(HeldRequestFailoverParams):
    HELD_API: ClassVar[str] = "WriteTxnMarkers"


class HeldShareWriteFailoverParams(HeldRequestFailoverParams):
    HELD_API: ClassVar[str] = "WriteShareGroupState"


class HeldRequestFailover(MessageFault):
    """A request held on its way between brokers, then the broker that sent it killed; the held
    request is delivered at the heal, from a sender that is gone, after its successor's.

    - ``marker-hold-failover``: a transaction marker held on its way to a partition leader, its
      sender the transaction's coordinator (the transaction prepared). The successor reloads the
      prepared transaction and sends the markers again (KAFKA-19999's reload path, and a stale
      marker on top).
    - ``share-write-hold-failover``: a share partition leader's state write (WriteShareGroupState)
      held on its way to the share coordinator, its sender the input partition's leader. The new
      leader reads the state and writes its own; the held write, from the older leader epoch,
      must be fenced (share-state-regressed names it if it was not).

    The killed node starts again at the heal."""

    killed: int | None = None

    def invoke(self) -> dict[str, Any]:
        target = super().invoke()
        cluster = self.ctx.cluster
        rule_id = target["detail"]["rule"]["id"]
        try:
            held = wait_until(lambda: [e for e in cluster.messages.rule_events(rule_id)  # type: ignore[attr-defined]
                                       if e["action"] == "held" and e.get("source") is not None],
                              float(self.params.wait_s), 0.05, "no request was held")  # type: ignore[attr-defined]
        except WaitTimeout:
            self.target["detail"]["killed"] = None
            self.target["role"] += f"; nothing held within {self.params.wait_s:g}s, nothing killed"  # type: ignore[attr-defined]
            return self.target
        request = held[0]
        self.killed = int(request["source"])
        cluster.node(self.killed).kill()
        self.target["nodes"] = sorted({*self.target["nodes"], self.killed})
        self.target["role"] += f"; then its sender, node {self.killed}, killed"
        self.target["detail"].update(killed=self.killed, held_request={
            k: request.get(k) for k in ("api", "node", "source", "correlation_id", "api_version", "producer_id",
                                        "producer_epoch", "committed", "markers", "group_id", "partition",
                                        "leader_epoch", "writes") if k in request})
        return self.target

    def heal(self) -> dict[str, Any]:
        out = super().heal()  # releases the held request first: it arrives after the successor's
        if self.killed is not None:
            start_if_stopped(self.ctx.cluster, self.killed)
        return out


register(
    FaultKind("marker-hold-failover", "hold a transaction marker between brokers, then kill the coordinator that sent "
              "it; the marker is delivered at the heal, after the successor's", Capability.MESSAGES,
              ("leader-output", "all"), HeldRequestFailover, HeldMarkerFailoverParams, "hold", MESSAGE_NEEDS),
    FaultKind("share-write-hold-failover", "hold a share partition leader's state write (WriteShareGroupState) on its "
              "way to the share coordinator, then kill the leader that sent it; the write is delivered at the heal, "
              "after the new leader's", Capability.MESSAGES, ("share-coordinator", "all"), HeldRequestFailover,
              HeldShareWriteFailoverParams, "hold", MESSAGE_NEEDS),
    FaultKind("message-delay", "delay matching requests by delay_ms (in order)", Capability.MESSAGES, MESSAGE_TARGETS,
              MessageFault, Delay, "delay", MESSAGE_NEEDS),
    FaultKind("message-hold", "hold a matching request until the heal (or release_after_ms), then deliver it even if "
              "the client gave up on it", Capability.MESSAGES, MESSAGE_TARGETS, MessageFault, Hold, "hold",
              MESSAGE_NEEDS),
    FaultKind("message-drop-response", "the broker gets the request, the client never hears (an unknown outcome); "
              "with answer_carries, only an answer that carries it", Capability.MESSAGES, MESSAGE_TARGETS, MessageFault,
              DropResponse, "drop-response", MESSAGE_NEEDS),
    FaultKind("message-duplicate", "deliver a matching request, then a copy duplicate_after_ms later on another "
              "connection", Capability.MESSAGES, MESSAGE_TARGETS, MessageFault, Duplicate, "duplicate", MESSAGE_NEEDS),
    FaultKind("message-error", "answer a matching request with `error` without it reaching the broker",
              Capability.MESSAGES, MESSAGE_TARGETS, MessageFault, ForgedError, "error", MESSAGE_NEEDS),
)
