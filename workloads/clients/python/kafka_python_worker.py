"""kchaos' consume-transform-produce worker on kafka-python (``kafka``).

kafka-python's transactional producer is a port of the Java client's (init_transactions,
begin_transaction, send_offsets_to_transaction, commit_transaction, abort_transaction), and its
documentation follows the Java pattern: send_offsets_to_transaction with the consumer's
group_metadata() ("preferred - enables broker-side fencing of stale consumer instances per
KIP-447"); a fenced producer (ProducerFencedError) or another fatal error ends the producer; any
other error is aborted. After an abort the consumer is sought back to the committed offsets
(KafkaConsumer.seek / committed), as the Java worker does. kafka-python speaks EndTxn up to v3
(no KIP-890 part 2: "v4/v5 belong to KIP-890").

The producer id and epoch are read from the producer's transaction manager
(``_transaction_manager.producer_id_and_epoch``, not public API: no side effect).

Static membership (KIP-345, workload.static_membership): the consumer's ``group_instance_id``,
sent in JoinGroup, SyncGroup, Heartbeat and (through group_metadata()) TxnOffsetCommit. A
FENCED_INSTANCE_ID (another process took this slot's instance id) is FencedInstanceIdError: the
join refuses it as fatal, the heartbeat thread stops, and send_offsets_to_transaction raises it
(kafka-python classes it abortable, as the Java client). The worker ends at it as at a producer
fence (exit 10), as kchaos' Java worker does with FencedInstanceIdException.

Exit codes: 0 stopped (SIGTERM: the current transaction finishes), 10 fenced, 11 fatal,
12 outcome unknown.
"""

from __future__ import annotations

import signal
import sys
import time
from typing import Any

import kafka.errors as Errors
from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener

from kchaos_worker_common import (EXIT_FATAL, EXIT_FENCED, EXIT_STOPPED, EXIT_UNKNOWN, Exit, History, exit_process,
                                  lineage, load_config, log_client_warnings, positions, prop, record_settings, rng)

FENCED = (Errors.ProducerFencedError, Errors.InvalidProducerEpochError, Errors.TransactionalIdAuthorizationFailedError,
          Errors.FencedInstanceIdError)
FATAL = (Errors.OutOfOrderSequenceNumberError, Errors.AuthorizationError, Errors.UnsupportedVersionError,
         Errors.IllegalStateError)


