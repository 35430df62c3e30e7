"""What flows through the message proxy: its routes (one listener each), Kafka's frames on a
connection, and the requests awaiting their answers in order. Every module of the proxy imports
this one, and it imports none of them."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from kchaos.protocol.api import RequestHeader
from kchaos.runtime.ports import HOST

MAX_FRAME = 100 * 1024 * 1024
#: after a client closes: how long its upstream waits for the answers to what was sent (and a
#: duplicate for its own answer)
DRAIN_S = 30.0


@dataclass(frozen=True)
class Route:
    """One listener of the proxy: the broker it forwards to (``node``), on which kind of link,
    and for an inter-broker link the broker whose requests come through it (``source``)."""

    name: str
    node: int
    link: str
    source: int | None
    listen: int
    upstream: int
    upstream_host: str = HOST

    @classmethod
    def parse(cls, text: str) -> "Route":
        """``BROKER=LISTEN:UPSTREAM`` (clients to BROKER) or ``SRC>DST=LISTEN:UPSTREAM`` (broker
        SRC's requests to broker DST); ``UPSTREAM`` is a port on 127.0.0.1 or ``HOST:PORT``."""
        key, _, ports = text.partition("=")
        listen, _, upstream = ports.partition(":")
        host, _, port = upstream.rpartition(":")
        if ">" in key:
            src, _, dst = key.partition(">")
            return cls(f"n{int(src)}>n{int(dst)}", int(dst), "inter-broker", int(src), int(listen), int(port),
                       host or HOST)
        return cls(f"n{int(key)}", int(key), "client", None, int(listen), int(port), host or HOST)


@dataclass(eq=False)
class AwaitedAnswer:
    """A held request waiting for a ``release_on`` answer, and the answer that released it."""
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    cause: dict[str, Any] | None = None


@dataclass
class Pending:
    """A request sent upstream (or answered by the proxy), in the order the client sent it."""
    header: RequestHeader
    rule: Any = None  # the rules.Rule that took it, if one did
    record: dict[str, Any] | None = None  # the event whose answer is awaited
    drop: bool = False
    forged: bytes | None = None
    #: the events of the ``observe`` rules watching this request, answered with it
    observed: list[dict[str, Any]] = field(default_factory=list)


async def read_frame(reader: asyncio.StreamReader) -> bytes | None:
    try:
        size = int.from_bytes(await reader.readexactly(4), "big", signed=True)
        if size < 0 or size > MAX_FRAME:
            return None
        return await reader.readexactly(size)
    except (asyncio.IncompleteReadError, ConnectionError, OSError):
        return None


def frame_bytes(frame: bytes) -> bytes:
    return len(frame).to_bytes(4, "big") + frame
