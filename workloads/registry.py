"""The client registry: one descriptor per client implementation kchaos' workers run on, and
the one place that says what each is, how it is built for a release, which releases it takes,
and what it supports by release.

The choice: a module of its own (``kchaos.workloads.registry``) above the two that build the
workers, ``workloads/java_client.py`` (the Java driver on kafka-clients, Maven Central) and
``workloads/native_clients.py`` (franz-go, sarama, aiokafka, kafka-python, KafkaJS: their
property maps and their builds from the Go module proxy, PyPI and npm). Those two keep the
mechanics (and the pins of the default builds, beside their lock files: go.mod, package-lock.json,
``PYTHON_REQUIREMENTS``); this module keeps the knowledge every other reader needs (the spec's
validation, the pool, the plan, the report, the release table, the certification), so that no
client is special-cased outside it.

A client is named as a campaign names it (``workload.client``, ``workload.fleet[].client``):
``confluent`` (confluent-kafka, librdkafka), ``java`` (kafka-clients), ``franz-go``, ``sarama``,
``aiokafka``, ``kafka-python``, ``kafkajs``; ``streams`` (Kafka Streams, kafka-streams) is
described too (its label, its protocol) but is a pipeline of its own, never a fleet slot.

What a client supports by release (``supports``), each the first release that has it, read from
the client's source and changelog:

* ``kip447``: generation-fenced offset commits in a transaction (TxnOffsetCommit v3+ with the
  group's generation and member id, as kchaos' worker on that client sends it);
* ``kip890``: KIP-890 part 2, transaction.version 2 (EndTxn v5, the epoch bumped by every
  transaction's end) when the cluster finalises it: ``speaks_tv2``;
* ``kip848``: the consumer group protocol of KIP-848 (``group_protocol = "consumer"``); a slot
  whose client lacks it joins through the classic protocol;
* ``kip345``: static membership (``workload.static_membership``); a slot whose client lacks it
  joins as a dynamic member and records it.
"""

from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass, field
from typing import Literal

import confluent_kafka

from kchaos.workloads.java_client import CTP_WORKER, STREAMS_APP, client_classpath
from kchaos.workloads.native_clients import CLIENTS as NATIVE, worker_program

Feature = Literal["kip447", "kip890", "kip848", "kip345"]
FEATURES: dict[str, str] = {
    "kip447": "KIP-447 (generation-fenced TxnOffsetCommit)",
    "kip890": "KIP-890 part 2 (transaction.version 2)",
    "kip848": "KIP-848 (the consumer group protocol)",
    "kip345": "KIP-345 (static membership)",
}

#: how a descriptor's releases are built: the registry they come from
Build = Literal["maven", "go", "pip", "npm", "installed"]

_RELEASE = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)$")


def parse_release(version: str) -> tuple[int, int, int]:
    """``X.Y.Z`` (a leading ``v``, as Go tags are written, is allowed) as numbers; ValueError else."""
    m = _RELEASE.match(version.strip())
    if m is None:
        raise ValueError(f"{version!r} is not a release number X.Y.Z")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _installed_confluent() -> str:
    return importlib.metadata.version("confluent-kafka")


