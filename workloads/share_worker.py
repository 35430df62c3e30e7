"""One share-group (KIP-932) worker process: ``python -m kchaos.workloads.share_worker CONFIG.json``.

A ``ShareConsumer`` in explicit acknowledgement mode in share group ``group_id`` (any number of
workers per partition) and a transactional producer (``<prefix>-w<i>``, kept across restarts so a
restart fences its predecessor). Per poll batch:

1. record the acquisition of every record with its delivery count (``acquire``);
2. decide per record, seeded by its input id (and delivery count): a poison record is REJECTed;
   a ``share_release_fraction`` of deliveries is RELEASEd (a simulated transient failure; never
   at the last allowed delivery); the rest is processed;
3. one transaction with the K outputs of every processed record (lineage contract), commit
   (``send``/``commit``, as in the consumer-group worker);
4. ACCEPT the processed records (RELEASE them if the transaction failed), then commit the
   acknowledgements (``ack``, with the broker's answer per partition).

With ``share_ack_order = "before-commit"`` (a negative control) step 4 comes before step 3:
a transaction that fails after its records were accepted loses them, and share-lost must say so.

This is at-least-once: a crash or a pause past the record lock between 3 and 4 redelivers
records whose outputs are already committed. Exactly-once needs KIP-1289 (acknowledgements
staged in the producer's transaction), which confluent-kafka does not offer; the workload
detects and records that (workloads/share.py), it never pretends.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

from confluent_kafka import AcknowledgeType, KafkaException, ShareConsumer

from kchaos.workloads.ctp_worker import (EXIT_FATAL, EXIT_FENCED, EXIT_STOPPED, EXIT_UNKNOWN, Fatal, Fenced, UnknownOutcome,
                                  Worker, exit_process, main)
from kchaos.workloads.client_settings import client_id
from kchaos.workloads.lineage import Lineage

#: how often one poll error is recorded while it repeats
POLL_ERROR_EVERY_S = 5.0

ACK_NAMES = {AcknowledgeType.ACCEPT: "accept", AcknowledgeType.RELEASE: "release", AcknowledgeType.REJECT: "reject"}


def seeded_fraction(*parts: Any) -> float:
    """A number in [0, 1) from the parts: the same input makes the same decision in any worker."""
    digest = hashlib.blake2b(":".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


def is_poison(seed: int, in_id: str, fraction: float) -> bool:
    return seeded_fraction(seed, "poison", in_id) < fraction


class ShareWorker(Worker):
    def _new_share_consumer(self) -> ShareConsumer:
        consumer = ShareConsumer({**self.client, "log_level": 3, "group.id": self.spec.group_id,
                                  "share.acknowledgement.mode": "explicit",
                                  "client.id": client_id(self.worker, "consumer")})
        consumer.subscribe([self.spec.input_topic])
        return consumer

    def run(self) -> int:
        txid = f"{self.txid_prefix}-{self.worker}"
        consumer = None
        try:
            producer = self._new_producer(txid)
            self.producers[txid] = producer
            consumer = self._new_share_consumer()
            said: dict[str, list[float]] = {}
            while not self.stopping:
                batch = consumer.poll(1.0)
                self._record_poll_errors([m.error() for m in batch if m.error() is not None], said, txid)
                msgs = [m for m in batch if m.error() is None]
                if msgs:
                    self._process(consumer, producer, txid, msgs)
            return EXIT_STOPPED
        except Fenced as exc:
            self.history.event("fenced", {"reason": str(exc)}, outcome="fail", **self._fields(txid))
            return EXIT_FENCED
        except Fatal as exc:
            self.history.event("fatal", {"reason": str(exc)}, outcome="fail", **self._fields(txid))
            return EXIT_FATAL
        except UnknownOutcome as exc:
            self.history.event("unknown", {"reason": str(exc)}, outcome="info", **self._fields(txid))
            return EXIT_UNKNOWN
        finally:
            if consumer is not None:
                try:
                    consumer.close()
                except Exception:
                    pass
            self.history.close()

    def _record_poll_errors(self, errors: list[Any], said: dict[str, list[float]], txid: str) -> None:
        """What a poll returned instead of records (a share session reset, a leader gone), as a
        ``poll-error`` event: evidence when deliveries stall. Each distinct error at most every
        POLL_ERROR_EVERY_S, with how many repeats were not recorded. ``said``: error -> [when
        last recorded, repeats since]."""
        now = time.monotonic()
        for err in errors:
            text = str(err)
            last = said.get(text)
            if last is not None and now - last[0] < POLL_ERROR_EVERY_S:
                last[1] += 1
                continue
            self.history.event("poll-error", {"error": text, "repeats_not_recorded": int(last[1]) if last else 0},
                               outcome="info", **self._fields(txid))
            said[text] = [now, 0]

    def _process(self, consumer: ShareConsumer, producer: Any, txid: str, msgs: list[Any]) -> None:
        spec, seed = self.spec, self.config["seed"]
        records = [(m.partition(), m.offset(), m.delivery_count(), m.key().decode() if m.key() else "") for m in msgs]
        op = self.history.invoke("acquire", {"records": [[p, o, d] for p, o, d, _ in records]}, **self._fields(txid))
        self.history.complete(op, "acquire", "ok", **self._fields(txid))
        decision: dict[int, int] = {}
        work = []
        for i, (p, o, delivery, in_id) in enumerate(records):
            if is_poison(seed, in_id, spec.share_poison_fraction):
                decision[i] = AcknowledgeType.REJECT
            elif (delivery < spec.share_delivery_count_limit - 1
                  and seeded_fraction(seed, "release", in_id, delivery) < spec.share_release_fraction):
                decision[i] = AcknowledgeType.RELEASE
            else:
                work.append(i)
        if spec.share_ack_order == "before-commit":  # negative control: acknowledged before the outputs commit
            for i in work:
                decision[i] = AcknowledgeType.ACCEPT
            self._acknowledge(consumer, txid, msgs, records, decision, self.txn_seq + 1 if work else None)
            if work:
                self._transaction(producer, txid, [msgs[i] for i in work])
            return
        if work:
            committed = self._transaction(producer, txid, [msgs[i] for i in work])
            for i in work:
                decision[i] = AcknowledgeType.ACCEPT if committed else AcknowledgeType.RELEASE
        self._acknowledge(consumer, txid, msgs, records, decision, self.txn_seq if work else None)

    def _acknowledge(self, consumer: ShareConsumer, txid: str, msgs: list[Any], records: list[Any],
                     decision: dict[int, int], txn_seq: int | None) -> None:
        """Every record's decision, then the acknowledgements committed (``ack``, with the broker's
        answer per partition)."""
        for i, m in enumerate(msgs):
            consumer.acknowledge(m, decision[i])
        acks = [[records[i][0], records[i][1], ACK_NAMES[decision[i]]] for i in range(len(msgs))]
        op = self.history.invoke("ack", {"acks": acks, "txn_seq": txn_seq}, **self._fields(txid))
        try:
            result = consumer.commit_sync(30)
        except KafkaException as exc:
            self.history.complete(op, "ack", "info", error=str(exc), **self._fields(txid))
            return
        failed = {f"{tp.topic}-{tp.partition}": str(err) for tp, err in (result or {}).items() if err is not None}
        self.history.complete(op, "ack", "fail" if failed else "ok", {"failed_partitions": failed} if failed else {},
                              **self._fields(txid))

    def _transaction(self, producer: Any, txid: str, msgs: list[Any]) -> bool:
        """Outputs of ``msgs`` in one transaction; True when it committed."""
        spec = self.spec
        self.txn_seq += 1
        seq = self.txn_seq
        producer.begin_transaction()
        inputs = [[m.partition(), m.offset()] for m in msgs]
        op = self.history.invoke("send", {"txn_seq": seq, "inputs": inputs}, **self._fields(txid))
        outputs = 0
        try:
            for m in msgs:
                in_id = m.key().decode() if m.key() else ""
                for slot in range(spec.outputs_per_input):
                    lineage = Lineage(in_id, spec.input_topic, m.partition(), m.offset(), slot, spec.outputs_per_input,
                                      self.worker, self.incarnation, txid, seq)
                    producer.produce(spec.output_topics[slot % len(spec.output_topics)], key=in_id.encode(),
                                     value=lineage.encode())
                    outputs += 1
            producer.flush(60)
            self._simulate_processing(producer)  # process_delay_ms: records stay acquired meanwhile
        except (KafkaException, BufferError) as exc:
            self.history.complete(op, "send", "fail", {"outputs": outputs}, error=str(exc), **self._fields(txid))
            self._abort(producer, txid, seq, f"produce failed: {exc}")
            return False
        self.history.complete(op, "send", "ok", {"outputs": outputs}, **self._fields(txid))
        try:
            self._commit(producer, txid, seq, {})  # fenced, fatal and unknown outcomes raise
        except KafkaException as exc:  # abortable: not committed
            self._abort(producer, txid, seq, f"commit failed: {exc}")
            return False
        return True

    def _rewind(self) -> None:
        """Nothing to seek: the records of an aborted transaction are RELEASEd instead."""


if __name__ == "__main__":
    exit_process(main(worker_class=ShareWorker))
