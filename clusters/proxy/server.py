"""The message proxy: a Kafka-protocol-aware proxy on the client path that delays, holds,
duplicates, answers for, or swallows the answer to single requests.

Why kchaos' own and not Kroxylicious (docs/faults.md, "Message faults", has the whole
argument): the KAFKA-17754 shape needs a request that reaches the broker *after* the client
gave up on it and moved on, on a connection the client has closed. Kroxylicious closes the
upstream connection when the client disconnects, pauses the connection while a request is
deferred and bounds a deferral at 20 s, so a held request is lost exactly when it matters. A
frame-level proxy only needs the request header (size, api key, version, correlation id, client
id), which every Kafka version shares; kchaos.protocol.api reads the few bodies the
evidence needs.

Chain: client -> Toxiproxy ``client-n<i>`` -> this proxy's listener for broker i -> broker i.
Between brokers, when the cluster asks for it (``proxy_messages_between_brokers``): broker i ->
Toxiproxy ``repl-n<i>-to-n<k>`` -> this proxy's listener for the link i>k -> broker k's
``REPL<i>`` listener, so the requests one broker sends another (replication fetches, transaction
markers from a coordinator to a partition leader, a leader's partition verification with a
coordinator) can be held, duplicated or answered for too; a rule says which link it watches.
One process serves every route (one listener each) and a small HTTP control API; the local
backend starts, tracks and reaps it like Toxiproxy.

Per client connection there is one upstream connection, and it outlives the client's: when the
client closes, what the proxy already accepted from it (held and delayed requests included) is
still delivered, in order, and the broker's answers are read and recorded before the upstream
closes. That is the "client gave up, the message still arrives" of a real network.

**Front mode** (``--front-bootstrap``), for a cluster kchaos did not start: the proxy is the only
address clients know. A bootstrap listener forwards to the cluster's bootstrap servers; every
answer that carries broker addresses (kchaos/protocol/address_rewrite.py: Metadata, FindCoordinator,
DescribeCluster, KIP-951's Produce and Fetch endpoints, ShareFetch, ShareAcknowledge) is rewritten
so that broker N is this proxy's listener for N, opened the first time an answer names N, or the
port ``POST /front/advertise`` set (Toxiproxy's, in front of that listener). ApiVersions answers
are capped to the layouts the rewriting reads. An answer that cannot be read closes its connection
(the client reconnects and asks again); it never reaches the client with a broker's address.

Rule kinds (``POST /rules``), each aimed at API keys, broker ids and a client-id prefix, and
affecting at most ``count`` requests per client id (0: every match) and ``total`` in all (0: no bound):

* ``delay``: the request waits ``delay_ms`` before it goes on; later requests on the same
  connection wait behind it (TCP's order is kept, as Kafka requires).
* ``hold``: the request waits until the rule is removed (the fault heals) or ``release_after_ms``,
  then goes on, even if its client has gone. With ``release_on`` (API names) it goes on as soon
  as the broker answers NONE, while it is held, to one of those requests from the same client
  id: e.g. a Produce held until its producer's next InitProducerId succeeds, which the
  coordinator grants only once the aborted transaction's markers are written (KIP-664's late
  batch, arriving after the abort and before the producer writes with its new epoch).
* ``drop-response``: the broker gets the request; its response and every later one on that
  connection are swallowed, so the client sees a silent connection and times out: an unknown
  outcome. (A lone lost response would desynchronise a client that matches responses in order.)
  When the rule is removed (its fault heals) the proxy closes each connection it silenced, as a
  network that comes back resets it; a client that kept one open reconnects.
  With ``answer_carries`` (e.g. ``assignment``) only an answer that carries it is dropped, and
  only those count against ``count`` and ``total``; every other matching exchange passes and is
  recorded (``passed``, with its answer): the exchange around the lost answer is the evidence.
* ``duplicate``: the request goes on, and a copy is sent ``duplicate_after_ms`` later on a
  connection of the proxy's own (its answer is recorded, never shown to the client).
* ``error``: the request never reaches the broker; the client gets ``error`` in a response
  forged for its API version (kchaos.protocol.api.FORGEABLE_APIS; a per-partition answer echoes
  the request's partitions, each with the error), in order after earlier answers. A request it
  cannot answer so (a Produce with acks=0 expects no answer; a version whose layout kchaos does
  not know) passes to the broker uncounted, recorded as ``passed`` with the reason (``refused``).
* ``observe``: no fault. Each matching request and its answer pass untouched and are recorded
  (``observed``, with the answer and whether the client got it; ``answer`` null when none came
  before the connection ended), beside whatever other rule
  takes the request. For a whole run's evidence (``cluster.record_apis``), so its events go to
  ``events.jsonl`` only, none are kept in memory, and ``/reset`` (the final heal) leaves it.

Every affected request is an event (``GET /rules/<id>/events``, and a line of ``events.jsonl``): rule,
action, broker, client id, API, version, correlation id, and what the body says (transactional
id, producer id and epoch, commit or abort, partitions and sequence numbers), then the broker's
answer when one was read.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import time
from collections import deque
from pathlib import Path
from typing import Any

from kchaos.clusters.proxy.exchange import DRAIN_S, Pending, Route, frame_bytes, read_frame
from kchaos.clusters.proxy.filters import ACTIONS, Observe, ReleaseOn, Taken
from kchaos.clusters.proxy.front import Front, FrontTLS
from kchaos.clusters.proxy.rules import Rule, validate_rule
from kchaos.protocol.api import (API_KEYS, API_NAMES, RequestHeader, describe_request, expects_answer,
                                 parse_request_header, parse_response)
from kchaos.runtime.ports import HOST

#: how long removing a rule waits for the answers to the requests it released
ANSWER_WAIT_S = 10.0
PRODUCE = API_KEYS["Produce"]


class Connection:
    ids = itertools.count(1)

    def __init__(self, proxy: "MessageProxy", route: Route, creader: asyncio.StreamReader,
                 cwriter: asyncio.StreamWriter, ureader: asyncio.StreamReader, uwriter: asyncio.StreamWriter):
        self.proxy, self.route, self.node = proxy, route, route.node
        self.id = next(self.ids)
        self.creader, self.cwriter, self.ureader, self.uwriter = creader, cwriter, ureader, uwriter
        self.pending: deque[Pending] = deque()
        self.client_open = True
        self.deaf = False  # after a dropped response: nothing more reaches the client
        self.deaf_by: str | None = None  # the rule whose drop silenced it: its heal closes it

    def to_client(self, data: bytes) -> None:
        if self.client_open and not self.deaf:
            try:
                self.cwriter.write(data)
            except (ConnectionError, OSError, RuntimeError):
                self.client_open = False

    def hang_up(self) -> None:
        """The fault that silenced this connection healed: close it, as a network that comes back
        resets a connection that lost an answer, so the client reconnects. Left open, a client
        that never gives up a connection (KafkaJS) would stay deaf long after the heal."""
        self.client_open = False
        try:
            self.cwriter.close()
        except Exception:
            pass

    def flush_forged(self) -> None:
        while self.pending and self.pending[0].forged is not None:
            self.to_client(frame_bytes(self.pending.popleft().forged or b""))

    async def requests(self) -> None:
        """Client -> broker, one request at a time, in order."""
        while True:
            frame = await read_frame(self.creader)
            if frame is None:
                self.client_open = False
                return
            try:
                header = parse_request_header(frame)
            except Exception:
                header = RequestHeader(-1, -1, -1, None, len(frame))
            observed = self.proxy.observe(self, header, frame)
            rule = self.proxy.match(self.route, header)
            if rule is None:
                self.forward(frame, header, observed)
                continue
            await self.affect(rule, frame, header, observed)

    def forward(self, frame: bytes, header: RequestHeader, observed: list[dict[str, Any]]) -> None:
        """A request no fault rule affects goes to the broker untouched. A Produce with acks=0
        gets no answer: nothing waits for one (an answer would be matched to the wrong request),
        and its observers are recorded now, unanswered."""
        if header.api_key != PRODUCE or expects_answer(frame, header):
            self.pending.append(Pending(header, observed=observed))
        else:
            for seen in observed:
                seen.update(answer=None, delivered=False, answer_expected=False)
                self.proxy.log(seen)
        self.uwriter.write(frame_bytes(frame))

    async def affect(self, rule: Rule, frame: bytes, header: RequestHeader, observed: list[dict[str, Any]]) -> None:
        action = ACTIONS[rule.spec["kind"]]
        event = self.proxy.event(rule, self, header, frame, action.verb(rule), logged=action.logged_at_match(rule))
        taken = Taken(rule, frame, header, event, observed)
        if action.answers_itself(self, taken):
            return
        # awaited from now on, not from its release: a heal that removes the rule waits for the
        # answer of what it held (counted later, a heal could return before the release ran)
        rule.unanswered += 1
        await action.wait(self, taken)
        self.pending.append(Pending(header, rule, record=event, drop=action.drops, observed=observed))
        self.uwriter.write(frame_bytes(frame))
        action.sent(self, taken)

    async def responses(self) -> None:
        """Broker -> client, matched to the requests in order."""
        while True:
            frame = await read_frame(self.ureader)
            if frame is None:  # the broker closed (or died): so does the client's connection
                self.cwriter.close()
                return
            head = self.pending.popleft() if self.pending else None
            if head is not None:
                ReleaseOn.on_answer(self.proxy.rules.values(), self, head.header, frame)
            if head is not None and self.proxy.front is not None:
                frame = await self.proxy.front.answers.on_answer(self, head.header, frame)
            # read once, for the rule's record, a conditional drop's judgement and the observers
            answer = parse_response(frame, head.header) if head is not None and (
                head.record is not None or head.observed) else {}
            if head is not None and head.rule is not None:
                ACTIONS[head.rule.spec["kind"]].answered(self, head, answer)
            if head is not None and head.record is not None and head.rule is not None:
                head.record["answer"] = answer
                head.record["answered_after_ms"] = round((time.time() - head.record["time"]) * 1000)
                head.rule.unanswered -= 1
                self.proxy.log(head.record)
            if head is not None and head.drop:
                self.deaf, self.deaf_by = True, head.rule.id
            if head is not None:
                Observe.on_answer(self, head, answer)
            self.to_client(frame_bytes(frame))
            self.flush_forged()
            if not self.client_open and not self.pending:
                return

    async def run(self) -> None:
        responder = asyncio.get_running_loop().create_task(self.responses())
        try:
            await self.requests()
        except (ConnectionError, OSError):
            pass
        finally:
            self.client_open = False
            # the client is gone: what was sent still gets its answer (recorded), then close
            if self.pending and not responder.done():
                try:
                    await asyncio.wait_for(asyncio.shield(responder), DRAIN_S)
                except asyncio.TimeoutError:
                    pass
            responder.cancel()
            Observe.on_close(self)
            for writer in (self.uwriter, self.cwriter):
                try:
                    writer.close()
                except Exception:
                    pass
            self.proxy.connections.discard(self)


class MessageProxy:
    def __init__(self, routes: list[Route], events_path: Path, front: "Front | None" = None):
        self.routes = routes
        self.front = front
        self.rules: dict[str, Rule] = {}
        self.removed: dict[str, Rule] = {}
        self.connections: set[Connection] = set()
        self.events_file = open(events_path, "a", buffering=1)
        self.forwarded = 0

    def match(self, route: Route, header: RequestHeader) -> Rule | None:
        """The first fault rule (not ``observe``) that takes this request."""
        self.forwarded += 1
        for rule in self.rules.values():
            if rule.spec["kind"] in ACTIONS and rule.matches(route, header):
                return rule
        return None

    def observe(self, conn: "Connection", header: RequestHeader, frame: bytes) -> list[dict[str, Any]]:
        """The events of the ``observe`` rules watching this request (logged with its answer)."""
        return [self.event(rule, conn, header, frame, "observed", logged=False) for rule in self.rules.values()
                if rule.spec["kind"] == Observe.kind and rule.matches(conn.route, header)]

    def event(self, rule: Rule, conn: Connection, header: RequestHeader, frame: bytes, action: str,
              logged: bool = True) -> dict[str, Any]:
        event = {"time": time.time(), "rule": rule.id, "kind": rule.spec["kind"], "action": action,
                 "node": conn.node, "link": conn.route.link,
                 **({"source": conn.route.source} if conn.route.source is not None else {}),
                 "connection": conn.id, "client_id": header.client_id,
                 "api": API_NAMES.get(header.api_key, str(header.api_key)), "api_key": header.api_key,
                 "api_version": header.api_version, "correlation_id": header.correlation_id,
                 **describe_request(frame, header)}
        if logged:
            rule.events.append(event)
            self.log(event)
        return event

    def log(self, event: dict[str, Any]) -> None:
        self.events_file.write(json.dumps(event, default=str) + "\n")

    async def connect_upstream(self, route: Route) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if self.front is not None:
            return await self.front.connect(route)
        return await asyncio.open_connection(route.upstream_host, route.upstream)

    async def client_connected(self, route: Route, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            ureader, uwriter = await self.connect_upstream(route)
        except OSError as exc:
            if type(exc).__name__.startswith("SSL"):  # not a broker that is down: say why, once per attempt
                print(f"TLS to {route.upstream_host}:{route.upstream} failed: {exc}", flush=True)
            cwriter.close()  # the broker is down: the client sees a refused connection's effect
            return
        conn = Connection(self, route, creader, cwriter, ureader, uwriter)
        self.connections.add(conn)
        await conn.run()

    async def remove(self, rule_id: str) -> list[dict[str, Any]]:
        rule = self.rules.pop(rule_id, None) or self.removed.get(rule_id)
        if rule is None:
            raise KeyError(rule_id)
        self.removed[rule_id] = rule
        rule.released.set()
        deadline = time.monotonic() + ANSWER_WAIT_S
        while rule.unanswered > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for conn in [c for c in self.connections if c.deaf_by == rule_id]:
            conn.hang_up()
        return rule.events

    # -- control API (tiny HTTP/1.1, one request per connection) ----------------------------
    async def control(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        status, body = 200, {}
        try:
            request_line = (await reader.readline()).decode().split()
            length = 0
            while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode().partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value.strip())
            payload = json.loads(await reader.readexactly(length)) if length else None
            status, body = await self.route(request_line[0], request_line[1], payload)
        except Exception as exc:  # a bad control request must never take the proxy down
            status, body = 500, {"error": repr(exc)}
        data = json.dumps(body, default=str).encode()
        writer.write(f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + data)
        await writer.drain()
        writer.close()

    async def route(self, method: str, path: str, payload: Any) -> tuple[int, Any]:
        if method == "GET" and path == "/version":
            return 200, {"version": 1, "pid": os.getpid()}
        if method == "GET" and path == "/rules":
            return 200, [r.spec for r in self.rules.values()]
        if method == "GET" and path.startswith("/rules/") and path.endswith("/events"):
            rule = self.rules.get(path[len("/rules/"):-len("/events")])
            return (200, list(rule.events)) if rule is not None else (404, {"error": "no such rule"})
        if method == "GET" and path == "/stats":
            return 200, {"connections": len(self.connections), "requests": self.forwarded,
                         "held": sum(1 for r in self.rules.values() for e in r.events if e["action"] == "held")}
        if method == "POST" and path == "/rules":
            try:
                spec = validate_rule(payload or {})
            except ValueError as exc:
                return 400, {"error": str(exc)}
            if spec["id"] in self.rules:
                return 409, {"error": f"rule {spec['id']} exists"}
            self.rules[spec["id"]] = Rule(spec, frozenset(API_KEYS[a] for a in spec["apis"]))
            return 200, spec
        if method == "DELETE" and path.startswith("/rules/"):
            try:
                return 200, {"events": await self.remove(path.removeprefix("/rules/"))}
            except KeyError:
                return 404, {"error": f"no rule {path.removeprefix('/rules/')}"}
        if method == "GET" and path == "/front":
            return (200, self.front.describe()) if self.front is not None else (404, {"error": "not a front"})
        if method == "POST" and path == "/front/advertise" and self.front is not None:
            self.front.advertised[int(payload["node"])] = int(payload["port"])
            return 200, self.front.describe()
        if method == "POST" and path == "/reset":  # every fault's rule; an observe rule records on
            events = []
            for rule_id in [r.id for r in self.rules.values() if r.spec["kind"] in ACTIONS]:
                events += await self.remove(rule_id)
            return 200, {"events": events}
        return 404, {"error": f"no route {method} {path}"}


async def serve(routes: list[Route], control_port: int, events_path: Path, front_bootstrap: str | None = None,
                advertised_host: str = HOST, source_address: str | None = None, tls: FrontTLS | None = None) -> None:
    proxy = MessageProxy(routes, events_path)
    listen_tls: dict[str, Route] = {}
    if front_bootstrap is not None:
        listen, _, servers_text = front_bootstrap.partition("=")
        bootstrap = [(h, int(p)) for h, _, p in (s.strip().rpartition(":") for s in servers_text.split(","))]
        proxy.front = Front(proxy, bootstrap, advertised_host, source_address, tls)
        front_route = Route("bootstrap", -1, "client", None, int(listen), bootstrap[0][1], bootstrap[0][0])
        routes = [*routes, front_route]
        listen_tls["bootstrap"] = front_route
    servers = [await asyncio.start_server(proxy.control, HOST, control_port)]
    for route in routes:
        servers.append(await asyncio.start_server(
            lambda r, w, route=route: proxy.client_connected(route, r, w), HOST, route.listen,
            ssl=tls.listen if tls is not None and route.name in listen_tls else None))
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"message proxy ready: control {control_port}, routes "
          f"{', '.join(f'{r.name} {r.listen}->{r.upstream}' for r in routes)}", flush=True)
    await stop.wait()
    for server in servers:
        server.close()


