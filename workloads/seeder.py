"""Input seeding: ``records`` keyed inputs with unique seeded ids, at ``rate`` per second.

The seeder writes in small transactions and aborts a seeded fraction of them on purpose, then
writes the same ids again in a later transaction. So every id ends up committed exactly once,
while the raw (read_uncommitted) view of the input also holds aborted copies: a pipeline that
reads inputs with ``read_uncommitted`` (a negative control) processes them and is caught.
"""

from __future__ import annotations

import random
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException, Producer

from kchaos.log import client_log
from kchaos.workloads.client_settings import SEEDER_CLIENT_ID, SEEDER_PRODUCER
from kchaos.workloads.history import HistoryWriter
from kchaos.workloads.lineage import ABORTED_MARK, input_id, input_value

SEED_BATCH = 50


class Seeder:
    def __init__(self, client: dict[str, Any], topic: str, records: int | None, rate: float, seed: int,
                 history_path: Path, txid: str, abort_fraction: float = 0.05, mark_aborted: bool = False):
        self.client = client
        self.topic = topic
        #: None: seed at ``rate`` until halted (the run's workload phase ends)
        self.records = records
        self.rate = rate
        self.seed = seed
        self.history = HistoryWriter(history_path, "seeder")
        self.txid = txid
        self.abort_fraction = abort_fraction
        #: identity lineage: the copies aborted on purpose carry ABORTED_MARK in their id
        self.mark_aborted = mark_aborted
        self.rng = random.Random(f"{seed}:seeder")
        #: highest offset of a committed input record, per partition (drain target)
        self.last_committed_offset: dict[int, int] = {}
        self.committed = 0
        self.aborted_batches = 0
        self.error: BaseException | None = None
        #: stopped before every record was seeded (halt()): the drain waits only for what was
        self.halted = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="seeder", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=120)
        self.history.close()

    def halt(self) -> None:
        """Stop seeding now (a run winding down after a signal); what was committed stays the
        drain's target. The history stays open for the seeder's last words."""
        self.halted = True
        self._stop.set()
        self._thread.join(timeout=120)

    @property
    def done(self) -> bool:
        return self.records is not None and self.committed >= self.records

    def wait(self, timeout_s: float) -> bool:
        self._thread.join(timeout=timeout_s)
        return not self._thread.is_alive()

    def _run(self) -> None:
        try:
            self._seed()
        except BaseException as exc:  # recorded; the run reports it
            self.error = exc
            self.history.event("seed-error", {"error": repr(exc)})

    def _new_producer(self) -> Producer:
        producer = Producer(client_log({**self.client, **SEEDER_PRODUCER, "log_level": 3, "transactional.id": self.txid,
                                        "client.id": SEEDER_CLIENT_ID}))
        op = self.history.invoke("init", {}, txid=self.txid)
        producer.init_transactions(120)
        self.history.complete(op, "init", "ok", txid=self.txid)
        return producer

    def _seed(self) -> None:
        producer = self._new_producer()
        started = time.monotonic()
        next_index = 0
        limit = self.records if self.records is not None else float("inf")
        while next_index < limit and not self._stop.is_set():
            end = int(min(limit, next_index + SEED_BATCH))
            # pace: the batch may start once `next_index` records' worth of time has passed
            due = started + next_index / self.rate
            delay = due - time.monotonic()
            if delay > 0 and self._stop.wait(delay):
                break
            abort = self.rng.random() < self.abort_fraction
            #: what the broker acknowledged: [id, partition, offset] per record (the verifier's
            #: ground truth for the input side: what must be in the log, and what must never be read)
            acked: list[list[Any]] = []
            op = self.history.invoke("seed", {"first": next_index, "last": end - 1, "abort": abort}, txid=self.txid)
            try:
                producer.begin_transaction()
                # numbered, so two aborted copies of one batch never share an id
                mark = f"{ABORTED_MARK}{self.aborted_batches + 1}" if abort and self.mark_aborted else ""
                for i in range(next_index, end):
                    producer.produce(self.topic, key=(input_id(self.seed, i) + mark).encode(),
                                     value=input_value(self.seed, i, mark),
                                     on_delivery=lambda err, msg: acked.append([msg.key().decode(), msg.partition(),
                                                                                msg.offset()]) if err is None else None)
                if abort:
                    producer.flush(60)  # so the aborted records really reach the log (raw view)
                    producer.abort_transaction(60)
                    self.aborted_batches += 1
                    self.history.complete(op, "seed", "ok", {"aborted": True, "inputs": acked}, txid=self.txid)
                    continue  # the same ids are written again by the next transaction
                producer.commit_transaction(60)
            except KafkaException as exc:
                err = exc.args[0] if exc.args else None
                if err is not None and getattr(err, "txn_requires_abort", lambda: False)():
                    try:
                        producer.abort_transaction(60)
                        # aborted for certain: what the broker had acknowledged must never be read
                        self.history.complete(op, "seed", "fail", {"aborted": True, "inputs": acked},
                                              error=str(exc), txid=self.txid)
                        continue
                    except KafkaException as abort_exc:  # the abort failed too (a fatal answer)
                        exc = abort_exc
                # Outcome unknown: a fresh producer (same transactional.id) fences and aborts it.
                self.history.complete(op, "seed", "info", error=str(exc), txid=self.txid)
                producer = self._new_producer()
                continue
            for _, p, o in acked:
                self.last_committed_offset[p] = max(self.last_committed_offset.get(p, -1), o)
            self.history.complete(op, "seed", "ok", {"count": end - next_index, "inputs": acked}, txid=self.txid)
            self.committed += end - next_index
            next_index = end
        producer.flush(30)
