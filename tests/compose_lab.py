"""A Compose-style cluster for the tests of faults on a cluster kchaos did not start: three Kafka
containers on a bridge network of their own, each with its own address, started by this module on
kchaos' private Docker engine (clusters/docker/engine.py) from kchaos' locally built image, the way
a Compose file would start them. kchaos reaches them only as a user's campaign would: bootstrap
servers, and the ``docker`` preset (``docker -H ...`` for the containers, ``nsenter`` into their
network namespaces for iptables). The docker *backend* is not involved.

The interface is :class:`tests.external_lab.Lab`'s, so one test body serves both labs. Everything
made here (containers, the network, the engine) carries one tag and goes in :meth:`ComposeLab.close`,
which never raises; a lab whose test process was killed is removed by the next one (the engine's
own start removes every container and network labelled ``kchaos.cluster``). Traffic goes only to
the lab's own addresses and loopback. Needs root and the engine's packages (``kchaos setup
--docker``, which :func:`ensure_engine` runs when they are missing)."""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from kchaos.clusters.client_security import resolve_env_refs
from kchaos.clusters.docker.cluster import env_name  # the image's KAFKA_<PROPERTY> mapping
from kchaos.clusters.docker.engine import PrivateDockerEngine, install_engine, remove_exec_root
from kchaos.clusters.docker.image import ensure_kafka_image
from kchaos.clusters.node_config import new_cluster_id
from kchaos.clusters.node_config import SMALL_MACHINE_DEFAULTS
from kchaos.clusters.proxy.tls_certs import ThrowawayCA
from kchaos.runtime.processes import processes_with_marker
from tests.external_lab import CONTROLLER_PORT, KAFKA_PORT, REGISTRY, sh, wait_for

SUBNET = "10.214.77"


@contextlib.contextmanager
def running_compose_lab(root: Path, kafka_version: str, features: dict[str, int] | None = None,
                        tls: bool = False, sasl_password_env: str | None = None,
                        denied_topics: tuple[str, ...] = ()) -> Iterator["ComposeLab"]:
    """A started lab, removed afterwards whatever happened. Skips without root; fails (never a
    silent skip) when the engine cannot be installed. ``sasl_password_env``: the client listener
    asks SASL PLAIN of user ``kchaos``, whose password is that environment variable's value (the
    campaign names only the variable). ``denied_topics``: with SASL, an authorizer denies ``kchaos``
    everything on those topics (a staging cluster's ACLs). ``tls``: the client listener speaks SSL,
    with certificates of a test CA made here."""
    import pytest

    if os.geteuid() != 0:
        pytest.skip("kchaos' private Docker engine runs as root")
    install_engine()  # raises SetupError naming the fix where it cannot
    lab = ComposeLab(root, kafka_version, features=features, tls=tls, sasl_password_env=sasl_password_env,
                     denied_topics=denied_topics)
    try:
        lab.start()
        yield lab
    finally:
        lab.close()
        assert compose_leftovers(lab) == [], "the compose lab left containers, networks or processes behind"


class LabTLS:
    """TLS for the lab's client listener: a throw-away CA, a certificate per broker address (a PEM
    key store of the key and the certificate, as Kafka reads one), and the clients' settings."""

    def __init__(self, directory: Path, addresses: list[str]):
        self.directory = directory
        authority = ThrowawayCA(directory / "ca", "kchaos lab CA")
        self.ca = authority.certificate
        for address in addresses:
            issued = authority.issue(f"broker-{address}", [address])
            store = self.broker_dir(address)
            store.mkdir(parents=True, exist_ok=True)
            (store / "keystore.pem").write_text(issued.key.read_text() + issued.certificate.read_text())
            os.chmod(store / "keystore.pem", 0o600)
            (store / "ca.pem").write_text(self.ca.read_text())
        authority.close()

    def broker_dir(self, address: str) -> Path:
        return self.directory / f"broker-{address}"

    @staticmethod
    def broker_properties(mounted_at: str) -> dict[str, str]:
        return {"ssl.keystore.type": "PEM", "ssl.keystore.location": f"{mounted_at}/keystore.pem",
                "ssl.truststore.type": "PEM", "ssl.truststore.location": f"{mounted_at}/ca.pem"}

    def client_config(self) -> dict[str, str]:
        return {"security.protocol": "SSL", "ssl.ca.location": str(self.ca)}


@dataclass
class ComposeNode:
    node_id: int
    container: str
    address: str

    @property
    def process(self) -> str:  # what the ssh lab's nodes name; here the container is the unit
        return self.container


