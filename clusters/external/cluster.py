"""An existing cluster reached by its bootstrap servers, and, where the campaign declares how, its
nodes (clusters/external/node_access.py: the docker, ssh and kubernetes presets, or commands of
one's own).

Without ``access`` kchaos only connects: workloads, role look-ups and verification work through the
client protocol, and every node and network fault is refused. With it, each fault kind whose
commands are declared becomes available; the rest are refused naming the missing command.

Safety (this is somebody's staging cluster): faults need ``allow_faults = true`` and a
``cluster_id`` that the cluster itself must report (DescribeCluster) before anything is touched,
and every broker the cluster reports must be declared. Every act is written to the heal journal
(kchaos/runtime/heal_journal.py) before it is done; ``stop()`` undoes whatever is still pending, and
``kchaos heal RUN_DIR`` does the same after a crash of the harness. Partitions are iptables rules
in the nodes' own ``KCHAOS`` chain (clusters/external/firewall.py), removed alone on heal.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role
from kchaos.clusters.client_security import record as record_client_security
from kchaos.clusters.client_security import java_client_properties, properties_text, uses_tls
from kchaos.clusters.external import firewall
from kchaos.clusters.external.node_access import NodeAccess, describe
from kchaos.clusters.proxy.client import MessageProxyClient
from kchaos.clusters.proxy.front import KEY_PASSWORD_ENV
from kchaos.clusters.proxy.links import LinkNetwork
from kchaos.clusters.proxy.tls_certs import ThrowawayCA
from kchaos.clusters.proxy.toxiproxy import Proxy, ToxiproxyClient, ensure_toxiproxy_binary, start_toxiproxy
from kchaos.clusters.spec import FEATURE_KEYS, ClusterSpec
from kchaos.errors import CapabilityError, ClusterError, ConfigError
from kchaos.log import say
from kchaos.runtime.heal_journal import CLUSTER_WIDE, JOURNAL_NAME, HealJournal, heal_pending, where
from kchaos.runtime.kafka_tools import (describe_features, feature_change_args, feature_restore_shell, finalized_level,
                                        run_tool, tool_argv)
from kchaos.runtime.node_commands import NodeCommand, run_command, run_undo
from kchaos.runtime.ports import HOST, free_port
from kchaos.runtime.processes import ManagedProcess
from kchaos.waiting import WaitTimeout, wait_until


#: each capability and the node actions it needs on every node (a kill is healed by a start)
CAPABILITY_ACTIONS: dict[Capability, tuple[str, ...]] = {
    Capability.KILL: ("kill", "start"),
    Capability.TERMINATE: ("terminate", "start"),
    Capability.PAUSE: ("pause", "resume"),
    Capability.RESTART: ("terminate", "start"),
    Capability.PARTITION: ("exec",),
    Capability.LOGS: ("logs",),
}
#: the act each undo command heals, per action
UNDO = {"kill": ("start",), "terminate": ("start",), "pause": ("resume",)}
LOG_BYTES = 20 * 1024 * 1024  # per node, the tail kept in the run directory


def _access(spec: ClusterSpec) -> NodeAccess | None:
    ext = spec.external
    return NodeAccess(ext) if ext is not None and ext.access != "none" else None


def capability_gap(spec: ClusterSpec, capability: Capability) -> str | None:
    """Why an external cluster of ``spec`` lacks ``capability`` (None: it has it)."""
    access = _access(spec)
    if capability in (Capability.NETWORK, Capability.MESSAGES):
        return None if spec.external is not None and spec.external.front else (
            f"{capability.value} faults go through the address-rewriting front: set cluster.external.front = true")
    needs = CAPABILITY_ACTIONS.get(capability)
    if needs is None:
        return (f"{capability.value} needs kchaos between the brokers, which only clusters it starts allow "
                "(an external cluster's inter-broker links are its own)")
    if access is None:
        return "cluster.external.access is 'none': kchaos does not reach the nodes (docs/clusters.md)"
    for action in needs:
        for node in access.nodes:
            why = access.missing(action, node)
            if why is not None:
                return why
    return None


class ExternalNode(Node):
    """One node of the cluster; its lifecycle is the declared commands', each journaled first."""

    def __init__(self, cluster: "ExternalCluster", node_id: int, roles: frozenset[Role], address: str | None):
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles
        self.address = address
        self.is_running = True
        self.is_paused = False

    def _act(self, action: str) -> None:
        self.cluster.act(self.node_id, action)

    def kill(self) -> None:
        self._act("kill")
        self.is_running = False

    def terminate(self) -> None:
        self._act("terminate")
        self.is_running = False

    def pause(self) -> None:
        self._act("pause")
        self.is_paused = True

    def resume(self) -> None:
        self.cluster.undo(self.node_id, "pause")
        self.is_paused = False

    def start(self) -> None:
        self.cluster.undo(self.node_id, "kill", "terminate")
        self.is_running = True

    def restart(self) -> None:
        self.terminate()
        self.start()

    @property
    def log_paths(self) -> list[Path]:
        path = self.cluster.work_dir / f"node-{self.node_id}" / "server.log" if self.cluster.work_dir else None
        return [path] if path is not None and path.exists() else []

    def info(self) -> NodeInfo:
        state = "paused" if self.is_paused else "running" if self.is_running else "stopped"
        return NodeInfo(self.node_id, tuple(sorted(r.value for r in self.roles)), None, state, self.address, None, None)


