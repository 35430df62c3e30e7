"""Client settings of the pipeline: kchaos' own defaults (this is the one place they live, with
the reason for each), the Kafka client properties a campaign sets in ``[workload.producer]`` and
``[workload.consumer]``, and the properties kchaos owns and refuses to take from a campaign.

Precedence when a worker builds a client: the cluster's connection settings, then kchaos'
defaults below, then the campaign's properties, then the properties kchaos owns (which a campaign
cannot name: refused on load). Property names are the client's own: librdkafka's for
``client = "confluent"``, kafka-clients' for ``"java"``; ``"mixed"`` gives both clients the same
table, so each name must be valid for both.
"""

from __future__ import annotations

from typing import Any, Mapping

from kchaos.errors import ConfigError

PropertyValue = str | int | float | bool

#: librdkafka producer defaults of kchaos' workers. Why each value:
CONFLUENT_PRODUCER = {
    # every output acknowledged by the ISR; idempotence (and so transactions) demands it
    "acks": "all",
    # a transaction's outputs go out in one batch per partition; commit flushes without waiting
    "linger.ms": 5,
    # The per-transaction floor, measured with bench/transaction_floor.py (docs/benchmarks.md):
    # right after a commit, the next transaction's AddOffsetsToTxn is answered
    # CONCURRENT_TRANSACTIONS (about once per transaction) while the coordinator still writes
    # the previous transaction's markers, and librdkafka retries it after a whole
    # retry.backoff.ms (default 100 ms; its log: "Retrying AddOffsetsToTxnRequest ... in 100ms").
    # AddPartitionsToTxn gets the same answer but is retried on librdkafka's own short timer.
    # The markers take milliseconds, so 10 ms removes the floor (one producer: 6.6 -> 16.3 txn/s).
    "retry.backoff.ms": 10,
}

#: kafka-clients producer defaults. The same floor: kafka-clients shortens the retry of a
#: CONCURRENT_TRANSACTIONS answer to AddPartitionsToTxn only (to 20 ms); AddOffsetsToTxn is
#: re-enqueued after a whole retry.backoff.ms (100 ms, growing exponentially). Measured with
#: bench/transaction_rate.py --client java, 2 workers: 9.8 txn/s at the default, 34.3 at 10 ms.
JAVA_PRODUCER = {"acks": "all", "linger.ms": 5, "retry.backoff.ms": 10}

#: The seeder is kchaos' input source, not the system under test: it keeps kchaos' settings
#: whatever a campaign sets for the workers, with the same short retry backoff (it commits a
#: transaction per batch of inputs and would otherwise pay the same floor).
SEEDER_PRODUCER = {"linger.ms": 5, "retry.backoff.ms": 10, "transaction.timeout.ms": 60000}

def client_id(worker: str, role: str) -> str:
    """``client.id`` of a worker's producer or consumer (``kchaos-w0-producer``). It is in every
    request header, so message faults aim at one worker by this prefix (faults/kinds/messages.py)."""
    return f"kchaos-{worker}-{role}"


#: every worker's client ids start with this; the seeder's never do
WORKER_CLIENT_PREFIX = "kchaos-w"
SEEDER_CLIENT_ID = "kchaos-seeder"


def static_member_id(group_id: str, worker: str) -> str:
    """KIP-345's group.instance.id of a worker slot's consumer (``<group>-w<slot>``)."""
    return f"{group_id}-{worker}"


def group_instance_id(spec: Any, worker: str) -> str | None:
    """The slot's static member id when the campaign asks for static membership, else None."""
    return static_member_id(spec.group_id, worker) if spec.static_membership else None


def classic_consumer_defaults(spec: Any) -> dict[str, Any]:
    """Consumer defaults under the classic group protocol (both clients), below the campaign's.
    A heartbeat every second notices a lost coordinator quickly. ``max.poll.interval.ms`` is
    also the rebalance timeout: how long a rebalance waits for a member that does not rejoin
    (one blocked in a commit or abort during a fault). It must outlast a transaction, so the
    default is twice the transaction timeout, at least 60 s; a campaign with short faults may
    lower it in ``[workload.consumer]`` to shorten the stall a fault causes."""
    return {"heartbeat.interval.ms": 1000,
            "max.poll.interval.ms": max(60000, spec.transaction_timeout_ms * 2)}


#: Poll: how long a worker gathers inputs for one transaction once the first has arrived. A
#: batch is up to ``max_batch`` inputs; librdkafka's consume() otherwise blocks until the whole
#: batch is there, which is a floor of the full poll timeout per transaction when inputs arrive
#: slower than ``max_batch`` per poll.
BATCH_GATHER_S = 0.02

