"""Typed, validated cluster specifications (the ``[cluster]`` table of a campaign)."""

from __future__ import annotations

import copy
import re
import tomllib
import types
import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kchaos.clusters.client_security import ENV_REF, java_client_properties, resolve_env_refs, security_protocol
from kchaos.clusters.proxy.rules import check_apis
from kchaos.errors import ConfigError
from kchaos.runtime.artifacts import DEFAULT_KAFKA_VERSION, KNOWN_KAFKA_VERSIONS

#: Broker properties kchaos sets itself; overriding them would break the topology or the proxies.
MANAGED_BROKER_PROPERTIES = frozenset({
    "node.id", "broker.id", "process.roles", "listeners", "advertised.listeners",
    "listener.security.protocol.map", "inter.broker.listener.name", "controller.listener.names",
    "controller.quorum.voters", "controller.quorum.bootstrap.servers", "log.dirs", "log.dir",
    "metadata.log.dir",
})
_PROPERTY_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*$")


#: the spec's feature levels (key -> Kafka's feature name)
FORMAT_FEATURES = {"transaction_version": "transaction.version", "share_version": "share.version",
                   "streams_version": "streams.version"}
#: reverse: Kafka's feature name -> the spec's key
FEATURE_KEYS = {name: key for key, name in FORMAT_FEATURES.items()}

#: what a node's access can do (clusters/external/node_access.py renders each as a shell command)
NODE_ACTIONS = ("kill", "terminate", "pause", "resume", "start", "logs", "exec")


