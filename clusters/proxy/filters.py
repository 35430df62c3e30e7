"""The message proxy's filters, one per concern. A connection runs the same steps for every
request and every answer; what happens at each step is a filter's business:

* ``RuleAction``, one per fault rule kind (``ACTIONS``): what the rule that took a request does
  to it (delay, hold, drop-response, duplicate, error) before it is sent, after it is sent, and
  when its answer comes;
* ``Observe``: the ``observe`` rules' record of the requests they watch, with their answers;
* ``ReleaseOn``: an answer that releases the holds of the same client waiting for it.

The front's answers filter (front mode) is in front.py. A new rule kind is a new filter here,
not a branch in the connection's loop. A connection is handed to the filters, never imported:
nothing here imports the server."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable

from kchaos.clusters.proxy.exchange import DRAIN_S, AwaitedAnswer, Pending, frame_bytes, read_frame
from kchaos.clusters.proxy.rules import Rule
from kchaos.protocol.api import API_NAMES, NotForgeable, RequestHeader, error_response, parse_response


@dataclass
class Taken:
    """A request a fault rule took, as its action sees it: the rule, the request and its event."""

    rule: Rule
    frame: bytes
    header: RequestHeader
    event: dict[str, Any]
    #: the events of the ``observe`` rules watching the same request
    observed: list[dict[str, Any]]


class RuleAction:
    """What a fault rule of one kind does to a request it took. ``conn`` is the server's
    ``Connection``: its proxy, route, pending requests and client side."""

    kind: ClassVar[str]
    #: the response to a request it took is swallowed, and every later one on the connection
    drops: ClassVar[bool] = False

    def verb(self, rule: Rule) -> str:
        """The event's action: what was done to the request."""
        raise NotImplementedError

    def logged_at_match(self, rule: Rule) -> bool:
        """Whether the event is recorded when the rule takes the request (else once its answer comes)."""
        return True

    def answers_itself(self, conn: Any, taken: Taken) -> bool:
        """Answer the request without sending it (True: nothing goes to the broker)."""
        return False

    async def wait(self, conn: Any, taken: Taken) -> None:
        """Before the request is sent."""

    def sent(self, conn: Any, taken: Taken) -> None:
        """After the request is sent."""

    def answered(self, conn: Any, head: Pending, answer: dict[str, Any]) -> None:
        """The broker's answer to a request it took, read (before it is recorded)."""


def _released(conn: Any, taken: Taken) -> None:
    """A delayed or held request goes on now: when, and whether its client was still there."""
    taken.event["released_after_ms"] = round((time.time() - taken.event["time"]) * 1000)
    taken.event["client_connected_at_release"] = conn.client_open and not conn.creader.at_eof()


class Delay(RuleAction):
    kind = "delay"

    def verb(self, rule: Rule) -> str:
        return "delayed"

    async def wait(self, conn: Any, taken: Taken) -> None:
        await asyncio.sleep(taken.rule.spec["delay_ms"] / 1000)
        _released(conn, taken)


class Hold(RuleAction):
    kind = "hold"

    def verb(self, rule: Rule) -> str:
        return "held"

    async def wait(self, conn: Any, taken: Taken) -> None:
        """Until the rule is removed, ``release_after_ms`` passes, or (``release_on``) the broker
        answers NONE to one of those APIs from the same client."""
        rule, header, event = taken.rule, taken.header, taken.event
        waits = [asyncio.ensure_future(rule.released.wait())]
        awaited = AwaitedAnswer()
        if rule.spec.get("release_on"):
            rule.awaiting.setdefault(header.client_id or "", []).append(awaited)
            waits.append(asyncio.ensure_future(awaited.arrived.wait()))
        await asyncio.wait(waits, timeout=rule.spec["release_after_ms"] / 1000 or None,
                           return_when=asyncio.FIRST_COMPLETED)
        for wait in waits:
            wait.cancel()
        if awaited.cause is not None:
            event["released_by"] = awaited.cause
        elif awaited in rule.awaiting.get(header.client_id or "", []):
            rule.awaiting[header.client_id or ""].remove(awaited)
        _released(conn, taken)


class DropResponse(RuleAction):
    kind = "drop-response"
    drops = True

    def verb(self, rule: Rule) -> str:
        return "sent, response dropped"

    def logged_at_match(self, rule: Rule) -> bool:
        # a conditional drop is recorded once its answer says what became of it
        return not rule.spec.get("answer_carries")

    def answered(self, conn: Any, head: Pending, answer: dict[str, Any]) -> None:
        if head.drop and head.rule is not None and head.rule.spec.get("answer_carries"):
            head.rule.judge_answer(head, answer, delivered=conn.client_open and not conn.deaf)