#: Properties a campaign may not set, and why (what to use instead).
OWNED_PRODUCER: dict[str, str] = {
    "bootstrap.servers": "kchaos points every client at the cluster it started (or cluster.external)",
    "client.id": "kchaos names each worker's clients (kchaos-w<slot>-producer): message faults aim at them by it",
    "transactional.id": "kchaos assigns them (workload.transactional_id_strategy)",
    "enable.idempotence": "set by workload.delivery (exactly-once, at-least-once, at-least-once-no-idempotence)",
    "transaction.timeout.ms": "use workload.transaction_timeout_ms",
    "key.serializer": "kchaos writes bytes", "value.serializer": "kchaos writes bytes",
    "debug": "kchaos reads librdkafka's eos debug log for producer ids and epochs",
    "logger": "kchaos reads librdkafka's log", "log_level": "kchaos reads librdkafka's log",
}
OWNED_CONSUMER: dict[str, str] = {
    "bootstrap.servers": OWNED_PRODUCER["bootstrap.servers"],
    "group.id": "use workload.group_id",
    "client.id": "kchaos names each worker's clients (kchaos-w<slot>-consumer): message faults aim at them by it",
    "group.protocol": "use workload.group_protocol",
    "group.instance.id": "use workload.static_membership (kchaos names each worker slot's member)",
    "isolation.level": "use workload.isolation",
    "enable.auto.commit": "offsets are committed in the transaction (or by the negative control)",
    "auto.offset.reset": "the pipeline must start from the earliest input",
    "session.timeout.ms": "use workload.session_timeout_ms",
    "max.poll.records": "use workload.max_batch",
    "enable.partition.eof": "kchaos' poll loop relies on it being off",
    "key.deserializer": "kchaos reads bytes", "value.deserializer": "kchaos reads bytes",
    "debug": OWNED_PRODUCER["debug"], "logger": OWNED_PRODUCER["logger"], "log_level": OWNED_PRODUCER["log_level"],
}


def refuse_owned(producer: Mapping[str, Any], consumer: Mapping[str, Any]) -> None:
    """Raise ValueError (a campaign load error) for a property kchaos owns."""
    for table, given, owned in (("producer", producer, OWNED_PRODUCER), ("consumer", consumer, OWNED_CONSUMER)):
        for name in sorted(given):
            if name in owned:
                raise ValueError(f"workload.{table}.{name} is set by kchaos: {owned[name]}")


def confluent_producer_conf(client: Mapping[str, Any], user: Mapping[str, Any]) -> dict[str, Any]:
    """librdkafka producer settings of a worker, before the owned ones are added."""
    return {**client, **CONFLUENT_PRODUCER, **user}


def java_value(value: PropertyValue) -> str:
    """A TOML value as a Java property (booleans lower case, as kafka-clients parses them)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def check_confluent_properties(spec: Any) -> None:
    """librdkafka rejects an unknown property or a bad value (or a combination, such as
    max.poll.interval.ms below session.timeout.ms) when a client is constructed: build one of
    each as a worker would (connecting nowhere), so that the mistake is a load error, before any
    cluster."""
    from confluent_kafka import Consumer, KafkaException, Producer

    probe = {"bootstrap.servers": "127.0.0.1:9", "log_level": 0}
    classic = spec.group_protocol == "classic"
    consumer_conf = {**(classic_consumer_defaults(spec) if classic else {}), **spec.consumer_for("confluent"),
                     "group.id": "kchaos-config-check",
                     **({"session.timeout.ms": spec.session_timeout_ms} if classic else {"group.protocol": "consumer"})}
    # the producer as a worker builds it: a transactional one checks more combinations
    # (message.timeout.ms must not exceed transaction.timeout.ms)
    owned = ({"transactional.id": "kchaos-config-check", "transaction.timeout.ms": spec.transaction_timeout_ms}
             if spec.transactional else {})
    for table, given, make in (("producer", {**CONFLUENT_PRODUCER, **spec.producer_for("confluent"), **owned}, Producer),
                               ("consumer", consumer_conf, Consumer)):
        if not (spec.producer_for("confluent") if table == "producer" else spec.consumer_for("confluent")):
            continue
        conf = {**probe, **given}
        try:
            client = make(conf)
        except (KafkaException, ValueError, TypeError) as exc:
            err = exc.args[0] if exc.args else exc
            reason = " ".join((err.str() if hasattr(err, "str") else str(err)).split())
            raise ConfigError(f"workload.{table}: librdkafka refuses it: {reason}",
                              "use librdkafka's property names and values (CONFIGURATION.md of librdkafka)") from None
        if table == "consumer":
            client.close()
