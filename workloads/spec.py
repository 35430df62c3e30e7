"""The ``[workload]`` table of a campaign: the consume-transform-produce pipeline to drive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kchaos.runtime.artifacts import MavenArtifact, resolve_jars
from kchaos.workloads.client_settings import refuse_owned
from kchaos.workloads.lineage import IdLocator
from kchaos.workloads.native_clients import CLIENTS, check_native_workload, not_honoured
from kchaos.workloads.registry import (FLEET_CLIENTS, check_version, classic_assignors, default_version,
                                       group_protocol_of, label, resolve_version)

Delivery = Literal["exactly-once", "at-least-once", "at-least-once-no-idempotence"]


class ObserverSpec(BaseModel):
    """``[observers]``: read_committed readers of the user topics throughout the run
    (workloads/observer.py); their read-side checks in verifier/observations.py."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    count: int = Field(0, ge=0, le=8, description="observers (0: none; the default campaign has 1)")
    isolation: Literal["read_committed", "read_uncommitted"] = Field(
        "read_committed", description="read_uncommitted is a negative control: it must be caught")
    catch_up_s: float = Field(60.0, gt=0, le=900, description="after the final dumps: how long each observer may take "
                                                               "to reach the high watermarks")


class FleetSlot(BaseModel):
    """One entry of ``[[workload.fleet]]``: ``workers`` consecutive worker slots on ``client`` at
    ``version`` (workloads/registry.py). Slots are numbered in fleet order: the first entry's
    ``workers`` slots are w0, w1, ..., the next entry's follow."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    client: str = Field(description=f"the client implementation: {', '.join(FLEET_CLIENTS)}")
    version: str | None = Field(
        None, description="its release (unset: the registry's default; java: workload.java_client_version; "
                          "confluent: the installed confluent-kafka)")
    workers: int = Field(1, ge=1, le=64, description="how many worker slots run it")

    @model_validator(mode="after")
    def _known(self) -> "FleetSlot":
        if self.client not in FLEET_CLIENTS:
            raise ValueError(f"workload.fleet client {self.client!r}: a fleet slot runs one of "
                             f"{', '.join(FLEET_CLIENTS)} (Kafka Streams and a user's app are pipelines of their own)")
        if self.version is not None:
            check_version(self.client, self.version)
        return self


@dataclass(frozen=True)
class SlotClient:
    """What one worker slot runs: the client implementation, its release and their label."""

    client: str     #: the registry's name (confluent, java, franz-go, ...), or streams
    version: str    #: the release
    label: str      #: "java 4.2.1", "franz-go 1.22.3", "confluent 2.16.1"


class WorkloadSpec(BaseModel):
    """Typed, validated on load. The unsafe settings exist on purpose: they are negative
    controls the verifier must catch under faults (see docs/workload.md)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["ctp", "share", "txn"] = Field(
        "ctp", description="ctp: consumer-group consume-transform-produce; share: share-group (KIP-932) pipeline; "
                           "txn: transactions that send to and poll shared partitions (Jepsen's :txn? shape, "
                           "workloads/txn_worker.py), for the isolation-cycle checker (verifier/isolation)")
    input_topic: str = "kchaos-input"
    output_topics: tuple[str, ...] = ("kchaos-invoices", "kchaos-shipments")
    input_partitions: int = Field(6, ge=1, le=1000)
    output_partitions: int = Field(3, ge=1, le=1000)
    records: int | None = Field(
        None, ge=1, le=100_000_000,
        description="input records seeded during the run; unset: inputs keep arriving at `rate` for the whole workload "
                    "phase (the faults included), and the seeder stops when it ends")
    rate: float = Field(1000.0, gt=0, description="input records per second written by the seeder")
    workers: int = Field(3, ge=1, le=64, description="worker processes")
    outputs_per_input: int = Field(2, ge=1, le=16, description="K: output records per input, slot j goes to output topic j % T")
    max_batch: int = Field(200, ge=1, le=100_000, description="most inputs in one transaction")
    process_delay_ms: int = Field(0, ge=0, le=60_000, description="simulated transform time per batch, between writing outputs and committing")
    abort_fraction: float = Field(0.05, ge=0.0, le=0.9, description="share of transactions aborted on purpose")
    seed_abort_fraction: float = Field(
        0.05, ge=0.0, le=0.9,
        description="share of the seeder's input transactions aborted on purpose (data only read_uncommitted sees)")
    after_failed_transaction: Literal["rewind", "carry-on"] = Field(
        "rewind", description="what a worker does after a transaction it had to abort because something failed (a "
                              "send_offsets or commit error, a timeout): rewind to the committed offsets, as a correct "
                              "application must. carry-on is a negative control: it goes on with the next inputs, so "
                              "the failed batch is lost; only a fault that makes a transaction fail shows it, so a "
                              "campaign that claims to test faults must catch it (confluent client)")
    transactional_id_strategy: Literal["per-worker", "per-partition"] = "per-worker"
    delivery: Delivery = "exactly-once"
    isolation: Literal["read_committed", "read_uncommitted"] = "read_committed"
    group_id: str = "kchaos-ctp"
    group_protocol: Literal["classic", "consumer", "streams"] = Field(
        "classic", description="the consumers' group protocol: classic, KIP-848's consumer, or (client = 'streams') "
                               "KIP-1071's streams rebalance protocol (Kafka 4.2+)")
    transaction_timeout_ms: int = Field(20_000, ge=1000, le=900_000)
    session_timeout_ms: int = Field(15_000, ge=3000, le=300_000)
    static_membership: bool = Field(
        False, description="KIP-345: each worker slot's consumer joins with group.instance.id <group>-<slot>, kept "
                            "across its restarts, so a restarted or replaced worker takes its slot's partitions back "
                            "without a rebalance, and the process it replaced is fenced (FENCED_INSTANCE_ID); with a "
                            "session timeout longer than a coordinator's failover, the members also outlive a group "
                            "coordinator's move (kchaos' own workers; on a client without KIP-345, kafkajs, each "
                            "worker joins as a dynamic member and records it, docs/clients.md)")
    restart_backoff_s: float = Field(1.0, ge=0, le=60)
    drain_timeout_s: float = Field(180.0, gt=0, description="after faults heal: how long to wait for every input to be processed")
    share_release_fraction: float = Field(
        0.05, ge=0.0, le=0.5, description="share: seeded share of deliveries RELEASEd (a simulated transient failure)")
    share_poison_fraction: float = Field(
        0.01, ge=0.0, le=0.5, description="share: seeded share of inputs that are poison and REJECTed")
    share_lock_duration_ms: int = Field(15_000, ge=15_000, le=60_000, description=(
        "share: share.record.lock.duration.ms, within the brokers' group.share.min/max.record.lock.duration.ms "
        "(15000 to 60000 by default; kchaos does not change them), checked before any cluster starts"))
    share_delivery_count_limit: int = Field(5, ge=2, le=10, description="share: share.delivery.count.limit")
    share_ack_order: Literal["after-commit", "before-commit"] = Field(
        "after-commit", description="share: when a worker ACCEPTs what it processed. before-commit is a negative "
                                    "control: records are acknowledged before their outputs' transaction commits, so "
                                    "a failed commit or a crash loses them (share-lost); it must be caught")
    client: Literal["confluent", "java", "mixed", "streams", "franz-go", "sarama", "aiokafka", "kafka-python",
                    "kafkajs", "fleet"] = Field(
        "confluent",
        description="confluent: librdkafka (classic transaction protocol); java: kafka-clients (KIP-890 TV2 when the "
                    "cluster has it); mixed: odd worker slots java, even ones confluent, in one group; streams: a Kafka "
                    "Streams application per worker (processing.guarantee from delivery, see docs/workload.md); "
                    "franz-go, sarama, aiokafka, kafka-python, kafkajs: kchaos' worker on that client, following its "
                    "documented exactly-once pattern (docs/clients.md); fleet: the slots of [[workload.fleet]], each "
                    "a client and release, in one group (docs/clients.md, \"Fleets\")")
    client_version: str | None = Field(
        None, description="the release of `client` when it is one of confluent, franz-go, sarama, aiokafka, "
                          "kafka-python, kafkajs (unset: the registry's default, workloads/registry.py); the Java "
                          "client's and Kafka Streams' is java_client_version")
    fleet: tuple[FleetSlot, ...] = Field(
        (), description="client = 'fleet': the worker slots, in order, each entry a client, its release and how many "
                        "slots run it; workers is their sum (derived when unset)")
    streams_threads: int = Field(1, ge=1, le=16, description="streams: num.stream.threads of each application instance")
    streams_commit_interval_ms: int | None = Field(
        None, ge=10, le=600_000,
        description="streams: commit.interval.ms (unset: Streams' default, 100 for exactly_once_v2, 30000 for at_least_once)")
    java_client_version: str = Field(
        default_version("java"),
        description="kafka-clients release of the Java workers (3.0.0 or later; a fleet's java slots without a "
                    "version of their own), kafka-streams release of the Streams application (4.0 or later)")
    producer: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Kafka producer properties of the workers, in the client's own names (librdkafka for confluent, "
                    "kafka-clients for java); see workloads/client_settings.py for kchaos' defaults and owned names")
    consumer: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Kafka consumer properties of the workers (as producer)")
    client_properties: dict[Literal["confluent", "java"], dict[Literal["producer", "consumer"],
                                                               dict[str, str | int | float | bool]]] = Field(
        default_factory=dict,
        description="per client, producer/consumer properties on top of workload.producer/consumer: for a mixed "
                    "campaign where one client needs a name the other does not know (librdkafka times an EndTxn out "
                    "by socket.timeout.ms, which kafka-clients refuses). Not given to a worker on another client "
                    "(franz-go, ..., kafkajs), which records that it ran without them")
    external_command: tuple[str, ...] | None = Field(
        None, description="bring your own pipeline: argv run instead of kchaos' worker (see docs/workload.md)")
    external_classpath: tuple[str, ...] = Field(
        (), description="bring your own JVM app: Maven coordinates (group:artifact:version) resolved with their runtime "
                        "dependencies before the cluster starts, given to external_command as $KCHAOS_CLASSPATH")
    epochs_before_rollover: int | None = Field(
        None, ge=0, le=32_000,
        description="before the workers start, age the first worker's transactional id with InitProducerId until this "
                    "many epoch bumps are left before the coordinator must move it to a new producer id (epoch 32766, "
                    "KIP-890's boundary), the next id twice as many, and so on: the ids cross the boundary one after "
                    "another while the faults run. Unset: no ageing. Each bump is one coordinator write (about 900 a "
                    "second here, docs/workload.md)")
    lineage: Literal["full", "id"] = Field(
        "full", description="full: outputs carry the lineage contract; id: an unmodified external app's outputs only "
                            "carry their input's id (where: lineage_id)")
    lineage_id: str = Field(
        "key", description="lineage = 'id': where an output carries its input's id: key, value, json:/pointer, "
                           "regex:PATTERN (group 1, else the match)")

    txn_topic: str = Field("kchaos-txn", description="txn: the one topic whose partitions are the keys")
    txn_partitions: int = Field(6, ge=1, le=64, description=(
        "txn: the keys: partitions of txn_topic, every worker sends to and polls all of them"))
    txn_max_ops: int = Field(4, ge=1, le=16, description="txn: most micro-operations (sends and polls) per transaction")
    txn_poll_fraction: float = Field(0.5, ge=0.0, le=1.0, description=(
        "txn: share of micro-operations that are polls (the rest are sends); each transaction draws its own"))
    txn_rate: float = Field(10.0, gt=0, le=1000, description=(
        "txn: transactions begun per second by each worker at most (a worker waits between transactions)"))
    txn_poll_max_records: int = Field(100, ge=1, le=10_000, description=(
        "txn: most records one poll micro-operation returns (librdkafka's consume(n))"))

    @model_validator(mode="before")
    @classmethod
    def _fleet_defaults(cls, data: Any) -> Any:
        """A campaign that lists a fleet is a fleet (``client`` may be left out) and its size is the
        fleet's (``workers`` may be left out; when given, it must agree: checked below)."""
        if isinstance(data, dict) and data.get("fleet") and isinstance(data["fleet"], (list, tuple)):
            sizes = [e.get("workers", 1) if isinstance(e, dict) else getattr(e, "workers", None) for e in data["fleet"]]
            data = {"client": "fleet", **data}
            if "workers" not in data and all(isinstance(n, int) and not isinstance(n, bool) for n in sizes):
                data["workers"] = sum(sizes)
        return data

    @model_validator(mode="after")
    def _consistent(self) -> "WorkloadSpec":
        if len(set(self.output_topics)) != len(self.output_topics) or not self.output_topics:
            raise ValueError("output_topics must be one or more distinct topic names")
        if self.input_topic in self.output_topics:
            raise ValueError("input_topic must not also be an output topic")
        if self.delivery != "exactly-once" and self.transactional_id_strategy == "per-partition":
            raise ValueError("transactional_id_strategy = 'per-partition' needs delivery = 'exactly-once'")
        if self.kind == "share" and (self.delivery != "exactly-once" or self.external_command
                                     or self.transactional_id_strategy != "per-worker"):
            raise ValueError("kind = 'share' runs kchaos' own share worker with transactional outputs: it needs "
                             "delivery = 'exactly-once', transactional_id_strategy = 'per-worker' and no external_command")
        if self.kind == "txn":
            self._check_txn()
        if self.client == "streams":
            if (self.kind != "ctp" or self.delivery == "at-least-once-no-idempotence"
                    or self.transactional_id_strategy != "per-worker" or self.external_command
                    or self.group_protocol == "consumer"):
                raise ValueError("client = 'streams' runs a Kafka Streams application as the consume-transform-produce "
                                 "pipeline: kind = 'ctp', delivery 'exactly-once' (processing.guarantee exactly_once_v2) "
                                 "or 'at-least-once' (at_least_once), Streams' own transactional ids "
                                 "(transactional_id_strategy = 'per-worker'), group_protocol 'classic' or 'streams' "
                                 "(KIP-1071), no external_command")
        elif self.group_protocol == "streams":
            raise ValueError("group_protocol = 'streams' is Kafka Streams' rebalance protocol (KIP-1071): it needs "
                             "client = 'streams'")
        else:
            self._check_fleet()
        if self.static_membership and not self.own_workers:
            # a worker on a client without KIP-345 (kafkajs) joins as a dynamic member and records it
            raise ValueError("static_membership names kchaos' own workers' consumers (group.instance.id per worker "
                             "slot): not a Kafka Streams application's, nor an external_command's")
        if self.after_failed_transaction != "rewind" and (self.client != "confluent" or self.kind != "ctp"
                                                          or not self.transactional or self.external_command):
            raise ValueError("after_failed_transaction = 'carry-on' is a negative control of kchaos' own librdkafka "
                             "worker: client = 'confluent', kind = 'ctp', delivery = 'exactly-once', no external_command")
        if self.client == "streams":
            try:
                check_version("streams", self.java_client_version)
            except ValueError as exc:
                raise ValueError(f"java_client_version {self.java_client_version!r}: {exc}") from None
            parts = self.java_client_version.split(".")
            if self.group_protocol == "streams" and (int(parts[0]), int(parts[1])) < (4, 2):
                raise ValueError(f"group_protocol = 'streams' needs kafka-streams 4.2 or later (java_client_version "
                                 f"{self.java_client_version}: 4.1's is early access, 4.0's has none)")
        refuse_owned(self.producer, self.consumer)
        for tables in self.client_properties.values():
            refuse_owned(tables.get("producer") or {}, tables.get("consumer") or {})
        if (self.producer or self.consumer or self.client_properties) and self.external_command:
            raise ValueError("workload.producer / workload.consumer configure kchaos' own workers; an external_command "
                             "pipeline sets its own client properties")
        if self.external_classpath and not self.external_command:
            raise ValueError("external_classpath is the classpath of an external_command app; set external_command")
        for coords in self.external_classpath:
            if len(coords.split(":")) != 3 or not all(coords.split(":")):
                raise ValueError(f"external_classpath {coords!r}: Maven coordinates group:artifact:version")
        if self.lineage == "id":
            IdLocator.parse(self.lineage_id)
            if not self.external_command:
                raise ValueError("lineage = 'id' is for an external_command app that cannot write the lineage contract; "
                                 "kchaos' own workers and the Streams driver write the full lineage")
            if self.outputs_per_input != len(self.output_topics):
                raise ValueError(f"lineage = 'id': an output's slot is its topic, so the app must promise one output per "
                                 f"input in each output topic (outputs_per_input = {len(self.output_topics)}, the number "
                                 "of output_topics)")
        if self.epochs_before_rollover is not None and (self.kind != "ctp" or self.client == "streams"
                                                        or not self.transactional or self.external_command):
            raise ValueError("epochs_before_rollover ages kchaos' own workers' transactional ids, known before they "
                             "start: kind = 'ctp', delivery = 'exactly-once', client confluent, java or mixed, no "
                             "external_command (Streams and outside apps name their own ids)")
        if self.external_command is not None and not self.external_command:
            raise ValueError("external_command must name a program")
        return self

    def _check_txn(self) -> None:
        """What kind = 'txn' can run: kchaos' own librdkafka worker (workloads/txn_worker.py), a
        transactional producer per worker slot and a consumer assigned to the keys (read_committed;
        read_uncommitted is the negative control, judged at read_committed all the same),
        no consumer group and no seeder. Whatever the campaign sets that it would silently ignore,
        or could not run, is refused here, before a cluster starts."""
        refused = []
        if self.client != "confluent":
            refused.append(f"client = {self.client!r} (its worker exists on confluent, librdkafka, only)")
        if self.external_command:
            refused.append("external_command (the histories it checks are kchaos' own worker's)")
        if self.delivery != "exactly-once":
            refused.append(f"delivery = {self.delivery!r} (every micro-operation runs inside a transaction)")
        if self.transactional_id_strategy != "per-worker":
            refused.append(f"transactional_id_strategy = {self.transactional_id_strategy!r} (one transactional.id "
                           "per worker slot)")
        if self.records is not None:
            refused.append("workload.records (there is no seeder: the workers write their own values)")
        if self.static_membership or self.group_protocol != "classic":
            refused.append("static_membership / group_protocol (its consumers are assigned, they join no group)")
        if self.after_failed_transaction != "rewind":
            refused.append("after_failed_transaction = 'carry-on' (a consume-transform-produce negative control)")
        if self.epochs_before_rollover is not None:
            refused.append("epochs_before_rollover (the ageing is wired for kind = 'ctp' only)")
        if self.txn_topic in (self.input_topic, *self.output_topics):
            refused.append(f"txn_topic {self.txn_topic!r} equal to the input or an output topic name")
        if refused:
            raise ValueError("kind = 'txn' runs kchaos' own librdkafka worker on the shared partitions of txn_topic; "
                             "it cannot run with " + "; ".join(refused))

    def _check_fleet(self) -> None:
        """kchaos' own workers on one client, on mixed, or on a fleet: each slot's client (and
        release) can run this pipeline, and the slots can share the consumer group."""
        if self.fleet and self.client != "fleet":
            raise ValueError(f"workload.fleet lists worker slots: it needs client = 'fleet' (or no client), not client = "
                             f"{self.client!r}")
        if self.client == "fleet":
            if not self.fleet:
                raise ValueError("client = 'fleet' needs [[workload.fleet]] entries (client, version, workers)")
            total = sum(e.workers for e in self.fleet)
            if self.workers != total:
                raise ValueError(f"workload.workers = {self.workers}, but the fleet's entries have {total} worker slots: "
                                 "leave workers out (it is the fleet's sum) or make the two agree")
            if self.kind != "ctp" or self.external_command:
                raise ValueError("client = 'fleet' runs kchaos' own workers on the consume-transform-produce pipeline "
                                 "(kind = 'ctp', no external_command)")
        if self.client_version is not None and self.client not in ("confluent", *CLIENTS):
            raise ValueError(f"client_version is the release of a single client (confluent, {', '.join(CLIENTS)}), not "
                             f"of client = {self.client!r}: "
                             + ("a fleet names each entry's version" if self.client == "fleet"
                                else "the Java client's and Kafka Streams' release is java_client_version"))
        checked: set[tuple[str, str]] = set()
        for where, client, version in self._slot_sources():
            if (client, version) not in checked:
                checked.add((client, version))
                self._check_slot(where, client, version)
        self._check_group()

    def _slot_sources(self) -> list[tuple[str, str, str]]:
        """(where the campaign names it, client, release) of each slot, in slot order."""
        if self.client == "fleet":
            out = []
            for i, entry in enumerate(self.fleet):
                where = f"workload.fleet[{i}] ({entry.client}{' ' + entry.version if entry.version else ''})"
                version = entry.version or (self.java_client_version if entry.client == "java" else None)
                out += [(where, entry.client, resolve_version(entry.client, version))] * entry.workers
            return out
        return [self._slot_source(slot) for slot in range(self.workers)]

    def _slot_source(self, slot: int) -> tuple[str, str, str]:
        """One slot's (where, client, release) outside a fleet: the one client, or mixed's alternation."""
        client = ("java" if slot % 2 == 1 else "confluent") if self.client == "mixed" else self.client
        if client in ("java", "streams"):
            return (f"client = {self.client!r}, java_client_version {self.java_client_version!r}", client,
                    self.java_client_version)
        return f"client = {self.client!r}", client, resolve_version(client, self.client_version)

    def _check_slot(self, where: str, client: str, version: str) -> None:
        """What a slot's client (at its release) cannot do is refused on load, per slot."""
        try:
            check_version(client, version)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if client in CLIENTS:
            if self.kind != "ctp" or self.external_command or (self.transactional_id_strategy
                                                               not in CLIENTS[client].txid_strategies):
                raise ValueError(f"{where} runs kchaos' worker on that client: the consume-transform-"
                                 "produce pipeline (kind = 'ctp', no external_command) with transactional_id_strategy "
                                 f"{' or '.join(repr(s) for s in CLIENTS[client].txid_strategies)}")
            # client_properties are the confluent and java workers' own names (a campaign written for
            # them, such as the default's librdkafka message.timeout.ms): not given to this worker,
            # which records that it ran without them (native_clients.not_honoured)
            try:
                check_native_workload(client, self.delivery, self.group_protocol, dict(self.producer),
                                      dict(self.consumer), version)
            except ValueError as exc:  # a fleet names the entry
                raise ValueError(f"{where}: {exc}" if self.client == "fleet" else str(exc)) from None
        elif client == "java" and (self.kind != "ctp" or self.delivery != "exactly-once"
                                   or self.transactional_id_strategy != "per-worker" or self.external_command):
            raise ValueError(f"{where}: the Java driver runs the exactly-once consume-transform-produce "
                             "pipeline with per-worker transactional ids (kind = 'ctp', delivery = 'exactly-once', "
                             "transactional_id_strategy = 'per-worker', no external_command)")

    def _check_group(self) -> None:
        """Every slot joins the one consumer group. Slots that join through the classic protocol
        (all of them under group_protocol = 'classic'; under 'consumer', those whose client lacks
        KIP-848) need an assignor every one of them offers, or the group coordinator refuses the
        later ones (INCONSISTENT_GROUP_PROTOCOL); under KIP-848 the broker assigns."""
        if self.kind != "ctp" or not self.own_workers:
            return
        classic: dict[str, tuple[str, ...]] = {}
        for slot in self.slot_clients():
            if group_protocol_of(slot.client, slot.version, self.group_protocol) == "classic":
                classic.setdefault(slot.label, classic_assignors(slot.client))
        if len(classic) > 1 and not set.intersection(*(set(a) for a in classic.values())):
            offers = "; ".join(f"{name} offers {', '.join(a)}" for name, a in classic.items())
            if self.group_protocol == "consumer":
                raise ValueError(f"the fleet's slots whose clients have no KIP-848 join through the classic protocol, and "
                                 f"no assignor is offered by all of them ({offers}): they cannot share the group; use "
                                 "releases that speak KIP-848, or classic clients whose assignors meet "
                                 "(docs/clients.md, \"Fleets\")")
            raise ValueError(f"the fleet's slots cannot share one classic consumer group, no assignor is offered by all "
                             f"({offers}): use group_protocol = 'consumer' (KIP-848: the broker assigns) with clients "
                             "that speak it, or clients whose classic assignors meet (docs/clients.md, \"Fleets\")")

    def slot_client(self, slot: int) -> SlotClient:
        """What worker slot ``w<slot>`` runs: its client, release and label (workloads/registry.py)."""
        if self.client == "fleet":
            sources = self._slot_sources()
            if not 0 <= slot < len(sources):
                raise ValueError(f"no worker slot w{slot}: the fleet has {len(sources)}")
            _, client, version = sources[slot]
        else:
            _, client, version = self._slot_source(slot)
        return SlotClient(client, version, label(client, version))

    def slot_clients(self) -> tuple[SlotClient, ...]:
        """Every slot's, w0 first."""
        return tuple(self.slot_client(i) for i in range(self.workers))

    def fleet_groups(self) -> list[tuple[SlotClient, list[str]]]:
        """Each distinct client and release the workers run, in slot order, with its slots
        (``w0``, ...): what a run reports it ran."""
        groups: dict[SlotClient, list[str]] = {}
        for i, slot in enumerate(self.slot_clients()):
            groups.setdefault(slot, []).append(f"w{i}")
        return list(groups.items())

    def not_honoured_by_client(self) -> list[tuple[SlotClient, list[str], dict[str, str]]]:
        """Per client and release of the workers (with its slots): the campaign's settings its
        workers run without, and why (a native worker records them in its settings line)."""
        dump = self.model_dump(mode="json")
        out = []
        for slot, slots in self.fleet_groups():
            joins = group_protocol_of(slot.client, slot.version, self.group_protocol)
            if slot.client in CLIENTS:
                missing = not_honoured(dump, slot.client, slot.version, joins)
            elif self.group_protocol == "consumer" and joins != "consumer":
                missing = {"workload.group_protocol": f"{slot.label} has no KIP-848 consumer protocol (registry.py): "
                                                      "the worker joins through the classic protocol"}
            else:
                missing = {}
            if missing:
                out.append((slot, slots, missing))
        return out

    def client_version_of(self, slot: int) -> str:
        return self.slot_client(slot).version

    def label_of(self, slot: int) -> str:
        return self.slot_client(slot).label

    def group_protocol_of(self, slot: int) -> str:
        """The protocol slot ``w<slot>`` joins the group with: the campaign's, or the classic one
        where its client (at its release) has no KIP-848."""
        s = self.slot_client(slot)
        return group_protocol_of(s.client, s.version, self.group_protocol)

    def external_jars(self) -> Any:
        """The resolved ``external_classpath`` (a JarSet, built once into the cache), or None."""
        if not self.external_classpath:
            return None
        import hashlib

        name = "external-" + hashlib.sha256(",".join(self.external_classpath).encode()).hexdigest()[:12]
        return resolve_jars(name, [MavenArtifact.parse(c) for c in self.external_classpath],
                            missing_hint="check workload.external_classpath names released artifacts")

    def producer_for(self, client: str) -> dict[str, str | int | float | bool]:
        """The producer properties a ``client`` (confluent, java) worker gets from the campaign."""
        return {**self.producer, **(self.client_properties.get(client) or {}).get("producer", {})}  # type: ignore[call-overload]

    def consumer_for(self, client: str) -> dict[str, str | int | float | bool]:
        return {**self.consumer, **(self.client_properties.get(client) or {}).get("consumer", {})}  # type: ignore[call-overload]

    def client_of(self, slot: int) -> str:
        """Which client worker slot ``w<slot>`` runs: ``confluent``, ``java``, ``streams`` or a client of
        native_clients.CLIENTS (its release and label: slot_client)."""
        if self.external_command or self.kind == "share":
            return self.client
        return self.slot_client(slot).client

    def transactional_ids(self, prefix: str) -> list[str]:
        """The transactional ids kchaos' own workers use, by strategy (the seeder's not included)."""
        if self.transactional_id_strategy == "per-partition":
            return [f"{prefix}-{self.input_topic}-{p}" for p in range(self.input_partitions)]
        return [f"{prefix}-w{i}" for i in range(self.workers)]

    @property
    def own_workers(self) -> bool:
        """Whether kchaos' own workers (any client's) are the pipeline: they keep a client history;
        a Kafka Streams application or a user's app does not."""
        return self.client != "streams" and not self.external_command

    @property
    def transactional(self) -> bool:
        return self.delivery == "exactly-once"

    @property
    def is_negative_control(self) -> bool:
        return (self.delivery != "exactly-once" or self.isolation != "read_committed"
                or self.share_ack_order != "after-commit" or self.after_failed_transaction != "rewind")