class Duplicate(RuleAction):
    kind = "duplicate"

    def verb(self, rule: Rule) -> str:
        return "sent and duplicated"

    def sent(self, conn: Any, taken: Taken) -> None:
        asyncio.get_running_loop().create_task(self.duplicate(conn, taken.rule, taken.frame, taken.header,
                                                              taken.event))

    async def duplicate(self, conn: Any, rule: Rule, frame: bytes, header: RequestHeader,
                        event: dict[str, Any]) -> None:
        await asyncio.sleep(rule.spec["duplicate_after_ms"] / 1000)
        copy = conn.proxy.event(rule, conn, header, frame, "duplicate sent")
        copy["original_time"] = event["time"]
        rule.unanswered += 1
        try:
            reader, writer = await conn.proxy.connect_upstream(conn.route)
            writer.write(frame_bytes(frame))
            answer = await asyncio.wait_for(read_frame(reader), DRAIN_S)
            writer.close()
            copy["answer"] = parse_response(answer, header) if answer else {"error": "no answer"}
        except (OSError, asyncio.TimeoutError) as exc:
            copy["answer"] = {"error": f"not delivered: {exc!r}"}
        rule.unanswered -= 1
        conn.proxy.log(copy)


class ForgedError(RuleAction):
    kind = "error"

    def verb(self, rule: Rule) -> str:
        return f"answered {rule.spec['error']}"

    def logged_at_match(self, rule: Rule) -> bool:
        return False  # recorded once it is known whether the answer could be forged

    def answers_itself(self, conn: Any, taken: Taken) -> bool:
        rule, header, event = taken.rule, taken.header, taken.event
        try:  # a per-partition answer echoes the request's partitions
            forged = error_response(header, rule.spec["error"], taken.frame)
        except NotForgeable as exc:
            # a Produce with acks=0 (no answer to forge), a version whose layout kchaos does not
            # know, a body it cannot read: not affected, not counted, sent on as if no rule took it
            rule.hits[header.client_id or ""] -= 1
            event.update(action="passed", refused=str(exc))
            rule.events.append(event)
            conn.proxy.log(event)
            conn.forward(taken.frame, header, taken.observed)
            return True
        rule.events.append(event)
        conn.proxy.log(event)
        for seen in taken.observed:  # answered by the proxy, never by the broker
            seen.update(answer={"error": rule.spec["error"], "forged": True}, delivered=True)
            conn.proxy.log(seen)
        conn.pending.append(Pending(header, rule, forged=forged))
        conn.flush_forged()
        return True


#: every fault rule kind's action (the ``observe`` kind is Observe's)
ACTIONS: dict[str, RuleAction] = {a.kind: a for a in (Delay(), Hold(), DropResponse(), Duplicate(), ForgedError())}


class Observe:
    """The ``observe`` rules: no fault; each request they watch and its answer pass untouched and
    are recorded, with whether the client got the answer."""

    kind = "observe"

    @staticmethod
    def on_answer(conn: Any, head: Pending, answer: dict[str, Any]) -> None:
        for seen in head.observed:
            seen.update(answer=answer, delivered=conn.client_open and not conn.deaf,
                        answered_after_ms=round((time.time() - seen["time"]) * 1000))
            conn.proxy.log(seen)

    @staticmethod
    def on_close(conn: Any) -> None:
        for waiting in conn.pending:  # sent, never answered (the broker died or the proxy gave up)
            for seen in waiting.observed:
                seen.update(answer=None, delivered=False)
                conn.proxy.log(seen)


class ReleaseOn:
    """Proxy-wide: a broker's answer NONE releases the holds of the same client that wait for it
    (a ``hold`` rule's ``release_on``)."""

    @staticmethod
    def on_answer(rules: Iterable[Rule], conn: Any, header: RequestHeader, frame: bytes) -> None:
        client = header.client_id or ""
        api = API_NAMES.get(header.api_key)
        waiting = [r for r in rules if r.awaiting.get(client) and api in r.spec["release_on"]]
        answer = parse_response(frame, header) if waiting else {}
        if answer.get("error") != "NONE":
            return
        for rule in waiting:
            for held in rule.awaiting.pop(client):
                held.cause = {"api": api, "node": conn.node, "correlation_id": header.correlation_id,
                              "at": time.time(), **answer}
                held.arrived.set()
