"""The message proxy's front mode, for a cluster kchaos did not start: a listener per broker,
opened when an answer first names it, the broker addresses in answers rewritten to those
listeners (kchaos/protocol/address_rewrite.py holds the layouts), and the front's TLS."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any, Protocol

from kchaos.clusters.proxy.exchange import Route
from kchaos.protocol.address_rewrite import (API_VERSIONS, RewriteError, cap_api_versions, carries_addresses,
                                             rewrite_response)
from kchaos.protocol.api import API_NAMES, RequestHeader
from kchaos.runtime.ports import HOST


class ClientSide(Protocol):
    """What the front needs of the proxy it fronts (server.MessageProxy): to serve a client that
    connected to one of its listeners."""

    async def client_connected(self, route: Route, creader: asyncio.StreamReader,
                               cwriter: asyncio.StreamWriter) -> None: ...


class Front:
    """Front mode's state: a listener per broker, opened when an answer first names it, and the
    address each broker is advertised at."""

    def __init__(self, proxy: ClientSide, bootstrap: list[tuple[str, int]], advertised_host: str,
                 source_address: str | None, tls: "FrontTLS | None" = None):
        self.proxy = proxy
        self.tls = tls
        self.bootstrap = bootstrap
        self.advertised_host = advertised_host
        self.source_address = source_address
        self.nodes: dict[int, Route] = {}
        self.advertised: dict[int, int] = {}  # node -> port clients are told (Toxiproxy's, when set)
        self.servers: list[asyncio.AbstractServer] = []
        self.rewritten: dict[str, int] = {}
        self._lock = asyncio.Lock()
        #: the filter every answer passes in front mode
        self.answers = FrontRewrite(self)

    async def connect(self, route: Route) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        local: dict[str, Any] = {"local_addr": (self.source_address, 0)} if self.source_address else {}

        def secured(host: str) -> dict[str, Any]:  # TLS to the broker, its name checked as a client would
            if self.tls is None or self.tls.upstream is None:
                return local
            return {**local, "ssl": self.tls.upstream, "server_hostname": host}

        if route.node >= 0:
            return await asyncio.open_connection(route.upstream_host, route.upstream, **secured(route.upstream_host))
        last: OSError | None = None
        for host, port in self.bootstrap:  # the bootstrap listener: the first server that answers
            try:
                return await asyncio.open_connection(host, port, **secured(host))
            except OSError as exc:
                last = exc
        raise last or OSError("no bootstrap server")

    async def node_route(self, node_id: int, host: str, port: int) -> Route:
        """The listener for broker ``node_id`` (opened now if new; a broker that moved is reached at
        its new address by the connections opened from now on)."""
        async with self._lock:
            route = self.nodes.get(node_id)
            if route is None:
                server = await asyncio.start_server(lambda r, w: self._connected(node_id, r, w), HOST, 0,
                                                    ssl=self.tls.listen if self.tls else None)
                listen = server.sockets[0].getsockname()[1]
                self.servers.append(server)
                route = Route(f"n{node_id}", node_id, "client", None, listen, port, host)
            elif (route.upstream_host, route.upstream) != (host, port):
                route = Route(route.name, node_id, "client", None, route.listen, port, host)
            self.nodes[node_id] = route
            return route

    async def _connected(self, node_id: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.proxy.client_connected(self.nodes[node_id], reader, writer)

    async def rewrite(self, header: RequestHeader, frame: bytes) -> bytes:
        if header.api_key == API_VERSIONS:
            return cap_api_versions(frame, header.api_version)
        if not carries_addresses(header.api_key, header.api_version):
            return frame
        seen: list[tuple[int, str, int]] = []
        new: list[tuple[int, str, int]] = []

        def advertise(node_id: int, host: str, port: int) -> tuple[str, int]:
            seen.append((node_id, host, port))
            route = self.nodes.get(node_id)
            if route is None or (route.upstream_host, route.upstream) != (host, port):
                new.append((node_id, host, port))
                return "", 0
            return self.advertised_host, self.advertised.get(node_id, route.listen)

        out = rewrite_response(header.api_key, header.api_version, frame, advertise)
        if new:  # a broker not seen before (or moved): its listener first, then the answer again
            for node_id, host, port in new:
                await self.node_route(node_id, host, port)
            seen.clear()
            new.clear()
            out = rewrite_response(header.api_key, header.api_version, frame, advertise)
        api = API_NAMES.get(header.api_key, str(header.api_key))
        self.rewritten[api] = self.rewritten.get(api, 0) + len(seen)
        return out

    def describe(self) -> dict[str, Any]:
        return {"nodes": {str(n): {"listen": r.listen, "upstream": f"{r.upstream_host}:{r.upstream}",
                                   "advertised": self.advertised.get(n, r.listen)} for n, r in sorted(self.nodes.items())},
                "rewritten": dict(self.rewritten)}


class FrontRewrite:
    """Front mode's filter on answers: ApiVersions capped to the layouts the rewriting reads, broker
    addresses rewritten to the front's listeners. An answer that cannot be read never goes on to
    the client with a broker's address in it: it is logged, and the connection goes deaf and closes."""

    def __init__(self, front: Front):
        self.front = front

    async def on_answer(self, conn: Any, header: RequestHeader, frame: bytes) -> bytes:
        try:
            return await self.front.rewrite(header, frame)
        except RewriteError as exc:  # never on to the client with a broker's address in it
            conn.proxy.log({"time": time.time(), "front": "rewrite failed", "error": str(exc),
                            "api": API_NAMES.get(header.api_key, header.api_key),
                            "api_version": header.api_version, "node": conn.node})
            conn.deaf = True
            conn.cwriter.close()
            return frame


class FrontTLS:
    """The front's TLS, for a cluster whose clients speak it: ``listen`` terminates the clients' TLS
    with the front's certificate; ``upstream`` opens TLS to the brokers as the clients would (their
    CA, their certificate if they have one, host names checked unless they are not)."""

    def __init__(self, certificate: str, key: str, upstream_ca: str | None = None, upstream_cert: str | None = None,
                 upstream_key: str | None = None, check_hostname: bool = True):
        import ssl

        self.listen = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.listen.load_cert_chain(certificate, key)
        self.upstream = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=upstream_ca)
        self.upstream.check_hostname = check_hostname
        if upstream_cert:
            # a key's password comes from the environment only (never an argument: ps shows those)
            self.upstream.load_cert_chain(upstream_cert, upstream_key, password=os.environ.get(KEY_PASSWORD_ENV))


#: where the front reads the password of the client key it presents to the brokers
KEY_PASSWORD_ENV = "KCHAOS_FRONT_KEY_PASSWORD"