@dataclass(frozen=True)
class ClientDescriptor:
    """One client implementation: what it is, how its releases are built, which it takes, and what
    each supports (``since``: the first release with the feature; absent: none has it)."""

    name: str                       #: as a campaign names it
    library: str                    #: as the report names it: "Java kafka-clients", "franz-go", ...
    package: str                    #: what is fetched: Maven coordinates, Go module, PyPI or npm name
    build: Build
    default_version: str | None     #: None: the installed release (confluent-kafka)
    oldest: str                     #: the oldest release kchaos' worker builds and runs on
    before: str | None = None       #: the first release not taken (a next major the worker does not know)
    since: dict[str, str] = field(default_factory=dict)
    #: the classic protocol's assignors the worker offers, by name (a classic group needs one name
    #: every member offers)
    classic_assignors: tuple[str, ...] = ()
    #: other releases than the default can be built (False: only the default, with the reason)
    selectable: str | None = None
    #: may be a slot of a fleet (Kafka Streams is a pipeline of its own)
    in_fleet: bool = True
    #: what was built and run here, per release (docs/clients.md, "Versions")
    verified: tuple[str, ...] = ()

    def default(self) -> str:
        return self.default_version if self.default_version is not None else _installed_confluent()

    def resolve(self, version: str | None) -> str:
        return self.default() if version is None else version.strip().removeprefix("v")

    def check(self, version: str | None) -> str:
        """The release ``version`` names (None: the default) if this client takes it; a ValueError
        saying why not (one line) otherwise. Whether the registry really serves it is known only
        when it is fetched (prepare)."""
        release = self.resolve(version)
        try:
            numbers = parse_release(release)
        except ValueError:
            raise ValueError(f"{self.name} {release!r}: not a release number X.Y.Z") from None
        if self.selectable is not None and release != self.default():
            raise ValueError(f"{self.name} {release}: {self.selectable}")
        if numbers < parse_release(self.oldest):
            raise ValueError(f"{self.name} {release}: kchaos' worker on {self.library} runs on {self.oldest} or later "
                             "(docs/clients.md, \"Versions\")")
        if self.before is not None and numbers >= parse_release(self.before):
            raise ValueError(f"{self.name} {release}: kchaos' worker on {self.library} is written for releases "
                             f"before {self.before} (docs/clients.md, \"Versions\")")
        return release

    def supports(self, feature: str, version: str | None = None) -> bool:
        first = self.since.get(feature)
        if first is None:
            return False
        try:
            return parse_release(self.resolve(version)) >= parse_release(first)
        except ValueError:
            return False