class FirewallNetwork(LinkNetwork):
    """Links of an external cluster. Between nodes: a cut link is a pair of ``KCHAOS`` rules on its
    source node dropping the traffic to and from the other node's host. The cluster's listener ports
    are its own business, so a cut link drops everything between the two nodes: on a combined-mode
    cluster, cutting the controller's quorum links cuts its replication too. Client links (with the
    front): Toxiproxy's ``client-n<i>`` in front of the front's listener for broker i (``client``)."""

    def __init__(self, cluster: "ExternalCluster"):
        super().__init__(cluster)
        self.client = cluster.toxiproxy

    def cut(self, names: list[str]) -> list[str]:
        access = self.cluster.access
        assert access is not None
        pairs = []  # a replication and a quorum link between two nodes are one pair of rules
        for name in names:
            _, src_s, _, dst_s = name.split("-")
            if (int(src_s[1:]), int(dst_s[1:])) not in pairs:
                pairs.append((int(src_s[1:]), int(dst_s[1:])))
        for src, dst in pairs:
            name = f"n{src}-n{dst}"
            peer = access.node(dst).host
            self.cluster.act(src, "exec", cmd=firewall.cut_peer(peer), label="partition",
                             undo=[access.render("exec", src, cmd=firewall.remove_chain())],
                             detail={"link": name, "peer": peer})
        return names

    def isolate(self, node_id: int, include_clients: bool = False) -> list[str]:
        """Every link of the node to the others. ``include_clients`` is ignored, as it always was
        here: only links between nodes are cut, a client's link is left alone."""
        others = [n.node_id for n in self.cluster.nodes if n.node_id != node_id]
        return self.partition([node_id], others)

    def heal(self) -> None:
        if self.cluster.access is not None and self.cluster.journal is not None:
            self.cluster.undo_all("partition")
        if self.client is not None:
            self.client.reset()