class Worker:
    def __init__(self, config: dict[str, Any]):
        self.config = config
        self.wl = config["workload"]
        self.worker = config["worker"]
        self.incarnation = int(config["incarnation"])
        self.history = History(config["history_path"], f"{self.worker}.{self.incarnation}")
        self.rng = rng(config)
        self.transactional = self.wl["delivery"] == "exactly-once"
        self.txid = f"{config['txid_prefix']}-{self.worker}" if self.transactional else None
        self.topic = self.wl["input_topic"]
        self.stopping = False
        self.txn_seq = 0
        self.producer: KafkaProducer | None = None
        self.consumer: KafkaConsumer | None = None

    def fields(self) -> dict[str, Any]:
        pid = epoch = None
        manager = getattr(self.producer, "_transaction_manager", None) if self.producer else None
        ids = getattr(manager, "producer_id_and_epoch", None)
        if ids is not None and ids.producer_id >= 0:
            pid, epoch = ids.producer_id, ids.epoch
        return {"worker": self.worker, "incarnation": self.incarnation, "txid": self.txid, "pid": pid, "epoch": epoch,
                "client": "kafka-python"}

    def slot(self) -> dict[str, Any]:
        return {"worker": self.worker, "incarnation": self.incarnation}

    # -- clients -----------------------------------------------------------------------------
    def _producer(self) -> KafkaProducer:
        c = self.config
        conf: dict[str, Any] = {"bootstrap_servers": c["client"]["bootstrap.servers"].split(","),
                                "client_id": f"kchaos-{self.worker}-producer", "acks": "all"}
        for name, key in (("linger.ms", "linger_ms"), ("retry.backoff.ms", "retry_backoff_ms"),
                          ("request.timeout.ms", "request_timeout_ms"), ("delivery.timeout.ms", "delivery_timeout_ms")):
            if prop(c, "producer", name) is not None:
                conf[key] = prop(c, "producer", name)
        if self.transactional:
            conf.update(transactional_id=self.txid, transaction_timeout_ms=self.wl["transaction_timeout_ms"],
                        enable_idempotence=True)
        elif self.wl["delivery"] == "at-least-once":
            conf["enable_idempotence"] = True
        else:
            conf.update(enable_idempotence=False, max_in_flight_requests_per_connection=5, retries=1000000)
        producer = KafkaProducer(**conf)
        self.producer = producer
        if self.transactional:
            op = self.history.invoke("init", {}, **self.fields())
            try:
                producer.init_transactions()
            except Errors.KafkaError as exc:
                self.history.complete(op, "init", "fail", error=exc, **self.fields())
                raise Exit(EXIT_FENCED if isinstance(exc, FENCED) else EXIT_FATAL,
                           "fenced" if isinstance(exc, FENCED) else "fatal", f"init_transactions: {exc!r}") from None
            self.history.complete(op, "init", "ok", **self.fields())
        return producer

    def rebalance_timeout_ms(self) -> int:
        """Kafka's max.poll.interval.ms, which kafka-python also sends as the rebalance timeout
        (client_settings.classic_consumer_defaults below the campaign's)."""
        return prop(self.config, "consumer", "max.poll.interval.ms") or max(60000, 2 * self.wl["transaction_timeout_ms"])

    def _consumer(self) -> KafkaConsumer:
        c, wl = self.config, self.wl
        conf: dict[str, Any] = {
            "bootstrap_servers": c["client"]["bootstrap.servers"].split(","), "client_id": f"kchaos-{self.worker}-consumer",
            "group_id": wl["group_id"], "enable_auto_commit": False, "auto_offset_reset": "earliest",
            "isolation_level": wl["isolation"], "session_timeout_ms": wl["session_timeout_ms"],
            "heartbeat_interval_ms": 1000, "max_poll_records": wl["max_batch"],
            "max_poll_interval_ms": self.rebalance_timeout_ms()}
        if c.get("group_instance_id"):
            conf["group_instance_id"] = c["group_instance_id"]
        if prop(c, "consumer", "fetch.max.wait.ms") is not None:
            conf["fetch_max_wait_ms"] = prop(c, "consumer", "fetch.max.wait.ms")
        return KafkaConsumer(**conf)

    # -- main loop ---------------------------------------------------------------------------
    def run(self) -> int:
        try:
            record_settings(self.history, self.config, "kafka-python", self.wl["session_timeout_ms"],
                            self.rebalance_timeout_ms())
            self._producer()
            self.consumer = self._consumer()
            worker = self

            class Listener(ConsumerRebalanceListener):
                def on_partitions_revoked(self, revoked: Any) -> None:
                    worker.history.event("revoke", {"partitions": sorted(tp.partition for tp in revoked)}, "ok",
                                         **worker.slot())

                def on_partitions_assigned(self, assigned: Any) -> None:
                    value = {"partitions": sorted(tp.partition for tp in assigned)}
                    if worker.config.get("group_instance_id"):
                        value["group_instance_id"] = worker.config["group_instance_id"]
                    worker.history.event("assign", value, "ok", **worker.slot())

            self.consumer.subscribe([self.topic], listener=Listener())
            while not self.stopping:
                polled = self.consumer.poll(timeout_ms=500, max_records=self.wl["max_batch"])
                msgs = [m for records in polled.values() for m in records]
                if not msgs:
                    continue
                self.history.event("poll", {"count": len(msgs), "positions": positions(
                    [(m.partition, m.offset) for m in msgs])}, "ok", **self.slot())
                if self.transactional:
                    self.transaction(msgs)
                else:
                    self.at_least_once(msgs)
            return EXIT_STOPPED
        except Exit as exc:
            self.history.event(exc.f, {"reason": str(exc)}, **self.fields())
            return exc.code
        except Errors.KafkaError as exc:  # outside a transaction step (poll, subscribe)
            fenced = isinstance(exc, FENCED)
            self.history.event("fenced" if fenced else "fatal", {"reason": repr(exc)}, **self.fields())
            return EXIT_FENCED if fenced else EXIT_FATAL
        finally:
            self.close()

    def close(self) -> None:
        for client in (self.consumer, self.producer):
            if client is not None:
                try:
                    client.close(timeout=5) if client is self.producer else client.close()
                except Exception:  # a fenced producer, an unreachable coordinator: nothing to keep
                    pass
        self.history.close()

    def outputs(self, msgs: list[Any], seq: int) -> int:
        assert self.producer is not None
        n = 0
        k = self.wl["outputs_per_input"]
        topics = self.wl["output_topics"]
        for m in msgs:
            key = m.key or b""
            for j in range(k):
                self.producer.send(topics[j % len(topics)], key=key, value=lineage(
                    key.decode(errors="replace"), m.topic, m.partition, m.offset, j, k, self.config, self.txid, seq))
                n += 1
        return n

    @staticmethod
    def next_offsets(msgs: list[Any]) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for m in msgs:
            tp = TopicPartition(m.topic, m.partition)
            out[tp] = max(out.get(tp, -1), m.offset + 1)
        return out

    def transaction(self, msgs: list[Any]) -> None:
        assert self.producer is not None and self.consumer is not None
        self.txn_seq += 1
        seq = self.txn_seq
        offsets = self.next_offsets(msgs)
        offsets_json = {str(tp.partition): o for tp, o in sorted(offsets.items())}
        step, op = "begin", -1
        try:
            self.producer.begin_transaction()
            step, op = "send", self.history.invoke("send", {"txn_seq": seq, "inputs": [[m.partition, m.offset] for m in msgs]},
                                                   **self.fields())
            n = self.outputs(msgs, seq)
            self.history.complete(op, "send", "ok", {"outputs": n}, **self.fields())
            if self.wl["process_delay_ms"]:
                time.sleep(self.wl["process_delay_ms"] / 1000)
            step, op = "send_offsets", self.history.invoke("send_offsets", {"txn_seq": seq, "offsets": offsets_json},
                                                           **self.fields())
            self.producer.send_offsets_to_transaction({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()},
                                                      self.consumer.group_metadata())
            self.history.complete(op, "send_offsets", "ok", {"attempts": 1}, **self.fields())
            if self.rng.random() < self.wl["abort_fraction"]:
                self.producer.flush()  # the aborted outputs must reach the log: the raw view shows them
                self.abort(seq, "intentional")
                return
            step, op = "commit", self.history.invoke("commit", {"txn_seq": seq, "offsets": offsets_json}, **self.fields())
            self.commit(op, seq)
        except Exit:
            raise
        except Errors.KafkaError as exc:
            if step == "commit":
                raise  # commit() recorded it
            if op >= 0:
                self.history.complete(op, step, "fail", {"attempts": 1} if step != "send" else {}, error=exc,
                                      **self.fields())
            if isinstance(exc, FENCED):
                raise Exit(EXIT_FENCED, "fenced", f"{step}: {exc!r}") from None
            if isinstance(exc, FATAL):
                raise Exit(EXIT_FATAL, "fatal", f"{step}: {exc!r}") from None
            self.abort(seq, f"error: {exc!r}")  # abortable: abort, rewind, go on

    def commit(self, op: int, seq: int) -> None:
        assert self.producer is not None
        attempts = 0
        while True:
            attempts += 1
            try:
                self.producer.commit_transaction()
                self.history.complete(op, "commit", "ok", {"attempts": attempts}, **self.fields())
                return
            except Errors.KafkaTimeoutError as exc:
                if attempts < 5:
                    continue  # as the Java producer: a commit that timed out may be retried
                self.history.complete(op, "commit", "info", {"attempts": attempts}, error=exc, **self.fields())
                raise Exit(EXIT_UNKNOWN, "exit-unknown", f"commit of transaction {seq} did not complete: {exc!r}") from None
            except Errors.KafkaError as exc:
                # kafka-python ends a timed-out EndTxn with a fatal "Could not execute transactional
                # request for unknown reasons" (never retried, unlike the Java client), though the
                # coordinator may have committed: a fatal error here leaves the outcome unknown
                fatal = isinstance(exc, FATAL) or self.producer._transaction_manager.has_fatal_error()
                if isinstance(exc, FENCED) or fatal:
                    self.history.complete(op, "commit", "info", {"attempts": attempts}, error=exc, **self.fields())
                    raise Exit(EXIT_FENCED if isinstance(exc, FENCED) else EXIT_FATAL,
                               "fenced" if isinstance(exc, FENCED) else "fatal", f"commit: {exc!r}") from None
                # an abortable error: the transaction manager refused to commit (it sends no EndTxn
                # once the transaction is in error; EndTxn's own errors are all fatal or retried),
                # so it did not commit; abort and go on
                self.history.complete(op, "commit", "fail", {"attempts": attempts}, error=exc, **self.fields())
                self.abort(seq, f"error: {exc!r}")
                return

    def abort(self, seq: int, reason: str) -> None:
        assert self.producer is not None
        op = self.history.invoke("abort", {"txn_seq": seq, "reason": reason}, **self.fields())
        try:
            self.producer.abort_transaction()
        except Errors.KafkaError as exc:
            self.history.complete(op, "abort", "info", error=exc, **self.fields())
            if isinstance(exc, FENCED):
                raise Exit(EXIT_FENCED, "fenced", f"abort: {exc!r}") from None
            raise Exit(EXIT_FATAL, "fatal", f"abort failed: {exc!r}") from None
        self.history.complete(op, "abort", "ok", **self.fields())
        self.rewind()

    def rewind(self) -> None:
        """Seek every assigned partition back to its committed offset (the start when none)."""
        assert self.consumer is not None
        done: dict[str, int] = {}
        for tp in sorted(self.consumer.assignment()):
            for attempt in range(10):
                try:
                    committed = self.consumer.committed(tp)
                    break
                except Errors.KafkaError:
                    time.sleep(0.5 * (attempt + 1))
            else:
                raise Exit(EXIT_UNKNOWN, "exit-unknown", "could not read committed offsets to rewind after an abort")
            if committed is None:
                self.consumer.seek_to_beginning(tp)
                done[str(tp.partition)] = -1001
            else:
                self.consumer.seek(tp, committed)
                done[str(tp.partition)] = committed
        self.history.event("rewind", {"offsets": done}, "ok", **self.slot())

    def at_least_once(self, msgs: list[Any]) -> None:
        """Negative control: produce, flush, then commit the offsets with the consumer."""
        assert self.producer is not None and self.consumer is not None
        self.txn_seq += 1
        seq = self.txn_seq
        op = self.history.invoke("send", {"txn_seq": seq, "inputs": [[m.partition, m.offset] for m in msgs]},
                                 **self.fields())
        n = self.outputs(msgs, seq)
        if self.wl["process_delay_ms"]:
            time.sleep(self.wl["process_delay_ms"] / 1000)
        try:
            self.producer.flush(timeout=60)
        except Errors.KafkaError as exc:
            self.history.complete(op, "send", "info", {"outputs": n}, error=exc, **self.fields())
            raise Exit(EXIT_UNKNOWN, "exit-unknown", f"outputs not acknowledged: {exc!r}") from None
        self.history.complete(op, "send", "ok", {"outputs": n, "unflushed": 0}, **self.fields())
        offsets = self.next_offsets(msgs)
        op = self.history.invoke("commit_offsets", {"txn_seq": seq, "offsets": {str(tp.partition): o for tp, o in
                                                                                 sorted(offsets.items())}},
                                 **self.fields())
        try:
            self.consumer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
            self.history.complete(op, "commit_offsets", "ok", **self.fields())
        except Errors.KafkaError as exc:
            self.history.complete(op, "commit_offsets", "fail", error=exc, **self.fields())


def main() -> int:
    log_client_warnings("kafka")
    worker = Worker(load_config())

    def stop(signum: int, frame: Any) -> None:
        worker.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return worker.run()


if __name__ == "__main__":
    exit_process(main())
