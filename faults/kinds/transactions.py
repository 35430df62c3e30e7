"""Faults on the brokers' transaction state. ``orphan-transaction``
writes a transactional batch straight to a partition leader with no coordinator told (what a
Produce delayed past its transaction's end does in KIP-664 / KAFKA-9144), so the partition's
last stable offset stops there: a hanging transaction, on purpose. It shows that the
hanging-transaction check names one on a real broker and that the KIP-664 recovery
(``faults.recover_hanging``) gets the partition going again. A broker with partition
verification on (KIP-890 part 1, the default) refuses the batch; the fault records the
broker's answer either way. It is never healed: what it leaves is the point.

``epoch-jump`` brings one worker's transactional id to just before KIP-890's producer-epoch
boundary *while the worker runs*, with InitProducerId after InitProducerId (as the epoch ageing
does before a run, workloads/epoch_ageing.py; here the worker is fenced and restarts, as it would
if another instance of it started), then watches the coordinator (DescribeTransactions every
10 ms) for the transaction the restarted worker begins at the boundary and sends one more
InitProducerId the moment it is ongoing: an InitProducerId during an ongoing transaction at
epoch 32766, KAFKA-19367's shape (fenced twice, the epoch went past 32767). The transaction at
the boundary lasts one transaction (its end rotates the producer id), so a fixed delay misses it
(measured: 3 s after the jump the restarted Java worker had not begun one). After a rotation
the id has a fresh producer id, so repeated jumps cross the boundary again and again."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field, field_validator

from kchaos.errors import ClusterError, ConfigError
from kchaos.faults.base import Fault, resolve_node_target
from kchaos.faults.kinds import FENCES_TRANSACTIONAL_ID, FaultKind, NoParams, register
from kchaos.protocol.raw_init import CoordinatorConnection, find_coordinator
from kchaos.protocol.raw_produce import write_orphan_batch
from kchaos.workloads.epoch_ageing import RETRIABLE, age_one, target_epoch

#: producer ids the orphans use: far above the blocks Kafka's controller hands out to coordinators
ORPHAN_PRODUCER_IDS = 1 << 48


class OrphanTransaction(Fault):
    def invoke(self) -> dict[str, Any]:
        target = resolve_node_target(self.ctx, self.scheduled.target, self.rng)
        topic, partition, leader = target["detail"]["topic"], target["detail"]["partition"], target["nodes"][0]
        broker = self.ctx.cluster.admin().list_topics(timeout=10).brokers.get(leader)
        if broker is None:
            raise ClusterError(f"broker {leader}, the leader of {topic}-{partition}, is not in the metadata")
        producer_id = ORPHAN_PRODUCER_IDS + self.rng.randrange(1 << 30)
        answer = write_orphan_batch(broker.host, broker.port, topic, partition, producer_id,
                                    f"kchaos-orphan-{producer_id}", [(b"kchaos-orphan", b"an orphan transaction")])
        self.target = {**target, "detail": {**target["detail"], "producer_id": producer_id, "producer_epoch": 0,
                                            "answer": answer["error"], "offset": answer["base_offset"]}}
        return self.target


class EpochJumpParams(NoParams):
    epochs_before_rollover: float = Field(1, description="bumps left before the exhausted epoch 32766 (0-32000)")
    catch_within_ms: float = Field(
        20_000, description="then watch the coordinator this long for the worker's next transaction and send one more "
                            "InitProducerId the moment it is ongoing; 0: none")

    @field_validator("epochs_before_rollover", "catch_within_ms")
    @classmethod
    def _whole(cls, value: float, info: Any) -> float:
        limit = 32_000 if info.field_name == "epochs_before_rollover" else 120_000
        if value != int(value) or not 0 <= value <= limit:
            raise ValueError(f"{info.field_name} must be a whole number from 0 to {limit}; got {value!r}")
        return value


class EpochJump(Fault):
    def invoke(self) -> dict[str, Any]:
        txids = self.ctx.transactional_ids()
        if not txids or self.ctx.workload is None:
            raise ConfigError("epoch-jump needs a transactional workload")
        txid = self.rng.choice(txids)
        # named before the first InitProducerId: if the jump fails part way, its fences were still
        # sent, and the verifier must know on which id (a failed fault records what it resolved)
        self.target = {"nodes": [], "role": f"transactional id {txid}", "detail": {"transactional_id": txid}}
        brokers = [(b.host, b.port) for b in self.ctx.cluster.admin().list_topics(timeout=30).brokers.values()]
        timeout_ms = self.ctx.workload.spec.transaction_timeout_ms
        target = target_epoch(int(self.params.epochs_before_rollover))
        reached = age_one(brokers, txid, target, timeout_ms, time.monotonic() + 120)
        detail: dict[str, Any] = {"transactional_id": txid, **{k: v for k, v in reached.items() if k != "txid"}}
        within_ms = int(self.params.catch_within_ms)
        if within_ms:
            detail["then_init"] = self._catch_and_init(brokers, txid, timeout_ms, reached["epoch"], within_ms / 1000)
        self.target = {"nodes": [], "role": f"transactional id {txid}", "detail": detail}
        return self.target

    @staticmethod
    def _catch_and_init(brokers: list[tuple[str, int]], txid: str, timeout_ms: int, jumped_to: int,
                        within_s: float) -> dict[str, Any]:
        """Watch the coordinator until the id has a transaction ongoing above ``jumped_to`` (the
        restarted worker's, at the boundary), then InitProducerId once; what it saw and the
        answer. Without one within ``within_s``, the InitProducerId goes anyway (said so). A
        coordinator that is moving (``COORDINATOR_LOAD_IN_PROGRESS``, ``NOT_COORDINATOR``, a closed
        connection: another fault) did not judge the request: the fault catches the next
        transaction instead, within the same ``within_s``, and records what it retried after."""
        deadline = time.monotonic() + within_s
        answer: dict[str, Any] = {"error": "no coordinator answered"}
        retried: list[str] = []
        while time.monotonic() < deadline:
            answer = EpochJump._watch_and_init(brokers, txid, timeout_ms, jumped_to, deadline)
            moving = (answer["error"] in RETRIABLE - {"CONCURRENT_TRANSACTIONS"}
                      or answer["error"].startswith("FindCoordinator") or "Error(" in answer["error"])
            if not moving:
                break
            retried.append(answer["error"])
            time.sleep(0.1)  # the coordinator is moving: nothing to wait on but a new answer
        return {**answer, "retried_after": retried} if retried else answer

    @staticmethod
    def _watch_and_init(brokers: list[tuple[str, int]], txid: str, timeout_ms: int, jumped_to: int,
                        deadline: float) -> dict[str, Any]:
        try:
            error, _, host, port = find_coordinator(*brokers[0], txid)
            if error != "NONE":
                return {"error": f"FindCoordinator: {error}"}
            with CoordinatorConnection(host, port) as conn:
                seen: dict[str, Any] = {"state": None}
                while time.monotonic() < deadline:
                    d_error, state, producer_id, epoch = conn.describe(txid)
                    seen = {"state": state, "producer_id": producer_id, "epoch": epoch, "error": d_error}
                    if d_error == "NONE" and state == "Ongoing" and epoch > jumped_to:
                        break
                    time.sleep(0.01)  # a transaction lasts 100 ms or more: polling is the only way to see one begin
                else:
                    seen["caught"] = False
                error, producer_id, epoch = conn.init(txid, timeout_ms)
            return {"during": seen, "error": error, "producer_id": producer_id, "epoch": epoch}
        except OSError as exc:
            return {"error": repr(exc)}


register(
    FaultKind("epoch-jump", "InitProducerId a worker's transactional id to just before the producer-epoch boundary "
              "while it runs, then once more the moment its next transaction is ongoing (KAFKA-19367's shape)", None,
              ("random-worker",), EpochJump, EpochJumpParams, evidence=frozenset({FENCES_TRANSACTIONAL_ID})),
    FaultKind("orphan-transaction", "write a transactional batch no coordinator knows to a partition leader "
              "(a hanging transaction unless partition verification refuses it)", None,
              ("leader-output", "leader-input"), OrphanTransaction),
)