class ComposeLab:
    """Three brokers (broker and controller each) in containers, as ``docker compose up`` would run
    them. ``tls``: the client listener is SSL (:class:`LabTLS`)."""

    kind = "docker"

    def __init__(self, root: Path, kafka_version: str, nodes: int = 3, features: dict[str, int] | None = None,
                 tls: bool = False, sasl_password_env: str | None = None, denied_topics: tuple[str, ...] = ()):
        self.root = root
        self.kafka_version = kafka_version
        self.features = features or {}
        self.tag = f"kxd{os.getpid() % 100000}"
        self.bridge = f"{self.tag}br"
        self.network = f"{self.tag}-net"
        self.cluster_id = new_cluster_id()
        self.nodes = [ComposeNode(i, f"{self.tag}-kafka-{i}", f"{SUBNET}.{10 + i}") for i in range(1, nodes + 1)]
        self.tls = LabTLS(root / "tls", [n.address for n in self.nodes]) if tls else None
        self.sasl_password_env = sasl_password_env
        if denied_topics and not sasl_password_env:
            raise ValueError("ACLs need a principal: give sasl_password_env")
        self.denied_topics = denied_topics
        self._admin_password = secrets.token_urlsafe(12)  # the lab's own super user, for its ACLs
        self.engine = PrivateDockerEngine(root / "engine", root / "pids")
        self.client: Any = None

    # -- what a campaign needs ------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.address}:{KAFKA_PORT}" for n in self.nodes)

    def client_config(self) -> dict[str, str]:
        """What a client of the lab needs besides the bootstrap servers (TLS: trust the test CA)."""
        return resolve_env_refs(self.client_settings())

    def client_settings(self) -> dict[str, str]:
        """The campaign's ``client_config``: the secret as a reference."""
        out = {**(self.tls.client_config() if self.tls else {})}
        if self.sasl_password_env:
            out.update({"security.protocol": "SASL_SSL" if self.tls else "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": "kchaos", "sasl.password": f"${{ENV:{self.sasl_password_env}}}"})
        return out

    def external(self, **extra: object) -> dict[str, object]:
        """``[cluster.external]`` for the docker preset: only the engine's address is the user's to give."""
        ext: dict[str, object] = {
            "bootstrap_servers": self.bootstrap_servers, "access": "docker",
            "options": f"-H {self.engine.docker_host}", "cluster_id": self.cluster_id, "allow_faults": True,
            "nodes": [{"id": n.node_id, "host": n.address, "target": n.container} for n in self.nodes]}
        if self.client_settings():
            ext["client_config"] = self.client_settings()
        return {**ext, **extra}

    # -- bring up -------------------------------------------------------------------------
    def start(self) -> None:
        remove_stale_compose_labs()
        self.root.mkdir(parents=True, exist_ok=True)
        REGISTRY.mkdir(exist_ok=True)
        (REGISTRY / self.tag).write_text(f"{os.getpid()} {self.root} {len(self.nodes)} docker\n")
        self.client = self.engine.start()
        image = ensure_kafka_image(self.client, self.kafka_version)
        import docker

        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=f"{SUBNET}.0/24",
                                                                           gateway=f"{SUBNET}.1")])
        self.client.networks.create(self.network, driver="bridge", ipam=ipam, labels={"kchaos.cluster": self.tag},
                                    options={"com.docker.network.bridge.name": self.bridge})
        voters = ",".join(f"{n.node_id}@{n.address}:{CONTROLLER_PORT}" for n in self.nodes)
        for n in self.nodes:
            self._run(n, image, voters)
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0, **self.client_config()})
        self.wait(lambda: self._all_up() and len(admin.list_topics(timeout=5).brokers) == len(self.nodes), 240,
                  "every broker registered")
        if self.denied_topics:
            self._deny(self.denied_topics)

    def _deny(self, topics: tuple[str, ...]) -> None:
        """DENY ALL for User:kchaos on ``topics``, made by the lab's super user."""
        from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                           ResourcePatternType, ResourceType)

        admin = AdminClient({**self.client_config(), "sasl.username": "admin", "sasl.password": self._admin_password,
                             "bootstrap.servers": self.bootstrap_servers, "log_level": 0})
        bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:kchaos", "*",
                               AclOperation.ALL, AclPermissionType.DENY) for topic in topics]
        for future in admin.create_acls(bindings, request_timeout=30).values():
            future.result()

    def _run(self, n: ComposeNode, image: str, voters: str) -> None:
        client_proto = ("SASL_" if self.sasl_password_env else "") + ("SSL" if self.tls else "PLAINTEXT")
        props = {**SMALL_MACHINE_DEFAULTS, "node.id": n.node_id, "process.roles": "broker,controller",
                 "listeners": f"CLIENT://:{KAFKA_PORT},INTERNAL://:19092,CONTROLLER://:{CONTROLLER_PORT}",
                 "advertised.listeners": f"CLIENT://{n.address}:{KAFKA_PORT},INTERNAL://{n.address}:19092",
                 "listener.security.protocol.map": f"CLIENT:{client_proto},INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
                 "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "INTERNAL",
                 "controller.quorum.voters": voters, "log.dirs": "/var/lib/kafka/data",
                 "offsets.topic.replication.factor": 3, "transaction.state.log.replication.factor": 3,
                 "transaction.state.log.min.isr": 2, "min.insync.replicas": 2,
                 "offsets.topic.num.partitions": 3, "transaction.state.log.num.partitions": 3,
                 "share.coordinator.state.topic.num.partitions": 3, "default.replication.factor": 3}
        if self.sasl_password_env:
            password = os.environ[self.sasl_password_env]
            props.update({"sasl.enabled.mechanisms": "PLAIN", "listener.name.client.plain.sasl.jaas.config":
                          'org.apache.kafka.common.security.plain.PlainLoginModule required '
                          f'user_kchaos="{password}" user_admin="{self._admin_password}";'})
            if self.denied_topics:  # the other listeners are PLAINTEXT: their principal is ANONYMOUS
                props.update({"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                              "super.users": "User:ANONYMOUS;User:admin", "allow.everyone.if.no.acl.found": "true"})
        volumes = {}
        if self.tls:
            props.update(self.tls.broker_properties("/etc/kafka/tls"))
            volumes[str(self.tls.broker_dir(n.address))] = {"bind": "/etc/kafka/tls", "mode": "ro"}
        env = {env_name(k): str(v) for k, v in props.items()}
        env.update({"CLUSTER_ID": self.cluster_id, "KAFKA_HEAP_OPTS": "-Xms256m -Xmx512m",
                    "KAFKA_OPTS": "-XX:+UseSerialGC -XX:TieredStopAtLevel=1", "KCHAOS_CONTAINER": n.container})
        if self.features:
            env["KCHAOS_FORMAT_FEATURES"] = " ".join(f"{k}={v}" for k, v in sorted(self.features.items()))
        self.client.containers.run(
            image, name=n.container, hostname=n.container, detach=True, environment=env, volumes=volumes,
            labels={"kchaos.cluster": self.tag, "com.docker.compose.project": self.tag,
                    "com.docker.compose.service": f"kafka-{n.node_id}"},
            network=self.network, networking_config={self.network: self.client.api.create_endpoint_config(
                ipv4_address=n.address)})

    def _all_up(self) -> bool:
        for n in self.nodes:
            status = self._container(n).status
            if status not in ("running", "created"):
                raise RuntimeError(f"container {n.container} is {status}: {self.logs(n)[-2000:]}")
        return True

    def wait(self, ok, timeout_s: float, what: str) -> None:
        wait_for(ok, timeout_s, what)

    # -- what the tests look at -----------------------------------------------------------
    def _container(self, n: ComposeNode) -> Any:
        return self.client.containers.get(n.container)

    def logs(self, n: ComposeNode) -> str:
        try:
            return self._container(n).logs().decode(errors="replace")
        except Exception as exc:
            return f"(no logs: {exc})"

    def on_node(self, n: ComposeNode, *argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """``argv`` in the node's network namespace (the host's binaries, as the preset's exec runs them)."""
        pid = self._container(n).attrs["State"]["Pid"]
        return sh("nsenter", "-t", str(pid), "-n", *argv, check=check)

    def broker_pids(self, n: ComposeNode) -> list[int]:
        state = self._container(n).attrs["State"]
        return [int(state["Pid"])] if state.get("Running") and state.get("Pid") else []

    def process_state(self, n: ComposeNode) -> str:
        """'T' for a paused container (Docker's freezer), '' when it does not run, else 'R'."""
        state = self._container(n).attrs["State"]
        if state.get("Paused"):
            return "T"
        return "R" if state.get("Running") else ""

    def kchaos_rules(self, n: ComposeNode) -> list[str]:
        return [line for line in self.all_rules(n) if "KCHAOS" in line]

    def all_rules(self, n: ComposeNode) -> list[str]:
        return self.on_node(n, "iptables", "-w", "-S").stdout.splitlines()

    # -- tear down ------------------------------------------------------------------------
    def close(self) -> None:
        try:
            self.engine.stop(self.client)  # removes every container and network labelled kchaos.cluster
        except Exception:
            pass
        sh("ip", "link", "del", self.bridge, check=False)
        (REGISTRY / self.tag).unlink(missing_ok=True)


def compose_leftovers(lab: ComposeLab) -> list[str]:
    """What of a compose lab is still there: engine processes, container JVMs, its bridge."""
    pids = processes_with_marker(str(lab.engine.exec_root)) + processes_with_marker(f"kchaos.container={lab.tag}")
    out = [f"pid {p}" for p in pids if p != os.getpid()]
    out += [line for line in sh("ip", "-o", "link", check=False).stdout.splitlines() if f" {lab.tag}" in line]
    return out


def remove_stale_compose_labs() -> list[str]:
    """Compose labs whose test process is gone: their engine ends (its next start removes the
    containers and networks), their bridge goes."""
    removed = []
    for entry in sorted(REGISTRY.glob("kxd*")) if REGISTRY.exists() else []:
        try:
            pid, root, _nodes, _kind = entry.read_text().split()
        except ValueError:
            entry.unlink(missing_ok=True)
            continue
        if Path(f"/proc/{pid}").exists():
            continue
        engine = PrivateDockerEngine(Path(root) / "engine", Path(root) / "pids")
        for stale in processes_with_marker(str(engine.exec_root)) + processes_with_marker(f"kchaos.container={entry.name}"):
            sh("kill", "-KILL", str(stale), check=False)
        remove_exec_root(engine.exec_root)
        sh("ip", "link", "del", f"{entry.name}br", check=False)
        entry.unlink(missing_ok=True)
        removed.append(entry.name)
    return removed