CLIENTS: dict[str, ClientDescriptor] = {d.name: d for d in (
    ClientDescriptor(
        "confluent", "confluent-kafka", "confluent-kafka", "installed", None, oldest="2.0.0",
        # librdkafka 1.6.0: KIP-447's send_offsets_to_transaction with the consumer's group metadata;
        # 1.4.0: group.instance.id; 2.12.0: KIP-848 generally available (2.4.0 early access); no KIP-890
        since={"kip447": "1.6.0", "kip345": "1.4.0", "kip848": "2.12.0"},
        classic_assignors=("range", "roundrobin"),  # librdkafka's default partition.assignment.strategy
        selectable="kchaos' librdkafka worker runs in kchaos' own interpreter, on the confluent-kafka installed "
                   "with it; set no version, or install that release into kchaos' environment",
    ),
    ClientDescriptor(
        "java", "Java kafka-clients", "org.apache.kafka:kafka-clients", "maven", "4.2.1", oldest="3.0.0",
        # 2.5.0: KIP-447 (sendOffsetsToTransaction with ConsumerGroupMetadata); 2.3.0: group.instance.id;
        # 4.0.0: KIP-890 part 2 and KIP-848 generally available (3.7-3.9 had KIP-848 as early access:
        # kchaos joins those through the classic protocol)
        since={"kip447": "2.5.0", "kip345": "2.3.0", "kip890": "4.0.0", "kip848": "4.0.0"},
        classic_assignors=("range", "roundrobin"),  # the driver's partition.assignment.strategy
        verified=("3.0.0", "3.9.1", "4.2.1"),
    ),
    ClientDescriptor(
        "streams", "Kafka Streams", "org.apache.kafka:kafka-streams", "maven", "4.2.1", oldest="4.0.0",
        since={"kip447": "2.5.0", "kip345": "2.3.0", "kip890": "4.0.0"}, in_fleet=False,
    ),
    ClientDescriptor(
        "franz-go", "franz-go", NATIVE["franz-go"].package, "go", NATIVE["franz-go"].pinned, oldest="1.14.0",
        before="2.0.0",
        # GroupTransactSession's TxnOffsetCommit carries the generation, and kgo.InstanceID is there,
        # in every release kchaos takes; KIP-890 part 2 (EndTxn v5, the next epoch from its answer)
        # since 1.19.0 (its opt-in by the transaction.version feature fixed in 1.19.2 and 1.19.3,
        # CHANGELOG.md); KIP-848 through kgo.ServerSideBalancer, the option kchaos' worker uses, since
        # 1.22.0 (before it KIP-848 was a hidden beta: the worker joins through the classic protocol,
        # built with kip848_none.go)
        since={"kip447": "1.14.0", "kip345": "1.14.0", "kip890": "1.19.0", "kip848": "1.22.0"},
        classic_assignors=("cooperative-sticky",),  # franz-go's default balancer
        verified=("1.14.0", "1.18.0", "1.22.3"),
    ),
    ClientDescriptor(
        "sarama", "IBM/sarama", NATIVE["sarama"].package, "go", NATIVE["sarama"].pinned, oldest="1.40.0",
        before="2.0.0",
        # the module is github.com/IBM/sarama since 1.40.0 (github.com/Shopify/sarama before);
        # AddMessageToTxnWithGroupMetadata (TxnOffsetCommit with the generation and member id) since
        # 1.60.0: an older release sends the group id alone (built with kip447_none.go);
        # Consumer.Group.InstanceId in every release kchaos takes
        since={"kip447": "1.60.0", "kip345": "1.40.0"},
        classic_assignors=("range",),
        verified=("1.40.0", "1.45.0", "1.61.1"),
    ),
    ClientDescriptor(
        "aiokafka", "aiokafka", NATIVE["aiokafka"].package, "pip", NATIVE["aiokafka"].pinned, oldest="0.11.0",
        before="1.0.0",
        # TxnOffsetCommit v0 (group id only) in every release; group_instance_id in every release
        # kchaos takes
        since={"kip345": "0.11.0"},
        classic_assignors=("roundrobin",),  # aiokafka's default partition_assignment_strategy
        verified=("0.11.0", "0.12.0", "0.14.0"),
    ),
    ClientDescriptor(
        "kafka-python", "kafka-python", NATIVE["kafka-python"].package, "pip", NATIVE["kafka-python"].pinned,
        oldest="3.0.0", before="4.0.0",
        # 3.0.0: KafkaConsumer.group_metadata() for send_offsets_to_transaction (KIP-447) and
        # group_instance_id, both of which kchaos' worker uses (2.2 sends the group id alone and has
        # no static membership; 2.1 has no send_offsets_to_transaction)
        since={"kip447": "3.0.0", "kip345": "3.0.0"},
        classic_assignors=("range", "roundrobin"),  # kafka-python's default partition_assignment_strategy
        verified=("3.0.0", "3.0.12"),
    ),
    ClientDescriptor(
        # 2.0.0's transactions fail at once here ("The producer attempted a transactional operation
        # in an invalid state", every incarnation): 2.1.0 is the oldest that runs kchaos' worker
        "kafkajs", "kafkajs", NATIVE["kafkajs"].package, "npm", NATIVE["kafkajs"].pinned, oldest="2.1.0",
        before="3.0.0",
        # TxnOffsetCommit v0/v1, EndTxn v0/v1, no group instance id option, no KIP-848
        since={},
        classic_assignors=("RoundRobinAssigner",),  # KafkaJS's own assigner, by its own name
        verified=("2.1.0", "2.2.4"),
    ),
)}

#: the clients a fleet slot may name
FLEET_CLIENTS = tuple(name for name, d in CLIENTS.items() if d.in_fleet)


def descriptor(client: str) -> ClientDescriptor:
    if client not in CLIENTS:
        raise ValueError(f"no client {client!r}: the clients are {', '.join(CLIENTS)}")
    return CLIENTS[client]


def default_version(client: str) -> str:
    """The release a slot of ``client`` runs when the campaign names none."""
    return descriptor(client).default()


