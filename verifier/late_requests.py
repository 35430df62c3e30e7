"""What each late request did: the requests a message fault delivered late (held, delayed) or
twice (duplicated), the broker's answer, and what the transaction coordinator wrote for that
transactional id right after the request arrived.

A late EndTxn answered ``NONE`` and followed within ``ENDED_WITHIN_MS`` by a ``PrepareCommit``
or ``PrepareAbort`` of the same producer id and epoch, of a transaction that began after the
request was sent (its ``txnStartTimestamp``), *ended a transaction*: the coordinator applied it
to a later transaction open then. One that prepares the transaction it was sent for was only
slow (its client still waited for it: ``ended_its_own``). (A late EndTxn repeating a transaction
that had already ended writes nothing: the coordinator answers a retry from its completed state.)
This is KAFKA-17754's mechanism (docs/findings.md); the anomalies it causes are named by the
checks, this module says which request caused them. Whether a visible anomaly follows depends
on what the client then does with the transaction it still thinks open: ``client_then`` is its
next commit or abort of that transactional id. A late abort followed by the client's commit is
a lost write (the offsets commit in a new transaction, the outputs were aborted); a late commit
followed by the client's abort is an aborted read. The same direction leaves nothing visible.

Both engines report the same facts from this one function (it reads the proxy's event log and
the decoded ``__transaction_state``, both small).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

#: how soon after a late EndTxn arrived a Prepare* record counts as its doing
ENDED_WITHIN_MS = 50
#: the arrival time is the proxy's (when it wrote the request upstream); the coordinator's own
#: timestamp of the record it wrote for it was seen up to 6 ms *earlier* on this machine
CLOCK_SLACK_MS = 20
#: transaction-log records shown after a late request
WINDOW_MS = 500
LATE_ACTIONS = ("held", "delayed", "duplicate sent")


def events_path(run: Path) -> Path:
    return Path(run) / "cluster" / "messages" / "events.jsonl"


def read_message_events(run: Path) -> list[dict[str, Any]]:
    """The proxy's events, one per request and action (the last record of each: a held request
    is logged when held and again when answered)."""
    path = events_path(run)
    if not path.exists():
        return []
    latest: dict[tuple[Any, ...], dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue  # a line cut by a kill
        latest[(event.get("rule"), event.get("connection"), event.get("correlation_id"), event.get("action"))] = event
    return sorted(latest.values(), key=lambda e: e["time"])


def arrival_ms(event: dict[str, Any]) -> float:
    """When the broker got the request: a held or delayed one on release, a copy when sent."""
    return event["time"] * 1000 + (event.get("released_after_ms") or 0)


def late_requests(events: list[dict[str, Any]], txn_log: list[dict[str, Any]] | None,
                  ops: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per late or duplicated request that reached the broker, with the coordinator's
    records for its transactional id in the ``WINDOW_MS`` after it arrived, and (from the
    paired history ``ops``) what its client did next."""
    ends: dict[str, list[dict[str, Any]]] = {}
    for op in sorted(ops or [], key=lambda o: o["invoke_time"]):
        if op["f"] in ("commit", "abort") and op.get("txid"):
            ends.setdefault(op["txid"], []).append(op)
    by_txid: dict[str, list[Any]] = {}
    for r in txn_log or []:
        entry = r["entry"]
        if entry.producer_id is not None:
            by_txid.setdefault(entry.transactional_id, []).append((r["offset"], entry))
    rows = []
    for e in events:
        if e.get("action") not in LATE_ACTIONS or not e.get("answer"):
            continue
        arrived = arrival_ms(e)
        follow = [{"offset": offset, "status": x.status, "producer_epoch": x.producer_epoch,
                   "partitions": x.partitions, "after_ms": round(x.last_update_ms - arrived), "start_ms": x.start_ms}
                  for offset, x in by_txid.get(e.get("transactional_id") or "", [])
                  if -CLOCK_SLACK_MS <= x.last_update_ms - arrived <= WINDOW_MS]
        row = {k: e.get(k) for k in ("rule", "action", "api", "api_version", "node", "client_id", "correlation_id",
                                     "transactional_id", "producer_id", "producer_epoch", "committed",
                                     "client_connected_at_release")}
        # when the client first sent it: a held or delayed request when it was held, a copy's original
        sent = round((e.get("original_time") or e["time"]) * 1000)
        ended = ended_transaction(e, follow)
        row.update(sent_ms=sent, arrived_ms=round(arrived), answer=e["answer"].get("error"), transaction_log=follow,
                   ended_a_transaction=ended is not None and ended["start_ms"] > sent,
                   ended_its_own=ended is not None and ended["start_ms"] <= sent,
                   client_then=None, against_the_client=False)
        if row["ended_a_transaction"]:
            # the client's decision still pending when the request arrived: the first end of a
            # transaction (commit or abort) that completed after it (one in flight counts)
            nxt = next((op for op in ends.get(row["transactional_id"] or "", [])
                        if (op.get("complete_time") or op["invoke_time"]) * 1000 >= arrived - CLOCK_SLACK_MS), None)
            if nxt is not None:
                row["client_then"] = {"f": nxt["f"], "process": nxt["process"], "txn_seq": nxt["value"].get("txn_seq"),
                                      "outcome": nxt["outcome"], "after_ms": round(nxt["invoke_time"] * 1000 - arrived)}
                row["against_the_client"] = (nxt["f"] == "commit") != bool(e.get("committed"))
        rows.append(row)
    return rows


def ended_transaction(event: dict[str, Any], follow: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The Prepare record an EndTxn answered ``NONE`` caused (its kind, same epoch, just after it
    arrived), or None."""
    if event.get("api") != "EndTxn" or event["answer"].get("error") != "NONE":
        return None
    wanted = "PrepareCommit" if event.get("committed") else "PrepareAbort"
    return next((f for f in follow if f["status"] == wanted and f["producer_epoch"] == event.get("producer_epoch")
                 and -CLOCK_SLACK_MS <= f["after_ms"] <= ENDED_WITHIN_MS), None)


def late_request_facts(run: Path, txn_log: list[dict[str, Any]] | None,
                       ops: list[dict[str, Any]] | None = None) -> dict[str, Any] | None:
    """The ``late_requests`` fact of results.json: counts and the rows. None without message faults."""
    events = read_message_events(run)
    if not events:
        return None
    rows = late_requests(events, txn_log, ops)
    return {"affected": len({(e.get("rule"), e.get("connection"), e.get("correlation_id")) for e in events}),
            "late_or_duplicated": len(rows), "accepted": sum(1 for r in rows if r["answer"] == "NONE"),
            "ended_a_transaction": sum(1 for r in rows if r["ended_a_transaction"]),
            "ended_its_own": sum(1 for r in rows if r["ended_its_own"]),
            "ended_against_the_client": sum(1 for r in rows if r["against_the_client"]), "requests": rows}