class ExternalNodeSpec(BaseModel):
    """One node of an existing cluster, as kchaos reaches it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    id: int = Field(ge=0, description="the node's node.id")
    host: str = Field(min_length=1, description="the node's address as its peers see it: partitions drop the traffic "
                                                "between two nodes' hosts")
    target: str = Field(min_length=1, description="what the access commands name: a container (docker), an ssh "
                                                  "destination such as root@10.0.0.11 (ssh), a pod (kubernetes)")
    roles: tuple[Literal["broker", "controller"], ...] = ("broker", "controller")
    service: str | None = Field(None, description="its systemd unit (ssh preset: start and logs)")
    process: str | None = Field(None, description="what this node's broker command line alone contains, where several "
                                                  "brokers share a host (default: the cluster's process)")


class ExternalSpec(BaseModel):
    """An existing cluster. Secrets are written as ``${ENV:NAME}`` and read from the environment
    only when a client is created; the spec (and so the run directory) never holds them.

    Faults need ``access`` (how to reach the nodes: a preset, or ``commands`` of one's own),
    ``nodes``, ``allow_faults = true`` and the cluster's own ``cluster_id``, checked against the
    cluster before anything is touched (docs/clusters.md, "Faults on a cluster kchaos did not start").
    A ``[[steps]]`` feature flip needs ``allow_feature_changes = true`` and the same ``cluster_id``
    (a permission of its own: a feature level is the whole cluster's, every client of it sees the
    change, whereas a fault is on one node or link)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    bootstrap_servers: str = Field(min_length=1)
    client_config: dict[str, str] = Field(default_factory=dict)
    cluster_id: str | None = Field(None, description="the cluster's id (DescribeCluster); a cluster that answers with "
                                                     "another is refused before any fault")
    allow_faults: bool = Field(False, description="faults on this cluster are allowed (they are never by default)")
    allow_feature_changes: bool = Field(
        False, description="[[steps]] may change this cluster's finalised feature levels (transaction.version...): "
                           "journaled with the level before, which kchaos puts back at the end of the run and "
                           "`kchaos heal` after a crash (never by default; allow_faults does not imply it)")
    access: Literal["none", "docker", "ssh", "kubernetes", "commands"] = Field(
        "none", description="how node commands run: a preset, or 'commands' (every action from [commands])")
    options: str = Field("", description="extra arguments of the preset's client: docker's (-H ...), ssh's (-i KEY -o "
                                         "...), kubectl's (-n NAMESPACE --context CTX); not for secrets")
    process: str = Field("kafka.Kafka", min_length=1, description="what the broker's command line contains (ssh "
                                                                  "preset: the processes kill, pause and resume signal)")
    netadmin_image: str | None = Field(None, description="kubernetes: an image with iptables for `kubectl debug "
                                                         "--profile=netadmin` (partitions); none: partitions refused")
    front: bool = Field(False, description="put kchaos' address-rewriting front (with Toxiproxy) between the clients "
                                           "and the cluster: client-link and message faults; set on load when the "
                                           "campaign has such faults")
    front_source_address: str | None = Field(None, description="the local address the front's connections to the "
                                                               "brokers come from (a firewall that admits only it)")
    front_certificate: str | None = Field(None, description="TLS clusters: the certificate (PEM file) the front shows "
                                          "its clients, for 127.0.0.1; default: one kchaos makes per run with a CA "
                                          "of its own, which the clients going through the front are told to trust")
    front_key: str | None = Field(None, description="the key (PEM file) of front_certificate")
    front_ca: str | None = Field(None, description="the CA (PEM file) the clients trust front_certificate with "
                                                   "(default: client_config's ssl.ca.location)")
    nodes: tuple[ExternalNodeSpec, ...] = ()
    commands: dict[str, str] = Field(default_factory=dict, description="templates over the preset's, by action "
                                     f"({', '.join(NODE_ACTIONS)}); 'node: ...' runs through exec on the node")

    def resolved_client_config(self) -> dict[str, str]:
        return resolve_env_refs(self.client_config)

    @field_validator("commands")
    @classmethod
    def _known_actions(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(NODE_ACTIONS))
        if unknown:
            raise ValueError(f"unknown action(s) {unknown}; the actions are {', '.join(NODE_ACTIONS)}")
        for action, template in value.items():
            if "${ENV:" in template:
                raise ValueError(f"{action}: commands are stored in the heal journal; give secrets to the command's "
                                 "own configuration (an ssh key file, a kubeconfig), not in the template")
        return value

    @model_validator(mode="after")
    def _front_tls(self) -> "ExternalSpec":
        if (self.front_certificate is None) != (self.front_key is None):
            raise ValueError("front_certificate and front_key go together")
        if self.front_ca is not None and self.front_certificate is None:
            raise ValueError("front_ca is the CA of front_certificate: give the certificate and its key too")
        try:
            security_protocol(self.client_config)
        except ConfigError as exc:
            raise ValueError(exc.cause) from None
        return self

    @model_validator(mode="after")
    def _distinct_nodes(self) -> "ExternalSpec":
        for what in ("id", "host", "target"):
            values = [getattr(n, what) for n in self.nodes]
            twice = sorted({str(v) for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"nodes: {what} {', '.join(twice)} is declared twice")
        if self.access != "none" and not self.nodes:
            raise ValueError(f"access = {self.access!r} needs [[cluster.external.nodes]] (id, host, target)")
        return self

    @field_validator("client_config")
    @classmethod
    def _no_inline_secrets(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            secret = any(word in key.lower() for word in ("password", "secret", "jaas", "token", "key"))
            if secret and not ENV_REF.match(val) and not key.endswith((".location", ".type")):
                raise ValueError(f"{key} looks like a secret: write it as ${{ENV:NAME}} so it is never stored")
        return value


class DockerSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    image: str | None = Field(None, description="default: apache/kafka:<kafka_version> where the engine has it, "
                              "else kchaos/kafka:<kafka_version> built here from the cached jars (clusters/docker/image.py)")
    network: str = "kchaos"
    docker_host: str | None = None  # default: DOCKER_HOST, then the default socket
    engine: Literal["auto", "private", "external"] = Field(
        "auto", description="auto: an engine that is there (docker_host, DOCKER_HOST, /var/run/docker.sock), else "
                            "kchaos' own dockerd; private: always kchaos' own; external: never")


class ClusterSpec(BaseModel):
    """What cluster to run. Validated when loaded; nothing starts with an invalid spec."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["local", "docker", "external"] = "local"
    kafka_version: str = DEFAULT_KAFKA_VERSION
    nodes: int = Field(3, ge=1, le=9, description="broker nodes (combined broker+controller unless dedicated_controllers > 0)")
    dedicated_controllers: int = Field(0, ge=0, le=5, description="0: KRaft combined mode; N: N controller-only nodes")
    transaction_version: int | None = Field(None, ge=0, le=2, description="transaction.version at format time; None: the release default")
    share_version: int | None = Field(None, ge=0, le=1)
    streams_version: int | None = Field(None, ge=0, le=1, description="streams.version at format time (KIP-1071's "
                                                                      "streams rebalance protocol: 1, Kafka 4.2+); set "
                                                                      "on load for workload.group_protocol = 'streams'")
    heap_mb: int = Field(512, ge=256, le=8192)
    jvm_opts: tuple[str, ...] = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k")
    internal_topic_partitions: int = Field(3, ge=1, le=50, description="partitions of the offsets, transaction and share-state topics")
    broker: dict[str, str] = Field(default_factory=dict, description="extra broker properties")
    proxy_clients: bool = True
    proxy_internal: bool = True
    proxy_messages: bool = Field(False, description="put the message proxy (Kafka-protocol message faults) on the client "
                                                    "path; set on load when the campaign has message faults")
    record_apis: tuple[str, ...] = Field((), description=(
        "client requests of these APIs (e.g. StreamsGroupHeartbeat) and their answers recorded by the message proxy "
        "for the whole run, in RUN_DIR/cluster/messages/events.jsonl (no fault: evidence of an exchange); turns "
        "proxy_messages on"))
    proxy_messages_between_brokers: bool = Field(
        False, description="also put the message proxy on every link between brokers (replication, transaction markers, "
                           "partition verification), for message faults with link = 'inter-broker'; needs proxy_internal. "
                           "Set on load when the campaign has such faults")
    clock_control: bool = Field(False, description="start every node's JVM with libfaketime, so that clock faults can "
                                                  "move its wall clock (local backend); set on load when a fault kind "
                                                  "needs it (faults/kinds: ClusterNeeds)")
    disk_limit_mb: int | None = Field(None, ge=64, le=65536,
                                      description="put each node's log directory on a filesystem of this many MB, "
                                                  "which disk faults fill (local backend, root); set to 256 on load "
                                                  "when a fault kind needs it (faults/kinds: ClusterNeeds)")
    base_port: int | None = Field(None, ge=1024, le=65000, description="first port to use; None: free ports chosen at start")
    ready_timeout_s: float = Field(120.0, gt=0)
    external: ExternalSpec | None = None
    docker: DockerSpec = Field(default_factory=DockerSpec)

    @field_validator("kafka_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if not re.match(r"^\d+\.\d+\.\d+$", value):
            raise ValueError(f"not a release number; use a released version such as {', '.join(KNOWN_KAFKA_VERSIONS)}")
        major = int(value.split(".")[0])
        minor = int(value.split(".")[1])
        if (major, minor) < (3, 3):
            raise ValueError("KRaft without ZooKeeper needs Kafka 3.3 or later")
        return value

    @field_validator("broker", mode="before")
    @classmethod
    def _broker(cls, value: Any) -> dict[str, str]:
        if not isinstance(value, dict):
            raise ValueError("must be a table of property = value")
        out = {}
        for key, val in value.items():
            if not _PROPERTY_RE.match(key):
                raise ValueError(f"{key!r} is not a broker property name")
            if key in MANAGED_BROKER_PROPERTIES:
                raise ValueError(f"{key} is managed by kchaos (it wires listeners, proxies and the quorum) and cannot be overridden")
            if isinstance(val, bool):
                val = str(val).lower()
            if not isinstance(val, (str, int, float)):
                raise ValueError(f"{key}: value must be a string or number")
            out[key] = str(val)
        return out

    @field_validator("record_apis", mode="before")
    @classmethod
    def _recorded(cls, value: Any) -> Any:
        return tuple(check_apis(list(value))) if value else ()

    @model_validator(mode="after")
    def _backend_fields(self) -> "ClusterSpec":
        if self.backend == "external" and self.external is None:
            raise ValueError("backend = 'external' needs [cluster.external] with bootstrap_servers")
        if self.backend != "external" and self.external is not None:
            raise ValueError("[cluster.external] is only for backend = 'external'")
        if self.transaction_version == 2 and tuple(map(int, self.kafka_version.split(".")[:2])) < (4, 0):
            raise ValueError("transaction.version=2 needs Kafka 4.0 or later")
        if self.share_version and tuple(map(int, self.kafka_version.split(".")[:2])) < (4, 1):
            raise ValueError("share.version needs Kafka 4.1 or later")
        if self.streams_version and tuple(map(int, self.kafka_version.split(".")[:2])) < (4, 2):
            # read from the jars: 4.0 has no streams group; 4.1's streams.version 1 is not a
            # production level (StreamsVersion.LATEST_PRODUCTION is SV_0) and its Streams client
            # warns that the protocol "is still in development"; 4.2 makes SV_1 the production level
            raise ValueError("streams.version 1 (KIP-1071's streams rebalance protocol) needs Kafka 4.2 or later: "
                             "4.1 has it only as an early-access, non-production feature level")
        if self.backend == "external" and self.external is not None and self.format_features():
            # an external cluster is never formatted: the levels are what the campaign expects of it,
            # read back at start with FeatureCommand (Java), which must be able to connect
            try:
                java_client_properties(self.external.client_config)
            except ConfigError as exc:
                raise ValueError(f"{', '.join('cluster.' + FEATURE_KEYS[f] for f in self.format_features())} on an external "
                                 "cluster is checked against the cluster's finalised levels at start with Kafka's "
                                 f"FeatureCommand, which cannot connect with client_config: {exc.cause}") from None
        if self.backend == "docker" and self.proxy_messages_between_brokers:
            raise ValueError("the docker backend's message proxy is on the client path only (the links between "
                             "brokers are on the containers' network): message faults with link = 'inter-broker' "
                             "need backend = 'local'")
        if self.backend == "docker" and self.proxy_messages and not self.proxy_clients:
            raise ValueError("the docker backend's message proxy stands behind the client proxies: proxy_messages "
                             "needs proxy_clients")
        if self.record_apis and (self.backend != "local" or not self.proxy_messages):
            raise ValueError("record_apis needs the message proxy on the client path: backend = 'local' and "
                             "proxy_messages (a campaign's load turns it on)")
        if self.proxy_messages_between_brokers and not (self.proxy_messages and self.proxy_internal):
            raise ValueError("proxy_messages_between_brokers puts the message proxy behind the links' proxies: it needs "
                             "proxy_messages and proxy_internal")
        return self

    def format_features(self) -> dict[str, int]:
        """The feature levels the spec names (``transaction.version``: 1, ...): what kchaos formats a
        cluster it starts with, and what it checks a cluster it did not start has (clusters/external)."""
        levels = {name: getattr(self, key) for key, name in FORMAT_FEATURES.items()}
        return {name: level for name, level in levels.items() if level is not None}

    @property
    def replication_factor(self) -> int:
        return min(3, self.nodes)

    @property
    def min_insync_replicas(self) -> int:
        return min(2, self.nodes)

    @classmethod
    def load(cls, data: dict[str, Any], where: str = "cluster") -> "ClusterSpec":
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(describe_validation_error(exc, where)) from None


def describe_validation_error(exc: ValidationError, where: str) -> str:
    """One line per problem, each naming the key (``cluster.nodes``) and what is accepted."""
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in (where, *err["loc"]) if p not in ("__root__", ""))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "literal_error":
            msg = f"{msg} (got {err.get('input')!r})"
        parts.append(f"{loc}: {msg}")
    return "; ".join(parts)


def parse_value(text: str) -> Any:
    """``--set`` values: integers, floats and booleans are typed, a TOML array (``[]``,
    ``["kip890", "leaders"]``) is a list; anything else stays a string."""
    if text.startswith("[") and text.endswith("]"):
        try:
            return tomllib.loads(f"v = {text}")["v"]
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"--set value {text} is not a TOML array: {exc}",
                              'write strings in quotes, e.g. --set faults.packages=["kip890"]') from None
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


#: Fields whose value is a map: in a dotted ``--set`` path the rest after them is one key.
MAP_FIELDS = {"broker", "client_config", "env", "group_config", "producer", "consumer"}


def _inner(annotation: Any, items: bool = True) -> Any:
    """``X`` of ``X | None`` and, with ``items``, of ``tuple[X, ...]`` and ``list[X]``; otherwise
    the annotation itself."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        return _inner(args[0], items)
    if items and origin in (tuple, list) and args:
        return args[0]
    return annotation


def wants_string(model: Any, parts: list[str]) -> bool:
    """Whether the field a ``--set`` path names holds a string (or one of some strings): its value
    is then taken as written (``4.2`` for a version, ``123`` for a group id), not guessed."""
    current = model
    for part in parts:
        current = _inner(current)
        if part.isdigit():
            continue  # an entry of an array of tables: current is already its type
        fields = getattr(current, "model_fields", None)
        if not fields or part not in fields:
            return False
        current = fields[part].annotation
    current = _inner(current, items=False)
    if current is str:
        return True
    return typing.get_origin(current) is typing.Literal and all(isinstance(a, str) for a in typing.get_args(current))


def apply_overrides(data: dict[str, Any], assignments: list[str], prefix: str = "", model: Any = None) -> dict[str, Any]:
    """Apply ``key.path=value`` assignments to a nested dict (a copy), e.g. ``cluster.broker.x.y=1``;
    ``key.path=`` removes the key, so its default applies. With ``model`` (the pydantic model the
    dict will be), a value is typed by the field it sets: a string field takes it as written;
    elsewhere numbers, booleans and TOML arrays are typed."""
    result = copy.deepcopy(data)
    for assignment in assignments:
        if "=" not in assignment:
            raise ConfigError(f"--set {assignment!r} is not key=value", "write e.g. --set cluster.nodes=3")
        key, value = assignment.split("=", 1)
        parts = key.strip().split(".")
        if not all(parts):
            raise ConfigError(f"--set {assignment!r}: empty key part")
        target: Any = result
        i = 0
        while i < len(parts) - 1:
            part = parts[i]
            where = f"{prefix}{'.'.join(parts[:i + 1])}"
            if isinstance(target, list):
                # an array of tables ([[steps]], [[faults.mix]]): the part is a 0-based index
                if not part.isdigit() or int(part) >= len(target):
                    raise ConfigError(f"--set {key}: {where}: no such entry; the array has {len(target)} "
                                      "(0-based indices); add entries in the campaign file")
                node = target[int(part)]
            else:
                node = target.setdefault(part, {})
            if isinstance(node, list) and all(isinstance(x, dict) for x in node):
                target = node
                i += 1
                continue
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {where} is not a table")
            target = node
            if part in MAP_FIELDS:
                parts = parts[: i + 1] + [".".join(parts[i + 1:])]
                break
            i += 1
        if isinstance(target, list):
            raise ConfigError(f"--set {key}: {prefix}{'.'.join(parts[:-1])} is an array of tables; "
                              f"set a key of one entry, e.g. {key}.0.<key>=<value>")
        if not value.strip():
            target.pop(parts[-1], None)  # ``key=``: unset, the default applies (TOML has no null)
            continue
        target[parts[-1]] = value.strip() if model is not None and wants_string(model, parts) else parse_value(value.strip())
    return result