class ExternalCluster(Cluster):
    backend_name = "external"

    @classmethod
    def capabilities_for(cls, spec: ClusterSpec) -> frozenset[Capability]:
        return frozenset(c for c in (*CAPABILITY_ACTIONS, Capability.NETWORK, Capability.MESSAGES)
                         if capability_gap(spec, c) is None)

    @classmethod
    def capability_gap(cls, spec: ClusterSpec, capability: Capability) -> str | None:
        return capability_gap(spec, capability)

    def __init__(self, spec: ClusterSpec, work_dir: Path | None = None):
        super().__init__()
        if spec.backend != "external" or spec.external is None:
            raise ConfigError("ExternalCluster needs backend = 'external' and [cluster.external]")
        self.spec = spec
        self.kafka_version = spec.kafka_version  # used to pick the admin tools' jars
        self.work_dir = work_dir
        self.access = _access(spec)
        self.journal = HealJournal(work_dir / JOURNAL_NAME) if work_dir is not None else None
        self._nodes: list[ExternalNode] = []
        self.cluster_id: str | None = None
        #: the front (spec.external.front): its bootstrap address, control client, processes
        self.front_bootstrap: str | None = None
        self.messages: MessageProxyClient | None = None
        self.toxiproxy: ToxiproxyClient | None = None
        self._processes: list[ManagedProcess] = []
        #: a TLS front's certificate files (cert, key, ca), and the directory kchaos made them in
        self._front_tls: dict[str, str] | None = None
        self._front_tls_dir: Path | None = None

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        return self.capabilities_for(self.spec)

    @property
    def bootstrap_servers(self) -> str:
        """The front's bootstrap address when there is one: then no kchaos client ever connects to a
        broker directly."""
        assert self.spec.external is not None
        return self.front_bootstrap or self.spec.external.bootstrap_servers

    def client_security(self) -> dict[str, str]:
        """The campaign's client settings; through a TLS front, the clients trust the front's
        certificate instead of the brokers' (the front shows the brokers its own TLS identity, so a
        client certificate is the front's to present, not theirs)."""
        assert self.spec.external is not None
        config = dict(self.spec.external.client_config)
        if self._front_tls is not None:
            config["ssl.ca.location"] = self._front_tls["ca"]
            for key in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
                config.pop(key, None)
        return config

    @property
    def nodes(self) -> list[Node]:  # type: ignore[override]
        return list(self._nodes)

    @property
    def network(self) -> FirewallNetwork:
        if not self.has(Capability.NETWORK):
            self.require(Capability.PARTITION)
        return FirewallNetwork(self)

    def start(self) -> None:
        """Start the front (if asked for), connect, list the brokers and check the cluster's identity;
        nothing on the cluster is touched."""
        ext = self.spec.external
        assert ext is not None
        if ext.front:
            try:
                self._start_front()
            except BaseException:
                self._stop_front()
                raise
        try:
            md = self.admin().list_topics(timeout=15)
            described = self.admin().describe_cluster(request_timeout=15).result()
        except Exception as exc:
            raise ClusterError(f"external cluster at {ext.bootstrap_servers} did not answer: {exc}",
                               "check cluster.external.bootstrap_servers and the client security settings") from None
        self.cluster_id = described.cluster_id
        if ext.cluster_id is not None and ext.cluster_id != self.cluster_id:
            # the servers the campaign names, not the front's port on this machine that reached them
            raise ConfigError(f"the cluster at {ext.bootstrap_servers} is {self.cluster_id!r}, not the "
                              f"cluster_id {ext.cluster_id!r} the campaign names: nothing was touched",
                              "check that bootstrap_servers points at the cluster you mean to fault")
        self._check_feature_levels()
        declared = {n.id: n for n in ext.nodes}
        wanted = {n for n, node in declared.items() if "broker" in node.roles}
        if wanted - {b.id for b in md.brokers.values()}:  # a broker still registering: wait, within reason
            def registered() -> Any:
                seen = self.admin().list_topics(timeout=10)
                return seen if wanted <= set(seen.brokers) else None

            try:
                md = wait_until(registered, self.spec.ready_timeout_s, 1.0, "", retry_on=(Exception,))
            except WaitTimeout:
                md = self.admin().list_topics(timeout=15)
        brokers = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
        if not brokers:
            raise ClusterError(f"external cluster at {self.bootstrap_servers} reported no brokers")
        if self.access is not None:
            undeclared = sorted(set(brokers) - set(declared))
            if undeclared:
                raise ConfigError(f"the cluster reports brokers {undeclared}, which [[cluster.external.nodes]] does "
                                  "not declare: a fault aimed at a role could land on a node kchaos cannot heal",
                                  "declare every node (id, host, target)")
            gone = sorted(wanted - set(brokers))
            if gone:
                raise ConfigError(f"[[cluster.external.nodes]] declares brokers {gone}, which the cluster does not "
                                  f"report after {self.spec.ready_timeout_s:.0f}s (it reports {sorted(brokers)})",
                                  "fix the node ids, or start those brokers")
        ids = sorted(set(brokers) | set(declared))
        self._nodes = [ExternalNode(self, nid, self._roles(declared.get(nid)), brokers.get(nid)) for nid in ids]
        if ext.front:
            self._toxiproxy_in_front()
        if self.work_dir is not None:
            record_client_security(self.work_dir, self.client_security())

    def _check_feature_levels(self) -> None:
        """The levels the campaign names (``cluster.transaction_version``...) against the ones the
        cluster has finalised, before anything is touched: kchaos never formats this cluster, so a
        level it names is a precondition, not a setting."""
        ext = self.spec.external
        assert ext is not None
        wanted = self.spec.format_features()
        if not wanted:
            return
        try:
            levels = describe_features(self)
        except ClusterError as exc:
            raise ClusterError(f"the feature levels of the cluster at {ext.bootstrap_servers} could not be read, so "
                               f"{self._named(wanted)} cannot be checked: {exc.cause}: nothing was touched",
                               "check that Kafka's tools reach the cluster with client_config, or drop the level "
                               "from [cluster]") from None
        wrong = {name: finalized_level(levels, name) for name, level in wanted.items()
                 if finalized_level(levels, name) != level}
        if wrong:
            has = ", ".join(f"{name} {level if level is not None else levels.get(name)!r}" for name, level in wrong.items())
            raise ConfigError(f"the cluster at {ext.bootstrap_servers} has {has} finalised, not the "
                              f"{self._named({n: wanted[n] for n in wrong})} the campaign names: nothing was touched",
                              "name the cluster's own level, or drop it from [cluster] (kchaos never changes an "
                              "external cluster's levels at start; a [[steps]] flip does, with consent)")

    @staticmethod
    def _named(levels: dict[str, int]) -> str:
        return ", ".join(f"{name} {level} (cluster.{FEATURE_KEYS[name]})" for name, level in levels.items())

    # -- feature levels, journaled -----------------------------------------------------------
    def _direct_tool_args(self) -> list[str]:
        """Kafka's tools connected to the brokers themselves with the campaign's own client settings,
        never through the front: the heal journal's undo must work after the front is gone."""
        ext = self.spec.external
        assert ext is not None and self.work_dir is not None
        args = ["--bootstrap-server", ext.bootstrap_servers]
        props = java_client_properties(ext.client_config)
        if props:
            path = self.work_dir / "client-brokers.properties"  # references only, as every such file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(properties_text(props))
            args += ["--command-config", str(path)]
        return args

    def change_feature(self, feature: str, level: int, current: int | None) -> None:
        """A ``[[steps]]`` flip on this cluster: the level before (``current``, as the stepper read it
        with FeatureCommand describe just before; read here where it is not known), the change and
        its undo (back to the level before the run's first change of ``feature``) journaled, then the
        change made. A change that brings the level back to that first level heals every entry of
        the feature: there is nothing left to undo."""
        if self.journal is None:
            raise ClusterError("a feature change on an external cluster needs a run directory for its heal journal")
        before = current
        if before is None:
            levels = describe_features(self)
            before = finalized_level(levels, feature)
            if before is None:
                raise ClusterError(f"{feature} is at {levels.get(feature)!r}, not a level kchaos can put back: "
                                   "not changed")
        pending = self._feature_entries(feature)
        original = int(pending[0].detail["original"]) if pending else before
        if level == before:
            return
        args, version = self._direct_tool_args(), self.kafka_version
        change = feature_change_args(args, feature, level, downgrade=level < before)
        undo = feature_restore_shell(tool_argv("features", [], version), args, feature, original,
                                     downgrade_first=level > original)
        entry = self.journal.acting(CLUSTER_WIDE, "feature", shlex.join(tool_argv("features", change, version)),
                                    [{"action": "feature", "node": CLUSTER_WIDE, "shell": undo}],
                                    {"feature": feature, "level": level, "before": before, "original": original,
                                     "bootstrap_servers": self.spec.external.bootstrap_servers})  # type: ignore[union-attr]
        try:
            run_tool("features", change, version)
        except ClusterError as exc:
            self.journal.failed(entry, exc.one_line())
            raise
        if level == original:
            for done in self._feature_entries(feature):
                self.journal.healed(done.id, f"{feature} back to {original} by the run's own step")

    def _feature_entries(self, feature: str) -> list[Any]:
        assert self.journal is not None
        return [e for e in self.journal.pending(node=CLUSTER_WIDE, actions=("feature",))
                if e.detail.get("feature") == feature]

    # -- the front -----------------------------------------------------------------------------
    def _start_front(self) -> None:
        """The message proxy in front mode: a bootstrap port of its own, a port per broker opened as
        answers name them (kchaos/protocol/address_rewrite.py)."""
        assert self.work_dir is not None and self.spec.external is not None
        ext = self.spec.external
        directory = self.work_dir / "messages"
        directory.mkdir(parents=True, exist_ok=True)
        control, bootstrap = free_port(), free_port()
        servers = ",".join(s.strip() for s in ext.bootstrap_servers.split(","))
        argv = [sys.executable, "-m", "kchaos.clusters.proxy", "--control", str(control),
                "--events", str(directory / "events.jsonl"), "--front-bootstrap", f"{bootstrap}={servers}"]
        if ext.front_source_address:
            argv += ["--source-address", ext.front_source_address]
        env = None
        if uses_tls(ext.client_config):
            tls_argv, env = self._front_tls_args(directory)
            argv += tls_argv
        process = ManagedProcess("front", argv, directory / "front.log", self.work_dir / "pids", marker=str(self.work_dir),
                                 env=env)
        self._processes.append(process)
        process.start()
        self.messages = MessageProxyClient(control)
        try:
            wait_until(self.messages.version, 20, 0.1, "the front did not answer", retry_on=(ClusterError,))
        except WaitTimeout as exc:
            raise ClusterError(str(exc), detail=(directory / "front.log").read_text(errors="replace")[-3000:]) from None
        self.front_bootstrap = f"127.0.0.1:{bootstrap}"

    def _toxiproxy_in_front(self) -> None:
        """Toxiproxy's ``client-n<i>`` in front of the front's listener for each broker, and the front
        advertising it: the client toxics of clusters kchaos starts, on this one."""
        assert self.messages is not None and self.work_dir is not None
        listeners = self.messages.front()["nodes"]
        missing = [n.node_id for n in self.brokers if str(n.node_id) not in listeners]
        if missing:
            raise ClusterError(f"the front has not seen brokers {missing} in the cluster's metadata")
        proxies = [Proxy(f"client-n{nid}", f"127.0.0.1:{free_port()}", f"127.0.0.1:{info['listen']}")
                   for nid, info in sorted(listeners.items(), key=lambda kv: int(kv[0]))]
        process, self.toxiproxy = start_toxiproxy(ensure_toxiproxy_binary(), free_port(), self.work_dir,
                                                  self.work_dir / "pids", proxies)
        self._processes.append(process)
        for proxy in proxies:
            self.messages.advertise(int(proxy.name.removeprefix("client-n")), int(proxy.listen.rsplit(":", 1)[1]))
        self._close_admin()  # its metadata named the front's own listeners; from now on, Toxiproxy's

    def front_report(self) -> dict[str, Any] | None:
        """What the front saw: each broker's real address and its port here, rewrites per API."""
        if self.messages is None:
            return None
        try:
            return self.messages.front()
        except ClusterError:
            return None

    def _front_tls_args(self, directory: Path) -> tuple[list[str], dict[str, str]]:
        """The TLS-terminating front: the clients' TLS ends at the front, with the user's certificate
        for it or one kchaos makes now (its CA's key deleted at once, the files removed at stop);
        the front opens TLS to the brokers with the clients' own settings."""
        ext = self.spec.external
        assert ext is not None
        client = ext.client_config
        if ext.front_certificate and ext.front_key:
            ca = ext.front_ca or client.get("ssl.ca.location")
            if not ca:
                raise ConfigError("the clients cannot trust front_certificate: give front_ca, the CA that signed it")
            self._front_tls = {"cert": ext.front_certificate, "key": ext.front_key, "ca": ca}
        else:
            self._front_tls_dir = Path(tempfile.mkdtemp(prefix="kchaos-front-tls-"))
            authority = ThrowawayCA(self._front_tls_dir, "kchaos front CA")
            issued = authority.issue("front", [HOST, "localhost"])
            authority.close()
            self._front_tls = {"cert": str(issued.certificate), "key": str(issued.key), "ca": str(authority.certificate)}
            shutil.copy(authority.certificate, directory / "front-ca.pem")  # for the record: what the clients trusted
        argv = ["--tls-cert", self._front_tls["cert"], "--tls-key", self._front_tls["key"]]
        if client.get("ssl.ca.location"):
            argv += ["--upstream-ca", client["ssl.ca.location"]]
        if client.get("ssl.certificate.location"):
            argv += ["--upstream-cert", client["ssl.certificate.location"], "--upstream-key", client.get("ssl.key.location", "")]
        if client.get("ssl.endpoint.identification.algorithm", "https").lower() == "none":
            argv.append("--no-hostname-check")
        env = dict(os.environ)
        password = ext.resolved_client_config().get("ssl.key.password")
        if password is not None:
            env[KEY_PASSWORD_ENV] = password
        return argv, env

    def _stop_front(self) -> None:
        for process in reversed(self._processes):
            try:
                process.stop()
            except Exception:
                pass
        self._processes = []
        if self._front_tls_dir is not None:
            shutil.rmtree(self._front_tls_dir, ignore_errors=True)
            self._front_tls_dir = None

    @staticmethod
    def _roles(node: Any) -> frozenset[Role]:
        if node is None:
            return frozenset({Role.BROKER})
        return frozenset(Role(r) for r in node.roles)

    # -- acting on nodes, journaled ----------------------------------------------------------
    def act(self, node_id: int, action: str, cmd: str | None = None, label: str | None = None,
            undo: list[NodeCommand] | None = None, detail: dict[str, Any] | None = None) -> None:
        """Do ``action`` on a node: journal it with its undo commands first, then run it."""
        if self.access is None or self.journal is None:
            raise CapabilityError(f"node {node_id} cannot be reached: cluster.external.access is 'none'")
        command = self.access.render(action, node_id, cmd=cmd)
        undo = undo if undo is not None else [self.access.render(a, node_id) for a in UNDO.get(action, ())]
        entry = self.journal.acting(node_id, label or action, command.shell,
                                    [{"action": u.action, "node": u.node_id, "shell": u.shell} for u in undo], detail)
        try:
            run_command(command)
        except ClusterError as exc:
            self.journal.failed(entry, exc.one_line())
            raise

    def undo(self, node_id: int, *actions: str) -> None:
        """Heal the node's pending ``actions`` (their undo commands); a node with none pending is
        still given the undo (a heal is idempotent, and a node may be down for another reason)."""
        assert self.access is not None and self.journal is not None
        pending = self.journal.pending(node=node_id, actions=actions)
        self._heal(pending)
        if not pending:
            for action in actions[:1]:
                for name in UNDO.get(action, ()):
                    run_command(self.access.render(name, node_id))

    def undo_all(self, action: str) -> None:
        assert self.journal is not None
        self._heal(self.journal.pending(actions=(action,)))

    def _heal(self, entries: list[Any]) -> None:
        assert self.journal is not None
        failed = [r for r in heal_pending(self.journal, run_undo, "healed by the run", entries) if not r["healed"]]
        if failed:
            raise ClusterError(f"healing {failed[0]['action']} on node {failed[0]['node']} failed: {failed[0]['undo']}")

    def stop(self) -> None:
        """Undo whatever the journal still holds, keep the nodes' logs, disconnect. Never raises."""
        if self.journal is not None and self.journal.pending():
            say("external cluster: undoing what the heal journal still holds")
            for line in heal_pending(self.journal, run_undo, "healed when the run stopped"):
                if not line["healed"]:
                    say(f"  {where(line['node'])}: {line['action']} NOT healed: {line['undo']} "
                        f"(run `kchaos heal RUN_DIR` once {'it' if line['node'] == CLUSTER_WIDE else 'the node'} "
                        "answers)")
                elif line["action"] == "feature":
                    say("  the cluster's feature level is back to where the run found it")
        self._save_logs()
        report = self.front_report()
        if report is not None and self.work_dir is not None:
            (self.work_dir / "messages" / "front.json").write_text(json.dumps(report, indent=2, sort_keys=True))
        self._close_admin()
        self._stop_front()

    def _save_logs(self) -> None:
        if self.access is None or self.work_dir is None or Capability.LOGS not in self.capabilities:
            return
        for node in self._nodes:
            try:
                proc = run_command(self.access.render("logs", node.node_id), check=False, timeout_s=60)
            except ClusterError:
                continue
            target = self.work_dir / f"node-{node.node_id}" / "server.log"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text((proc.stdout + proc.stderr)[-LOG_BYTES:])

    def info(self) -> dict[str, Any]:
        out = super().info()
        out["cluster_id"] = self.cluster_id
        if self.access is not None:
            out["access"] = {"kind": self.access.spec.access,
                             "actions": describe(self.access, sorted(self.access.nodes))}
        return out


def heal_run(cluster_dir: Path) -> list[dict[str, Any]]:
    """``kchaos heal``: undo every act the run directory's journal holds unhealed."""
    journal = HealJournal(cluster_dir / JOURNAL_NAME)
    if not journal.path.exists():
        raise ConfigError(f"{cluster_dir} has no heal journal ({JOURNAL_NAME}): the run touched no node kchaos "
                          "does not own", "kchaos heal is for runs against backend = 'external'")
    return heal_pending(journal, run_undo, "healed by kchaos heal")
