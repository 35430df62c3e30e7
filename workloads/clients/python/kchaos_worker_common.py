"""What kchaos' Python client workers (aiokafka, kafka-python) share: the worker's config, the
history writer, the lineage contract and the exit codes. They run in a virtualenv of their own
(workloads/native_clients.py), without kchaos installed, so this mirrors workloads/history.py and
workloads/lineage.py instead of importing them (docs/workload.md, "History")."""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import threading
import time
from typing import Any

EXIT_STOPPED, EXIT_FENCED, EXIT_FATAL, EXIT_UNKNOWN = 0, 10, 11, 12


class Exit(Exception):
    """Ends the worker: ``code`` is its exit code, ``f`` the history event (fenced, fatal, exit-unknown)."""

    def __init__(self, code: int, f: str, reason: str):
        super().__init__(reason)
        self.code = code
        self.f = f


class _FewPerSecond(logging.Filter):
    """Lets at most PER_SECOND records of one message template through each second: a dead
    broker behind the proxy makes a client log its connect failure thousands of times a second
    (each line naming a new local port), while the lines that matter come a few at once (one per
    expired batch). Keyed on the template, so what it keeps stays bounded."""

    PER_SECOND = 20

    def __init__(self) -> None:
        super().__init__()
        self.window: dict[tuple[str, Any], tuple[int, int]] = {}  # template -> (second, lines let through)

    def filter(self, record: logging.LogRecord) -> bool:
        key, second = (record.name, record.msg), int(record.created)
        at, n = self.window.get(key, (second, 0))
        n = n + 1 if at == second else 1
        self.window[key] = (second, n)
        return n <= self.PER_SECOND


def log_client_warnings(logger: str) -> None:
    """The client library's warnings and errors on stderr (the worker's log), each line stamped
    with its epoch time as the history is: what the client saw that its API did not say (a
    request it dropped, a connection it lost)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(created).3f %(levelname)s %(name)s %(message)s"))
    handler.addFilter(_FewPerSecond())
    root = logging.getLogger(logger)
    root.setLevel(logging.WARNING)
    root.addHandler(handler)


def load_config() -> dict[str, Any]:
    path = sys.argv[1] if len(sys.argv) > 1 else os.environ["KCHAOS_WORKER_CONFIG"]
    with open(path) as fh:
        config = json.load(fh)
    for key in config["client"]:
        if key != "bootstrap.servers":
            # a secured cluster's settings are librdkafka's; these workers speak plaintext only
            print(f"client setting {key!r} is not supported by this worker (plaintext clusters only)", file=sys.stderr)
            sys.exit(EXIT_FATAL)
    return config


def prop(config: dict[str, Any], table: str, name: str) -> int | None:
    """A client property of kchaos' resolved tables (Kafka's names) as a whole number, if set."""
    value = (config.get("properties") or {}).get(table, {}).get(name)
    return None if value is None else int(float(value))


def rng(config: dict[str, Any]) -> random.Random:
    return random.Random(f"{config['seed']}:{config['worker']}:{config['incarnation']}")


class History:
    """Appends JSON lines, one write(2) per line on an O_APPEND descriptor."""

    def __init__(self, path: str, process: str):
        self.process = process
        self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._next = 0
        self._lock = threading.Lock()

    def _write(self, record: dict[str, Any]) -> None:
        line = (json.dumps(record, separators=(",", ":"), default=str) + "\n").encode()
        with self._lock:
            if self._fd is not None:
                os.write(self._fd, line)

    def invoke(self, f: str, value: dict[str, Any] | None = None, **fields: Any) -> int:
        with self._lock:
            op = self._next
            self._next += 1
        self._write({**fields, "time": time.time(), "process": self.process, "op": op, "type": "invoke", "f": f,
                     "value": value or {}})
        return op

    def complete(self, op: int, f: str, outcome: str, value: dict[str, Any] | None = None,
                 error: BaseException | str | None = None, **fields: Any) -> None:
        record = {**fields, "time": time.time(), "process": self.process, "op": op, "type": outcome, "f": f,
                  "value": value or {}}
        if error is not None:
            record["error"] = f"{type(error).__name__}: {error}" if isinstance(error, BaseException) else error
        self._write(record)

    def event(self, f: str, value: dict[str, Any] | None = None, outcome: str = "info", **fields: Any) -> None:
        op = self.invoke(f, value, **fields)
        self.complete(op, f, outcome, value, **fields)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def record_settings(history: History, config: dict[str, Any], client: str, session_timeout_ms: int,
                    rebalance_timeout_ms: int) -> None:
    """The process's first history line: how its consumer joins the group (the slot's KIP-345
    group instance id, or None for a dynamic member) and which of the campaign's settings it runs
    without (docs/clients.md)."""
    history.event("settings", {"group_id": config["workload"]["group_id"],
                               "group_instance_id": config.get("group_instance_id"),
                               "session_timeout_ms": session_timeout_ms, "rebalance_timeout_ms": rebalance_timeout_ms,
                               "not_honoured": config.get("not_honoured") or {}},
                  "ok", worker=config["worker"], incarnation=config["incarnation"], client=client)


def lineage(in_id: str, topic: str, partition: int, offset: int, slot: int, slots: int, config: dict[str, Any],
            txid: str | None, txn_seq: int) -> bytes:
    return json.dumps({"in_id": in_id, "in_topic": topic, "in_partition": partition, "in_offset": offset,
                       "slot": slot, "slots": slots, "worker": config["worker"],
                       "incarnation": config["incarnation"], "txid": txid, "txn_seq": txn_seq},
                      separators=(",", ":")).encode()


def positions(pairs: list[tuple[int, int]]) -> dict[str, list[int]]:
    """A poll's first and last offset per partition."""
    out: dict[str, list[int]] = {}
    for p, o in pairs:
        first_last = out.setdefault(str(p), [o, o])
        first_last[0] = min(first_last[0], o)
        first_last[1] = max(first_last[1], o)
    return out


def exit_process(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
