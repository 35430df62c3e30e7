"""The default backend: KRaft nodes as local JVM processes, with Toxiproxy in front of every link.

Topology (N brokers, combined mode unless ``dedicated_controllers`` > 0):

* Each broker has a ``CLIENT`` listener. It advertises the address of its client proxy
  (``client-n<i>``), so every client connection goes through Toxiproxy.
* Replication: broker *i* sets ``inter.broker.listener.name=REPL<i>``, and every broker *k*
  has one listener ``REPL<i>`` per broker *i*, advertised as the proxy ``repl-n<i>-to-n<k>``.
  Every ordered pair of brokers therefore has its own proxy, so one broker can be cut off from
  the others, a majority from a minority, or a ring formed, without touching client traffic.
* Quorum: each node's ``controller.quorum.voters`` names, for every other controller *c*, the
  proxy ``quorum-n<i>-to-n<c>`` (static voters are a per-node setting), so controller traffic
  can be partitioned pair by pair as well. A Raft leader also tells its followers where to fetch
  (its advertised controller endpoints, KIP-853), so like replication every controller *c* has
  one listener ``CTRL<i>`` per node *i*, advertised as ``quorum-n<i>-to-n<c>``, and node *i*
  names ``CTRL<i>`` first in ``controller.listener.names``.

Every process (JVMs and Toxiproxy) runs in its own process group with a pid file under
``<work_dir>/pids``; :func:`kchaos.runtime.processes.reap` finds them even after the harness crashed.
The port plan is in clusters/local/port_plan.py, the proxy names and the links as proxies in
clusters/proxy/links.py, the nodes' logging and small-machine settings and the cluster id in
clusters/node_config.py, the cleaner's checkpoints in clusters/compaction.py.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shlex
import shutil
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from kchaos.clusters.base import Capability, Cluster, Node, NodeInfo, Role
from kchaos.clusters.compaction import cleaned_offsets
from kchaos.clusters.local.port_plan import PortPlan
from kchaos.clusters.node_config import LOG4J1_PROPERTIES, LOG4J2_XML, SMALL_MACHINE_DEFAULTS, new_cluster_id
from kchaos.clusters.proxy.client import MessageProxyClient
from kchaos.clusters.proxy.links import proxy_name_client, proxy_name_quorum, proxy_name_repl
from kchaos.clusters.proxy.links import ProxyNetwork
from kchaos.clusters.proxy.toxiproxy import Proxy, ToxiproxyClient, ensure_toxiproxy_binary, start_toxiproxy
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import CapabilityError, ClusterError, ConfigError
from kchaos.files import atomic_write
from kchaos.log import client_log
from kchaos.rundir import NODE_DATA_DIR, NODE_DIR
from kchaos.runtime import faketime, small_disk
from kchaos.runtime.artifacts import JarSet, require_java, resolve_kafka
from kchaos.runtime.kafka_tools import run_tool, tool_jars
from kchaos.runtime.ports import HOST
from kchaos.runtime.processes import ManagedProcess, reap
from kchaos.waiting import WaitTimeout, wait_until

READY_TOPIC = "__kchaos_ready"


class LocalNode(Node):
    def __init__(self, cluster: "LocalJvmCluster", node_id: int, roles: frozenset[Role]):
        self.cluster = cluster
        self.node_id = node_id
        self.roles = roles
        self.dir = cluster.work_dir / NODE_DIR.format(node_id)
        self.data_dir = self.dir / NODE_DATA_DIR
        self.logs_dir = self.dir / "logs"
        self.config_path = self.dir / "server.properties"
        self.process: ManagedProcess | None = None
        #: set when the node was upgraded to another release than the cluster's (rolling upgrade)
        self.jars: JarSet | None = None
        self.version: str | None = None
        #: bumped at each start and stop, so a wait for an earlier start's port gives up
        self.port_generation = 0

    # -- process ---------------------------------------------------------------------------
    def _argv(self) -> list[str]:
        spec = self.cluster.spec
        jars = self.jars or self.cluster.jars
        assert jars is not None
        return [
            require_java(), f"-Xms{spec.heap_mb // 2}m", f"-Xmx{spec.heap_mb}m", *spec.jvm_opts,
            "-Djava.awt.headless=true", f"-Dkafka.logs.dir={self.logs_dir}",
            f"-Dlog4j2.configurationFile={self.cluster.work_dir / 'log4j2.xml'}",
            f"-Dlog4j.configuration=file:{self.cluster.work_dir / 'log4j.properties'}",
            "-cp", jars.classpath, "kafka.Kafka", str(self.config_path),
        ]

    @property
    def clock_control_file(self) -> Path:
        return self.dir / "faketime.rc"

    def _extra_env(self) -> dict[str, str]:
        """What the node's JVM gets on top of kchaos' environment: libfaketime's, under clock control."""
        if not self.cluster.spec.clock_control:
            return {}
        lib = self.cluster.faketime_library or faketime.ensure_library()  # (a cluster adopted from its state)
        if not self.clock_control_file.exists():
            faketime.write_offset(self.clock_control_file, 0.0)
        return faketime.environment(self.clock_control_file, lib)

    @property
    def start_script(self) -> Path:
        return self.dir / "start.sh"

    def _write_start_script(self) -> None:
        """``node-<i>/start.sh``: the node's command line as kchaos starts it, its output to its
        ``stdout.log``, for a campaign that drives a `kchaos cluster up` cluster with node commands
        of its own (access = "commands": docs/clusters.md)."""
        extra = self._extra_env()
        env = f"env {' '.join(shlex.quote(f'{k}={v}') for k, v in extra.items())} " if extra else ""
        self.start_script.write_text(
            f"#!/bin/sh\n# node {self.node_id} as kchaos starts it (written at each start)\n"
            f"exec {env}{shlex.join(self._argv())} >> {shlex.quote(str(self.logs_dir / 'stdout.log'))} 2>&1 < /dev/null\n")

    def _make_process(self) -> ManagedProcess:
        extra = self._extra_env()
        env = {**os.environ, **extra} if extra else None
        # the node is its main class and its config file, whoever started it (a campaign's node
        # command on a `kchaos cluster up` cluster restarts it behind the pid file's back)
        return ManagedProcess(f"node-{self.node_id}", self._argv(), self.logs_dir / "stdout.log",
                              self.cluster.pid_dir, marker=str(self.cluster.work_dir), env=env,
                              identity=("kafka.Kafka", str(self.config_path)))

    def fill_disk(self, leave_mb: float) -> dict[str, int]:
        if not self.cluster.spec.disk_limit_mb:
            raise CapabilityError(f"node {self.node_id}'s log directory is not on a small disk (cluster.disk_limit_mb)")
        return small_disk.fill(self.data_dir, leave_mb)

    def free_disk(self) -> int:
        return small_disk.free(self.data_dir) if self.cluster.spec.disk_limit_mb else 0

    def set_clock_offset(self, offset_s: float) -> None:
        if not self.cluster.spec.clock_control:
            raise CapabilityError(f"node {self.node_id} was started without clock control (cluster.clock_control)")
        faketime.write_offset(self.clock_control_file, offset_s)

    def start(self) -> None:
        if self.process is None:
            self.process = self._make_process()
        if not self.process.is_running():
            self._write_start_script()
            self.process.start()
            self.cluster.client_port_follows(self)

    def kill(self) -> None:
        if self.process:
            self.process.kill()
            self.cluster.client_port_follows(self)

    def terminate(self, timeout_s: float = 60.0) -> None:
        if self.process:
            self.process.terminate(timeout_s)
            self.cluster.client_port_follows(self)

    def pause(self) -> None:
        """SIGSTOP; returns once the kernel shows the process stopped (signals are asynchronous)."""
        if not self.is_running:
            raise ClusterError(f"node {self.node_id} is not running; it cannot be paused")
        assert self.process is not None
        self.process.pause()
        wait_until(lambda: self.process is not None and self.process.is_paused(), 5, 0.01,
                   f"node {self.node_id} did not stop after SIGSTOP")

    def resume(self) -> None:
        if self.process:
            self.process.resume()
            wait_until(lambda: self.process is None or not self.process.is_paused(), 5, 0.01,
                       f"node {self.node_id} did not continue after SIGCONT")

    def restart(self) -> None:
        self.terminate()
        self.start()

    @property
    def is_running(self) -> bool:
        return self.process is not None and self.process.is_running()

    @property
    def is_paused(self) -> bool:
        return self.process is not None and self.process.is_paused()

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process else None

    @property
    def log_paths(self) -> list[Path]:
        return sorted(self.logs_dir.glob("*.log")) if self.logs_dir.exists() else []

    # -- addresses -------------------------------------------------------------------------
    @property
    def direct_client_address(self) -> str | None:
        port = self.cluster.ports.client.get(self.node_id) if self.cluster.ports else None
        return f"{HOST}:{port}" if port else None

    @property
    def client_address(self) -> str | None:
        """What clients use (the proxy when client traffic is proxied)."""
        ports = self.cluster.ports
        if ports is None or not self.is_broker:
            return None
        port = ports.client_entry(self.node_id)
        return f"{HOST}:{port}"

    def info(self) -> NodeInfo:
        state = "stopped"
        if self.is_running:
            state = "paused" if self.is_paused else "running"
        proxy = None
        if self.cluster.ports and self.node_id in self.cluster.ports.proxy_client:
            proxy = f"{HOST}:{self.cluster.ports.proxy_client[self.node_id]}"
        return NodeInfo(self.node_id, tuple(sorted(r.value for r in self.roles)), self.pid, state,
                        self.direct_client_address, proxy, str(self.logs_dir))

    # -- configuration ---------------------------------------------------------------------
    def properties(self) -> dict[str, str]:
        c = self.cluster
        spec, ports = c.spec, c.ports
        assert ports is not None
        i = self.node_id
        listeners, advertised, protocols = [], [], {}
        if self.is_broker:
            listeners.append(f"CLIENT://{HOST}:{ports.client[i]}")
            advertised.append(f"CLIENT://{HOST}:{ports.client_entry(i)}")
            protocols["CLIENT"] = "PLAINTEXT"
            for src in c.broker_ids:
                name = f"REPL{src}"
                listeners.append(f"{name}://{HOST}:{ports.repl[f'{src}>{i}']}")
                adv = ports.proxy_repl.get(f"{src}>{i}", ports.repl[f"{src}>{i}"])
                advertised.append(f"{name}://{HOST}:{adv}")
                protocols[name] = "PLAINTEXT"
        # One controller listener per node that talks to this controller (CTRL<src>), advertised
        # as that node's proxy: a Raft leader sends its followers its advertised controller
        # endpoints (KIP-853) and each fetches from the one of its own listener name, so the
        # followers' fetches go through the proxies too and a partition cuts them.
        own = f"CTRL{i}" if ports.controller_in else "CONTROLLER"
        controller_names = [own]
        protocols[own] = "PLAINTEXT"
        if self.is_controller:
            listeners.append(f"{own}://{HOST}:{ports.controller[i]}")
            for src in sorted(set(c.controller_ids) | set(c.broker_ids)):
                pair = f"{src}>{i}"
                if src == i or pair not in ports.controller_in:
                    continue
                name = f"CTRL{src}"
                listeners.append(f"{name}://{HOST}:{ports.controller_in[pair]}")
                advertised.append(f"{name}://{HOST}:{ports.proxy_quorum.get(pair, ports.controller_in[pair])}")
                controller_names.append(name)
                protocols[name] = "PLAINTEXT"
            if ports.controller_in:
                advertised.append(f"{own}://{HOST}:{ports.controller[i]}")
        voters = ",".join(
            f"{ctl}@{HOST}:{ports.proxy_quorum.get(f'{i}>{ctl}', ports.controller[ctl])}"
            for ctl in c.controller_ids
        )
        rf, min_isr, parts = str(spec.replication_factor), str(spec.min_insync_replicas), str(spec.internal_topic_partitions)
        props = {
            "node.id": str(i),
            "process.roles": ",".join(r.value for r in sorted(self.roles, key=lambda r: r.value)),
            "controller.quorum.voters": voters,
            "controller.listener.names": ",".join(controller_names),
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": ",".join(f"{k}:{v}" for k, v in protocols.items()),
            "log.dirs": str(self.data_dir),
        }
        if advertised:
            props["advertised.listeners"] = ",".join(advertised)
        if self.is_broker:
            props["inter.broker.listener.name"] = f"REPL{i}"
        props.update(SMALL_MACHINE_DEFAULTS)
        props.update({
            "default.replication.factor": rf,
            "min.insync.replicas": min_isr,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": parts,
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": parts,
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "share.coordinator.state.topic.num.partitions": parts,
        })
        props.update(spec.broker)
        return props

    def write_config(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        lines = [f"# written by kchaos for node {self.node_id}"]
        lines += [f"{k}={v}" for k, v in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")


class LocalJvmCluster(Cluster):
    """KRaft nodes as JVM processes on this machine, from Maven-resolved jars."""

    backend_name = "local"

    def __init__(self, spec: ClusterSpec, work_dir: Path):
        super().__init__()
        if spec.backend != "local":
            raise ConfigError(f"LocalJvmCluster needs backend = 'local', not {spec.backend!r}")
        self.spec = spec
        self.work_dir = Path(work_dir).resolve()
        self.pid_dir = self.work_dir / "pids"
        self.kafka_version = spec.kafka_version
        self.jars: JarSet | None = None
        self.faketime_library: Path | None = None  # set by prepare() under clock_control
        self.cluster_id: str | None = None
        self.ports: PortPlan | None = None
        self.toxiproxy: ToxiproxyClient | None = None
        self._toxiproxy_process: ManagedProcess | None = None
        self.messages: MessageProxyClient | None = None
        self._message_process: ManagedProcess | None = None
        #: brokers whose client link a fault cut (partition clients=cut, client-link-down): a broker
        #: that starts meanwhile gets its client port back only at the network's heal
        self.client_links_cut: set[int] = set()
        #: held while a client proxy's state is decided: a cut and a broker's start never cross
        self.port_lock = threading.Lock()
        self._stopping = False
        ctl = spec.dedicated_controllers
        if ctl:
            self.controller_ids = list(range(1, ctl + 1))
            self.broker_ids = list(range(ctl + 1, ctl + spec.nodes + 1))
        else:
            self.controller_ids = list(range(1, spec.nodes + 1))
            self.broker_ids = list(self.controller_ids)
        self._nodes: list[LocalNode] = []
        for nid in sorted(set(self.controller_ids) | set(self.broker_ids)):
            roles = set()
            if nid in self.broker_ids:
                roles.add(Role.BROKER)
            if nid in self.controller_ids:
                roles.add(Role.CONTROLLER)
            self._nodes.append(LocalNode(self, nid, frozenset(roles)))

    @staticmethod
    def capabilities_for(spec: ClusterSpec) -> frozenset[Capability]:
        """What a local cluster of ``spec`` can do, known before it starts: everything, network and
        message faults only through the proxies the spec puts on its links."""
        caps = {Capability.KILL, Capability.TERMINATE, Capability.PAUSE, Capability.RESTART, Capability.LOGS,
                Capability.UPGRADE}
        if spec.proxy_clients:
            caps.add(Capability.NETWORK)
        if spec.proxy_internal:
            caps.add(Capability.PARTITION)
        if spec.proxy_messages:
            caps.add(Capability.MESSAGES)
        if spec.proxy_messages_between_brokers:
            caps.add(Capability.MESSAGES_BETWEEN_BROKERS)
        if spec.clock_control:
            caps.add(Capability.CLOCK)
        if spec.disk_limit_mb:
            caps.add(Capability.DISK)
        return frozenset(caps)

    @property
    def capabilities(self) -> frozenset[Capability]:  # type: ignore[override]
        return self.capabilities_for(self.spec)

    @property
    def nodes(self) -> list[LocalNode]:  # type: ignore[override]
        return list(self._nodes)

    @property
    def bootstrap_servers(self) -> str:
        addrs = [n.client_address for n in self._nodes if n.is_broker and n.client_address]
        if not addrs:
            raise ClusterError("the cluster has not been started (no client addresses yet)")
        return ",".join(addrs)

    @property
    def state_file(self) -> Path:
        return self.work_dir / "cluster.json"

    # -- lifecycle -------------------------------------------------------------------------
    def prepare(self) -> None:
        """Everything that can fail before a process starts: tools, jars, binary, ports."""
        require_java()
        self.jars = resolve_kafka(self.spec.kafka_version)
        if self.spec.clock_control:
            self.faketime_library = faketime.ensure_library()
        if self.spec.disk_limit_mb:
            small_disk.check_can_mount()
        if self.spec.proxy_clients or self.spec.proxy_internal:
            self._toxiproxy_binary = ensure_toxiproxy_binary()

    def start(self) -> None:
        self.stop()  # ducktape: start() first stops and cleans whatever is there
        self.prepare()
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        started = time.monotonic()
        self._clean()
        self.cluster_id = new_cluster_id()
        self.ports = PortPlan.build(self.spec, self.broker_ids, self.controller_ids,
                                    [n.node_id for n in self._nodes])
        (self.work_dir / "log4j2.xml").write_text(LOG4J2_XML)
        (self.work_dir / "log4j.properties").write_text(LOG4J1_PROPERTIES)
        for node in self._nodes:
            node.write_config()
            if self.spec.disk_limit_mb:
                small_disk.mount(node.data_dir, self.spec.disk_limit_mb)
        self._save_state()
        self._format_storage()
        self._start_toxiproxy()
        self._start_message_proxy()
        for node in self._nodes:
            node.start()
        self._wait_ready(started)
        self._save_state()

    def _clean(self) -> None:
        small_disk.unmount_all(self.work_dir, keep=False)  # a mount an earlier, killed harness left
        for node in self._nodes:
            shutil.rmtree(node.dir, ignore_errors=True)
        shutil.rmtree(self.work_dir / "toxiproxy", ignore_errors=True)
        shutil.rmtree(self.work_dir / "messages", ignore_errors=True)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.pid_dir.mkdir(parents=True, exist_ok=True)

    def _format_storage(self) -> None:
        features = []
        if self.spec.transaction_version is not None:
            features += ["--feature", f"transaction.version={self.spec.transaction_version}"]
        if self.spec.share_version is not None:
            features += ["--feature", f"share.version={self.spec.share_version}"]
        if self.spec.streams_version is not None:
            features += ["--feature", f"streams.version={self.spec.streams_version}"]

        def fmt(node: LocalNode) -> None:
            try:
                run_tool("storage", ["format", "-t", self.cluster_id or "", "-c", str(node.config_path), *features],
                         self.spec.kafka_version, self.jars, log4j_config=self.work_dir / "log4j2.xml",
                         logs_dir=node.logs_dir)  # the format's lines open the node's own server.log
            except ClusterError as exc:
                raise ClusterError(f"node {node.node_id} could not be formatted: {exc.cause.split(': ', 1)[-1]}",
                                   "check the cluster.broker overrides and feature levels against this Kafka release",
                                   detail=exc.detail) from None

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(self._nodes)) as pool:
            for future in [pool.submit(fmt, n) for n in self._nodes]:
                future.result()

    def _start_toxiproxy(self) -> None:
        ports = self.ports
        assert ports is not None
        if not (self.spec.proxy_clients or self.spec.proxy_internal):
            return
        assert self._toxiproxy_binary is not None
        self._toxiproxy_process, self.toxiproxy = start_toxiproxy(
            self._toxiproxy_binary, ports.toxiproxy_api, self.work_dir, self.pid_dir, self.planned_proxies())

    def _message_proxy_process(self) -> ManagedProcess:
        ports = self.ports
        assert ports is not None and ports.message_api is not None
        argv = [sys.executable, "-m", "kchaos.clusters.proxy", "--control", str(ports.message_api),
                "--events", str(self.work_dir / "messages" / "events.jsonl")]
        for broker, listen in ports.proxy_message.items():
            argv += ["--route", f"{broker}={listen}:{ports.client[broker]}"]
        for pair, listen in ports.proxy_message_repl.items():
            argv += ["--route", f"{pair}={listen}:{ports.repl[pair]}"]
        return ManagedProcess("message-proxy", argv, self.work_dir / "messages" / "message-proxy.log",
                              self.pid_dir, marker=str(self.work_dir))

    def _start_message_proxy(self) -> None:
        if not self.spec.proxy_messages:
            return
        assert self.ports is not None and self.ports.message_api is not None
        (self.work_dir / "messages").mkdir(parents=True, exist_ok=True)
        self._message_process = self._message_proxy_process()
        self._message_process.start()
        self.messages = MessageProxyClient(self.ports.message_api)
        try:
            wait_until(self.messages.version, 20, 0.1, "the message proxy did not answer", retry_on=(ClusterError,))
        except WaitTimeout as exc:
            raise ClusterError(str(exc), detail=self._tail(self.work_dir / "messages" / "message-proxy.log")) from None
        if self.spec.record_apis:  # evidence for the whole run, beside (and after) every fault
            self.messages.add_rule({"id": "kchaos-record", "kind": "observe", "apis": list(self.spec.record_apis),
                                    "count": 0})

    def planned_proxies(self) -> list[Proxy]:
        ports = self.ports
        assert ports is not None
        proxies = [Proxy(proxy_name_client(b), f"{HOST}:{p}", f"{HOST}:{ports.client_upstream(b)}")
                   for b, p in ports.proxy_client.items()]
        for pair, port in ports.proxy_repl.items():
            src, dst = (int(x) for x in pair.split(">"))
            proxies.append(Proxy(proxy_name_repl(src, dst), f"{HOST}:{port}", f"{HOST}:{ports.repl_upstream(pair)}"))
        for pair, port in ports.proxy_quorum.items():
            src, dst = (int(x) for x in pair.split(">"))
            proxies.append(Proxy(proxy_name_quorum(src, dst), f"{HOST}:{port}", f"{HOST}:{ports.quorum_upstream(pair)}"))
        return proxies

    def _wait_ready(self, started: float) -> None:
        """Ready: every broker registered and a topic with the full replication factor is writable."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import NewTopic

        deadline = started + self.spec.ready_timeout_s
        expected = set(self.broker_ids)

        def check_alive() -> None:
            for node in self._nodes:
                if not node.is_running:
                    raise ClusterError(f"node {node.node_id} exited during start-up",
                                       "read its log for the cause", detail=self._node_log_tail(node))

        def registered() -> bool:
            check_alive()
            md = self.admin().list_topics(timeout=5)
            return expected <= set(md.brokers)

        def topic_ready() -> bool:
            check_alive()
            md = self.admin().list_topics(timeout=5)
            if READY_TOPIC not in md.topics:
                fut = self.admin().create_topics(
                    [NewTopic(READY_TOPIC, 1, self.spec.replication_factor)], request_timeout=15)[READY_TOPIC]
                try:
                    fut.result()
                except Exception as exc:  # already exists is fine; anything else: retry
                    if "TOPIC_ALREADY_EXISTS" not in str(exc):
                        raise
            return True

        delivered: list[Any] = []
        producer: Any = None

        def writable() -> bool:
            nonlocal producer
            check_alive()
            if producer is None:
                producer = Producer(client_log({"log_level": 3, **self.client_config(), "acks": "all",
                                                "message.timeout.ms": "10000", "enable.idempotence": "true"}))
            producer.produce(READY_TOPIC, b"ready", callback=lambda err, msg: delivered.append(err))
            producer.flush(12)
            return bool(delivered) and delivered[-1] is None

        try:
            for step, err in ((registered, "not every broker registered"),
                              (topic_ready, f"could not create {READY_TOPIC}"),
                              (writable, f"{READY_TOPIC} was not writable with acks=all")):
                remaining = max(1.0, deadline - time.monotonic())
                wait_until(step, remaining, 0.5, err, retry_on=(Exception,), give_up_on=(ClusterError,))
        except WaitTimeout as exc:
            details = "\n".join(self._node_log_tail(n) for n in self._nodes)
            raise ClusterError(f"cluster not ready: {exc}",
                               f"read the node logs under {self.work_dir}; raise cluster.ready_timeout_s on a slow machine",
                               detail=details) from None
        finally:
            if producer is not None:  # drop queued messages so the client dies with this call
                producer.purge()
                producer.flush(0)
                del producer

    def _node_log_tail(self, node: LocalNode) -> str:
        return "\n".join(self._tail(p) for p in [node.logs_dir / "stdout.log", node.logs_dir / "server.log"])

    @staticmethod
    def _tail(path: Path, lines: int = 25) -> str:
        try:
            text = path.read_text(errors="replace").splitlines()[-lines:]
        except OSError:
            return f"(no {path})"
        return f"--- {path} ---\n" + "\n".join(text)

    def stop(self, graceful: bool = False) -> None:
        """Stop every node and Toxiproxy. Idempotent; anything left over is reaped by pid file."""
        self._stopping = True
        try:
            self._stop(graceful)
        finally:
            self._stopping = False
            self.client_links_cut.clear()

    def _stop(self, graceful: bool) -> None:
        self._close_admin()
        if graceful:
            for node in [n for n in self._nodes if not n.is_controller] + [n for n in self._nodes if n.is_controller]:
                node.terminate()
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(self._nodes))) as pool:
            list(pool.map(lambda n: n.kill(), self._nodes))
        for proc in (self._toxiproxy_process, self._message_process):
            if proc is not None:
                proc.kill()
        self._toxiproxy_process = self._message_process = None
        if self.pid_dir.exists():
            reap(self.pid_dir)
        if self.spec.disk_limit_mb:
            small_disk.unmount_all(self.work_dir)  # the brokers' data stays with the run
        self.toxiproxy = self.messages = None

    # -- rolling binary upgrade -----------------------------------------------------------
    def cleaned_offsets(self) -> dict[str, Any] | None:
        return cleaned_offsets(self.work_dir)

    def node_versions(self) -> dict[int, str]:
        return {n.node_id: n.version or self.kafka_version for n in self._nodes}

    def upgrade_node(self, node_id: int, version: str, timeout_s: float = 120.0) -> dict[str, Any]:
        """Stop ``node_id`` gracefully and start it again on the jars of ``version`` (same config
        and data): one step of a rolling upgrade. Returns what was done."""
        node = self.node(node_id)
        assert isinstance(node, LocalNode)
        jars = resolve_kafka(version)  # cached; resolved before the node stops
        before = node.version or self.kafka_version
        server_log = node.logs_dir / "server.log"
        starts_before = self._count_started(server_log)
        started = time.monotonic()
        node.terminate(timeout_s)
        node.jars, node.version = jars, version
        node.process = None  # a new command line: the new release's classpath
        node.start()
        self._save_state()
        # Started means the node says so in its log (metadata about it can lag behind a restart)
        wait_until(lambda: self._count_started(server_log) > starts_before or not node.is_running, timeout_s, 0.2,
                   f"node {node_id} did not start on Kafka {version} within {timeout_s:.0f}s")
        if not node.is_running:
            raise ClusterError(f"node {node_id} exited when started on Kafka {version}",
                               detail=self._node_log_tail(node))
        return {"node": node_id, "from": before, "to": version, "restart_s": round(time.monotonic() - started, 1)}

    @staticmethod
    def _count_started(server_log: Path) -> int:
        try:
            return server_log.read_text(errors="replace").count("Kafka Server started")
        except OSError:
            return 0

    def finish_upgrade(self, version: str) -> None:
        """Every node runs ``version``: it becomes the cluster's version (its tools too)."""
        if any(v != version for v in self.node_versions().values()):
            raise ClusterError(f"not every node runs {version}: {self.node_versions()}")
        self.kafka_version = version
        self.jars = resolve_kafka(version)
        for node in self._nodes:
            node.jars = node.version = None
        self._save_state()

    # -- persistence for `kchaos cluster up/status/down` -----------------------------------
    def _save_state(self) -> None:
        state = {
            "backend": "local",
            "spec": self.spec.model_dump(mode="json"),
            "cluster_id": self.cluster_id,
            "ports": self.ports.to_json() if self.ports else None,
            "jars": str(self.jars.directory) if self.jars else None,
            "kafka_version": self.kafka_version,
            "node_jars": {str(n.node_id): [n.version, str(n.jars.directory)] for n in self._nodes if n.jars},
        }
        atomic_write(self.state_file, json.dumps(state, indent=2))

    def info(self) -> dict[str, Any]:
        """The base facts, plus which release the brokers and the admin tools come from (they
        differ when a release's kafka-tools is not on the registry: kchaos/runtime/kafka_tools.py)."""

        return {**super().info(), "cluster_id": self.cluster_id, "kafka_version": self.kafka_version,
                "admin_tools_version": tool_jars("features", self.kafka_version)[1]}

    @classmethod
    def attach(cls, work_dir: Path) -> "LocalJvmCluster":
        """Re-open a cluster started by another process (``kchaos cluster up``)."""
        state_file = Path(work_dir) / "cluster.json"
        try:
            state = json.loads(state_file.read_text())
        except (OSError, ValueError) as exc:
            raise ClusterError(f"no cluster state at {state_file} ({exc})", "run `kchaos cluster up` first") from None
        if not isinstance(state, dict) or "spec" not in state or "ports" not in state:
            raise ClusterError(f"{state_file} is not a kchaos cluster state file",
                               "pass the cluster directory (for a run: RUN_DIR/cluster)")
        cluster = cls(ClusterSpec.model_validate(state["spec"]), Path(work_dir))
        cluster.cluster_id = state.get("cluster_id")
        cluster.ports = PortPlan.from_json(state["ports"]) if state.get("ports") else None
        cluster.kafka_version = state.get("kafka_version") or cluster.spec.kafka_version
        if state.get("jars"):
            cluster.jars = JarSet(f"kafka-{cluster.kafka_version}", Path(state["jars"]))
        for node_id, (version, directory) in (state.get("node_jars") or {}).items():
            node = cluster.node(int(node_id))
            assert isinstance(node, LocalNode)
            node.version, node.jars = version, JarSet(f"kafka-{version}", Path(directory))
        for node in cluster._nodes:
            node.process = node._make_process() if cluster.jars else None
            if node.process is not None:
                node.process.adopt()
        if cluster.ports is not None and (cluster.spec.proxy_clients or cluster.spec.proxy_internal):
            cluster.toxiproxy = ToxiproxyClient(f"http://{HOST}:{cluster.ports.toxiproxy_api}")
            proc = ManagedProcess("toxiproxy", [str(cluster.work_dir)], cluster.work_dir / "toxiproxy" / "toxiproxy.log",
                                  cluster.pid_dir, marker=str(cluster.work_dir))
            if proc.adopt():
                cluster._toxiproxy_process = proc
        if cluster.ports is not None and cluster.spec.proxy_messages and cluster.ports.message_api is not None:
            cluster.messages = MessageProxyClient(cluster.ports.message_api)
            proc = cluster._message_proxy_process()
            if proc.adopt():
                cluster._message_process = proc
        return cluster

    # -- role look-ups ---------------------------------------------------------------------
    def active_controller(self) -> int:
        """The quorum leader, from the voters' ``quorum-state`` files (highest epoch wins)."""
        best: tuple[int, int] | None = None
        for node in self._nodes:
            if not node.is_controller or not node.is_running or node.is_paused:
                continue
            path = node.data_dir / "__cluster_metadata-0" / "quorum-state"
            try:
                state = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
            leader, epoch = int(state.get("leaderId", -1)), int(state.get("leaderEpoch", -1))
            if leader >= 0 and (best is None or epoch > best[1]):
                best = (leader, epoch)
        if best is None:
            return super().active_controller()
        return best[0]

    # -- network ---------------------------------------------------------------------------
    def client_port_follows(self, node: "LocalNode") -> None:
        """A broker's client proxy refuses connections while the broker is down, as the broker's
        own port does. Left open, Toxiproxy would accept a connection and close it at once when it
        cannot reach the broker: franz-go reads that end-of-file on its first request as a TLS
        mismatch and fails InitProducerId without retrying (kgo.ErrFirstReadEOF), where a dead
        broker's refused connection is retried; every client then sees what it sees without a
        proxy. A broker that starts gets its port back once it listens, unless a fault cut it."""
        if self._stopping or self.toxiproxy is None or self.ports is None or node.node_id not in self.ports.proxy_client:
            return
        with self.port_lock:
            node.port_generation += 1
            generation, name = node.port_generation, proxy_name_client(node.node_id)
            if not node.is_running:
                self._set_client_proxy(name, False)
                return
        threading.Thread(target=self._open_client_port_when_listening, args=(node, generation, name),
                         name=f"client-port-n{node.node_id}", daemon=True).start()

    def _open_client_port_when_listening(self, node: "LocalNode", generation: int, name: str) -> None:
        assert self.ports is not None
        port, deadline = self.ports.client[node.node_id], time.monotonic() + self.spec.ready_timeout_s
        while time.monotonic() < deadline and node.port_generation == generation and node.is_running:
            try:
                socket.create_connection((HOST, port), timeout=1.0).close()
            except OSError:
                time.sleep(0.1)
                continue
            with self.port_lock:
                if node.port_generation == generation and node.node_id not in self.client_links_cut:
                    self._set_client_proxy(name, True)
            return

    def _set_client_proxy(self, name: str, enabled: bool) -> None:
        client = self.toxiproxy
        if client is None:
            return
        try:
            client.set_enabled(name, enabled)
        except ClusterError:  # Toxiproxy stopped with the cluster meanwhile
            pass

    def close_dead_client_ports(self) -> None:
        """After the network's heal (which enables every proxy): the ports of brokers that are down."""
        with self.port_lock:
            self.client_links_cut.clear()
        for node in self._nodes:
            if node.is_broker and not node.is_running:
                self.client_port_follows(node)

    @property
    def network(self) -> "ProxyNetwork":
        if not self.has(Capability.PARTITION):
            self.require(Capability.NETWORK)
        if self.toxiproxy is None or self.ports is None:
            raise ClusterError("the cluster is not running; its network cannot be changed")
        return ProxyNetwork(self)
