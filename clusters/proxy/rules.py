"""What a message-proxy rule is (clusters/proxy/server.py): its kinds and fields, the one
validation of them, and a rule's state in the running proxy (``Rule``: what it matches and counts). The proxy applies it to every rule its control API receives; the message
fault kinds (faults/kinds/messages.py) apply the same checks to a campaign's parameters when it
loads, so a campaign is refused for exactly what the proxy would refuse, before anything starts."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from kchaos.clusters.proxy.exchange import AwaitedAnswer, Pending, Route
from kchaos.protocol.api import API_KEYS, ERROR_CODES, FORGEABLE_APIS, PER_PARTITION_FORGEABLE, RequestHeader

RULE_KINDS = ("delay", "hold", "drop-response", "duplicate", "error", "observe")
#: what a ``drop-response`` rule's ``answer_carries`` may wait for, and the APIs whose answers
#: carry it (kchaos.protocol.api.parse_response reads it; null there means "not carried")
ANSWER_FIELDS: dict[str, tuple[str, ...]] = {"assignment": ("StreamsGroupHeartbeat", "ConsumerGroupHeartbeat")}


def answer_carries(field: str, request: dict[str, Any], answer: dict[str, Any]) -> bool:
    """Whether an answer carries what a conditional drop waits for. ``assignment``: tasks (or
    partitions) sent to a member already in the group (its heartbeat's epoch above 0). A joining
    member's answer always carries them, and a lost one is simply asked for again with epoch 0:
    not the change of assignment a lost answer can hide."""
    if answer.get(field) is None:
        return False
    return field != "assignment" or (request.get("member_epoch") or 0) > 0


#: which connections a rule watches: clients' to brokers, or brokers' to each other (replication,
#: transaction markers, partition verification: the local backend's ``proxy_messages_between_brokers``)
LINKS = ("client", "inter-broker")
#: the numeric fields of a rule: each a count or milliseconds, 0 or more
NUMBERS = ("count", "total", "delay_ms", "release_after_ms", "duplicate_after_ms")


def check_apis(apis: Any) -> list[str]:
    """The API names a rule matches; ValueError unless a non-empty list of Kafka API names."""
    if not isinstance(apis, (list, tuple)) or not apis or any(a not in API_KEYS for a in apis):
        unknown = [a for a in apis if a not in API_KEYS] if isinstance(apis, (list, tuple)) else apis
        raise ValueError(f"apis must be a list of API names from {', '.join(API_KEYS)}; got {unknown or 'none'!r}")
    return list(apis)


def check_error(error: Any, apis: list[str]) -> str:
    """The error an ``error`` rule forges; ValueError unless known and forgeable for ``apis``
    (the per-partition answers echo the request's partitions, each with the error; a request
    the proxy still cannot answer, such as a Produce with acks=0, passes when it comes)."""
    if error not in ERROR_CODES:
        raise ValueError(f"error must be one of {', '.join(ERROR_CODES)}, not {error!r}")
    not_forgeable = [a for a in apis if a not in FORGEABLE_APIS]
    if not_forgeable:
        top = [a for a in FORGEABLE_APIS if a not in PER_PARTITION_FORGEABLE]
        per_partition = ", ".join(f"{a} v{v.start}-{v.stop - 1}" for a, v in PER_PARTITION_FORGEABLE.items())
        raise ValueError(f"kchaos can forge an error response for {', '.join(top)} (one error code) and "
                         f"{per_partition} (every partition of the request) only, not {', '.join(not_forgeable)}")
    return str(error)


def check_answer_field(field: Any, apis: list[str]) -> str:
    """What a conditional ``drop-response`` waits for; ValueError unless the APIs' answers carry it."""
    if field not in ANSWER_FIELDS:
        raise ValueError(f"answer_carries must be one of {', '.join(ANSWER_FIELDS)}, not {field!r}")
    others = [a for a in apis if a not in ANSWER_FIELDS[field]]
    if others:
        raise ValueError(f"answer_carries = {field!r} is read from {', '.join(ANSWER_FIELDS[field])} answers only, "
                         f"not {', '.join(others)}")
    return str(field)


def check_number(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != int(value):
        raise ValueError(f"{name} must be a number >= 0; got {value!r}")
    return int(value)


def validate_rule(body: dict[str, Any]) -> dict[str, Any]:
    """A rule as the control API accepts it; ValueError names the bad field."""
    kind = body.get("kind")
    if kind not in RULE_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RULE_KINDS)}, not {kind!r}")
    apis = check_apis(body.get("apis") or [])
    link = body.get("link") or "client"
    if link not in LINKS:
        raise ValueError(f"link must be one of {', '.join(LINKS)}, not {link!r}")
    sources = body.get("sources") or []
    if sources and link != "inter-broker":
        raise ValueError("sources (the brokers sending the request) are for link = 'inter-broker'")
    release_on = body.get("release_on") or []
    if release_on and kind != "hold":
        raise ValueError("release_on (answers that release a held request) is for kind = 'hold'")
    answer_carries = body.get("answer_carries") or None
    if answer_carries is not None:
        if kind != "drop-response":
            raise ValueError("answer_carries (which answers to drop) is for kind = 'drop-response'")
        check_answer_field(answer_carries, apis)
    rule = {"link": link, "answer_carries": answer_carries, "sources": [int(n) for n in sources],
            "id": str(body.get("id") or f"rule-{time.monotonic_ns()}"),
            "release_on": check_apis(release_on) if release_on else [],
            "kind": kind, "apis": apis,
            "nodes": [int(n) for n in body.get("nodes") or []], "client_prefix": str(body.get("client_prefix") or ""),
            "error": check_error(body.get("error"), apis) if kind == "error" else body.get("error"),
            **{name: check_number(name, body.get(name, 1 if name == "count" else 0)) for name in NUMBERS}}
    return rule


