"""The ``txn`` workload (issue 77, item 2): transactions that send to and poll shared partitions.

Its workers (workloads/txn_worker.py) write their own values, so there is no seeder and no input:
the driver creates the one topic whose partitions are the keys, starts the workers, and at the end
waits for every partition to be stable and dumps it in both views. It reuses the
consume-transform-produce driver's machinery (worker pool, work monitor, heal-time liveness,
dumps, the brokers' transaction state) and says, rather than pretends, where that driver's
consumer-group pieces do not apply: ``final.json``'s ``txn.not_applicable`` lists them with the
reason (there is no group to describe or whose offsets to read, no input to drain, no seeder).
"""

from __future__ import annotations

import time
from typing import Any, Callable

from kchaos.clusters.clients import create_topic
from kchaos.log import say
from kchaos.workloads.ctp import CtpWorkload
from kchaos.workloads.dump import dump_all
from kchaos.workloads.pool import WorkerPool
from kchaos.workloads.work_monitor import WorkMonitor

#: what the consume-transform-produce driver does that this workload has nothing for, and why
NOT_APPLICABLE = {
    "drain": "the workers write their own values and read what is there: no input waits to be processed, so the "
             "drain returns at once (its bound judges nothing here)",
    "group_offsets": "the workers' consumers are assigned their partitions and commit no offsets: there is no group",
    "group_views": "no consumer group to describe",
    "progress": "no group offsets to sample (the pacing reads the workers' commits from their histories)",
    "seeder": "no seeder: the workers write their own values",
    "observers": "no observers: the workers' own polls are the reads the isolation checker judges",
}


class TxnWorkload(CtpWorkload):
    @property
    def user_topics(self) -> list[str]:
        return [self.spec.txn_topic]

    def setup(self) -> None:
        rf = min(3, len(self.cluster.brokers) or 3)
        create_topic(self.cluster, self.spec.txn_topic, self.spec.txn_partitions, rf)
        self.history.event("setup", {"topics": self.user_topics, "replication_factor": rf,
                                     "txid_prefix": self.txid_prefix, "kind": "txn"}, outcome="ok")

    def start(self) -> None:
        history_dir = self.run.path / "history"
        self.pool = WorkerPool(self.spec, self.cluster.client_config_refs(), self.run.path, self.seed,
                               self.txid_prefix, self.history)
        self.work = WorkMonitor(history_dir, own_workers=True)
        self.pool.start()

    # -- progress: the workers' commits, not a group's offsets ---------------------------------
    def committed_offsets(self) -> dict[int, int]:
        return {}

    def remaining_inputs(self) -> int | None:
        return 0

    def drain_left(self) -> tuple[int, int | None] | None:
        return 0, 0

    def drain_status(self) -> str:
        return "nothing to drain (kind txn: no inputs)"

    def processed_inputs(self) -> int | None:
        return None

    def halt_seeding(self) -> None:
        """No seeder."""

    def snapshot(self) -> dict[str, Any]:
        """For live progress lines: the transactions the workers' histories show committed."""
        committed = None
        if self.work is not None:
            self.work.refresh()
            committed = self.work.commits_between(0.0, time.time())
        return {"seeded": 0, "restarts": self.pool.restarts if self.pool else 0,
                "progress": f"{'?' if committed is None else committed} transactions committed"}

    def describe_group(self) -> dict[str, Any]:
        return {"at": round(time.time(), 3), "error": "kind txn: " + NOT_APPLICABLE["group_views"]}

    def drain(self, timeout_s: float, cancel: Callable[[], bool] | None = None) -> bool:
        """Nothing to wait for; recorded as such (``final.json`` ``progress.drain``)."""
        now = round(time.time(), 3)
        self.drain_record = {"started": now, "ended": now, "timeout_s": timeout_s, "drained": True,
                             "not_applicable": NOT_APPLICABLE["drain"]}
        return True

    def wait_stable(self, timeout_s: float) -> dict[str, Any]:
        """The txn topic's partitions only: no group, so no ``__consumer_offsets`` partition of its own."""
        return self._stable_within(timeout_s)

    def final_reads(self, liveness_timeout_s: float | None = None, recover_hanging: bool = False) -> dict[str, Any]:
        """Stable partitions, both views of the topic dumped, the brokers' own transaction state."""
        liveness, recovery = self._stable_then_recovered(liveness_timeout_s, recover_hanging,
                                                         f"every partition of {self.spec.txn_topic} to be stable")
        say("final reads: reading the txn topic in both views")
        summary = dump_all(self.client, self.cluster.admin(), self.user_topics, self.run.path / "topics")
        summary["liveness"] = liveness
        if recovery is not None:
            summary["recovery"] = recovery
        summary["progress"] = {"sample_s": None, "drain": self.drain_record, "samples": []}
        summary["txn"] = {"topic": self.spec.txn_topic, "partitions": self.spec.txn_partitions,
                          "not_applicable": NOT_APPLICABLE}
        summary["brokers_at_end"] = self.brokers_at_end()
        summary["worker_restarts"] = self.pool.restarts if self.pool else 0
        try:
            summary["compaction"] = self.cluster.cleaned_offsets()
        except Exception as exc:
            summary["compaction"] = {"error": repr(exc)}
        pinned = [(name.rsplit("-", 1)[0], int(name.rsplit("-", 1)[1])) for name in (liveness.get("pinned") or {})]
        summary["broker_transactions"] = self._broker_transactions(pinned)
        return summary

    def stop(self) -> None:
        if self.pool is not None:
            self.pool.stop()