def resolve_version(client: str, version: str | None) -> str:
    return descriptor(client).resolve(version)


def check_version(client: str, version: str | None) -> str:
    """The release (``version``, or the default) if ``client`` takes it, else ValueError (one line)."""
    return descriptor(client).check(version)


def supports(client: str, feature: str, version: str | None = None) -> bool:
    """Whether ``client`` at ``version`` (None: the default) has ``feature`` (FEATURES); an unknown
    client (a user's app) has none."""
    return client in CLIENTS and CLIENTS[client].supports(feature, version)


def speaks_tv2(client: str, version: str | None) -> bool:
    """Whether ``client`` at ``version`` (None: the registry's default) runs KIP-890's transactions
    (transaction.version 2) when the cluster finalises them: kafka-clients and Kafka Streams 4.0+,
    franz-go 1.19.0+; librdkafka, sarama, aiokafka, kafka-python and KafkaJS never."""
    return supports(client, "kip890", version)


def label(client: str, version: str | None = None) -> str:
    """A client and release as rows name them: ``java 4.2.1``, ``franz-go 1.22.3``, ``confluent
    2.16.1`` (the installed confluent-kafka when no version is given)."""
    if client not in CLIENTS:
        return client if version is None else f"{client} {version}"
    return f"{client} {CLIENTS[client].resolve(version)}"


def library_label(client: str, version: str | None = None) -> str:
    """The library and release, as the report names them: ``Java kafka-clients 4.2.1``,
    ``confluent-kafka 2.16.1 (librdkafka 2.16.1)``, ``franz-go 1.22.3``."""
    d = descriptor(client)
    release = d.resolve(version)
    if client == "confluent":
        return f"confluent-kafka {release} (librdkafka {confluent_kafka.libversion()[0]})"
    return f"{d.library} {release}"


def group_protocol_of(client: str, version: str | None, wanted: str) -> str:
    """The protocol a slot joins with when the campaign asks ``wanted``: KIP-848's where its client
    has it, else the classic one (Kafka Streams' own is Streams')."""
    if wanted == "consumer" and not supports(client, "kip848", version):
        return "classic"
    return wanted


def classic_assignors(client: str) -> tuple[str, ...]:
    return descriptor(client).classic_assignors


#: the build tags of a Go worker for a release without a feature it would otherwise use
#: (workloads/clients/go/*/kip*.go): franz-go's KIP-848 opt-in, sarama's KIP-447 group metadata
_GO_TAGS = {("franz-go", "kip848"): "kchaos_no_kip848", ("sarama", "kip447"): "kchaos_no_kip447"}


def go_tags(client: str, version: str | None) -> tuple[str, ...]:
    return tuple(tag for (name, feature), tag in sorted(_GO_TAGS.items())
                 if name == client and not supports(client, feature, version))


def worker_command(client: str, version: str | None) -> list[str]:
    """The command (without its config argument) of a native client's worker at ``version``,
    built once into the cache (native_clients.worker_program)."""
    d = descriptor(client)
    release = d.resolve(version)
    return worker_program(client, None if release == d.default() else release, go_tags(client, release))


def java_classpath(client: str, version: str | None) -> str:
    """The Java driver (``java``) or the Streams application (``streams``) against ``version``."""
    return client_classpath(resolve_version(client, version), STREAMS_APP if client == "streams" else CTP_WORKER)


def prepare(client: str, version: str | None = None) -> None:
    """Build (or find in the cache) what a slot of ``client`` at ``version`` runs, before any
    cluster starts: the Java driver against that kafka-clients (Maven Central), a native worker
    against that release (Go module proxy, PyPI, npm). A release the registry does not serve, or
    one the worker does not build against, is a SetupError."""
    d = descriptor(client)
    release = d.check(version)
    if d.build == "maven":
        java_classpath(client, release)
    elif d.build in ("go", "pip", "npm"):
        worker_command(client, release)