@dataclass
class Rule:
    spec: dict[str, Any]
    api_keys: frozenset[int]
    released: asyncio.Event = field(default_factory=asyncio.Event)
    hits: dict[str, int] = field(default_factory=dict)
    unanswered: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    #: per client id, the holds waiting for a ``release_on`` answer
    awaiting: dict[str, list["AwaitedAnswer"]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.spec["id"]

    def may_drop(self, client_id: str | None) -> bool:
        """A conditional drop's limits, judged when an answer carries what it waits for."""
        client = client_id or ""
        limit, total = self.spec["count"], self.spec.get("total", 0)
        return not (limit and self.hits.get(client, 0) >= limit) and not (total and sum(self.hits.values()) >= total)

    def judge_answer(self, head: "Pending", answer: dict[str, Any], delivered: bool) -> None:
        """A conditional drop (``answer_carries``): the answer is dropped if it carries that field
        and the limits allow; otherwise it passes (``passed``, and whether it reached the client:
        an earlier drop on the connection leaves it deaf). Either way the exchange is an event."""
        event = head.record
        assert event is not None
        client = head.header.client_id or ""
        if answer_carries(self.spec["answer_carries"], event, answer) and self.may_drop(client):
            self.hits[client] = self.hits.get(client, 0) + 1
        else:
            head.drop = False
            event.update(action="passed", delivered=delivered)
        self.events.append(event)

    def matches(self, route: Route, header: RequestHeader) -> bool:
        if self.released.is_set() or header.api_key not in self.api_keys:
            return False
        if self.spec.get("link", "client") != route.link:
            return False
        if self.spec["nodes"] and route.node not in self.spec["nodes"]:
            return False
        if self.spec.get("sources") and route.source not in self.spec["sources"]:
            return False
        client = header.client_id or ""
        if not client.startswith(self.spec["client_prefix"]):
            return False
        if self.spec.get("answer_carries"):  # watches every match; counts only what it drops
            return True
        limit = self.spec["count"]
        if limit and self.hits.get(client, 0) >= limit:
            return False
        total = self.spec.get("total", 0)  # over every client id (0: no bound)
        if total and sum(self.hits.values()) >= total:
            return False
        self.hits[client] = self.hits.get(client, 0) + 1
        return True
