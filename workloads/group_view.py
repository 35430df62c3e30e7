"""The group coordinator's view of a consumer group, read in a process of its own.

librdkafka 2.16's admin group calls can abort the whole process while group coordinators move
(``rd_kafka_enq_once_del_source_return: Assertion eonce->refcnt > 0``: seen in the harness when
it asked for the group's offsets, and again, 2026-11-28, when the drain described the group
right after the final heal). So the harness never calls them itself: it runs this module,
hands it the client settings on stdin (secrets stay off the command line) and reads one JSON
line back; a process that aborts or hangs is an error recorded in the view, not a dead run.

    python -m kchaos.workloads.group_view < {"client": {...}, "group": "g", "topic": "in"}
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

#: how long one describe may take, the process's start included
DESCRIBE_TIMEOUT_S = 30.0


def describe_consumer_group(client: dict[str, Any], group: str, topic: str) -> dict[str, Any]:
    """The group's state and each member with the partitions of ``topic`` the coordinator
    assigns it, from a child process; ``{"error": ...}`` when it could not say."""
    request = json.dumps({"client": client, "group": group, "topic": topic})
    try:
        proc = subprocess.run([sys.executable, "-m", "kchaos.workloads.group_view"], input=request, text=True,
                              capture_output=True, timeout=DESCRIBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"error": f"the describe did not answer in {DESCRIBE_TIMEOUT_S:.0f}s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = " ".join((proc.stderr or proc.stdout).split())[-300:]
        return {"error": f"the describe's process exited with {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def _describe(request: dict[str, Any]) -> dict[str, Any]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**request["client"], "log_level": 3})
    group = admin.describe_consumer_groups([request["group"]], request_timeout=15)[request["group"]].result(20)
    members = [{"member_id": m.member_id, "client_id": m.client_id,
                "partitions": sorted(tp.partition for tp in (m.assignment.topic_partitions if m.assignment else [])
                                     if tp.topic == request["topic"])}
               for m in group.members]
    return {"state": getattr(group.state, "name", str(group.state)),
            "members": sorted(members, key=lambda m: m["client_id"] or "")}


def main() -> int:
    try:
        print(json.dumps(_describe(json.loads(sys.stdin.read()))), flush=True)
    except Exception as exc:  # said on stdout as the view's error
        print(json.dumps({"error": " ".join(repr(exc).split())[:500]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
