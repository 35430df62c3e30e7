"""kchaos' workers on other Kafka clients: franz-go and IBM/sarama (Go), aiokafka and
kafka-python (Python), KafkaJS (Node). Each is a small standalone program in its client's
language (``workloads/clients/``, package data), following that client's documented exactly-once
pattern, and records the same history as ``workloads/ctp_worker.py`` (docs/clients.md).

kchaos builds each once per (sources, pinned versions) into its cache, from the registries, the
way it builds Toxiproxy: ``go build`` of one module (both Go workers) through the Go module proxy,
``npm ci`` of a pinned lock file, a virtualenv of its own with the two Python clients pinned (they
are not the project's dependencies: a worker runs in its own interpreter). Another release of one
client (a fleet slot's, workloads/registry.py, which says which releases each client takes) is
built the same way into a place of its own: the Go module copied with that release required
(``go mod edit`` and ``go mod tidy``), ``npm install kafkajs@X``, a virtualenv with that release. A
build is made beside its final place and renamed, under a lock, so a build cut short never looks
built.

A worker gets the pool's JSON config with one more key, ``properties``: the producer and consumer
properties kchaos resolved for it (its defaults, then the campaign's ``[workload.producer]`` /
``[workload.consumer]``), in Kafka's property names; each worker maps the names it supports
(``NativeClient.producer_properties``) onto its client's own options. Any other name is refused
when the campaign loads. It also gets its consumer's KIP-345 ``group_instance_id`` (None: a
dynamic member) and ``not_honoured``: the campaign's settings its client cannot express, which it
records in its first history line (``settings``) rather than refuse the campaign for them.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.resources
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kchaos.errors import SetupError
from kchaos.paths import cache_dir
from kchaos.workloads.client_settings import static_member_id

#: the workers' sources, installed by a wheel as plain files beside this module
SOURCES = Path(str(importlib.resources.files("kchaos.workloads").joinpath("clients")))

Toolchain = Literal["go", "node", "python"]

#: kchaos' producer defaults for every client worker, as for the librdkafka and Java workers
#: (client_settings.CONFLUENT_PRODUCER says why: acks=all for idempotence, a 5 ms linger, a 10 ms
#: retry backoff that removes the per-transaction CONCURRENT_TRANSACTIONS floor)
NATIVE_PRODUCER_DEFAULTS: dict[str, str | int | float | bool] = {"acks": "all", "linger.ms": 5, "retry.backoff.ms": 10}

#: the campaign property names every worker maps onto its client (Kafka's names; acks is always
#: all, as idempotence demands, so a campaign cannot set it)
_COMMON_PRODUCER = frozenset({"retry.backoff.ms", "request.timeout.ms"})
_COMMON_CONSUMER = frozenset({"max.poll.interval.ms"})


@dataclass(frozen=True)
class NativeClient:
    """One client's worker: what it is built from and what it can express (its releases and what
    each supports: workloads/registry.py)."""

    name: str                 #: workload.client
    library_name: str         #: the client library, as the report names it
    package: str              #: what is fetched: the Go module, the PyPI or npm package
    pinned: str               #: the release of the default build (go.mod, package-lock.json, PYTHON_REQUIREMENTS)
    toolchain: Toolchain
    entry: str                #: go: the package directory; node and python: the script
    producer_properties: frozenset[str]
    consumer_properties: frozenset[str]
    deliveries: tuple[str, ...] = ("exactly-once", "at-least-once", "at-least-once-no-idempotence")
    group_protocols: tuple[str, ...] = ("classic",)
    #: per-partition: a producer per input partition, "<prefix>-<input topic>-<p>" (sarama's example)
    txid_strategies: tuple[str, ...] = ("per-worker",)
    #: the client's option for KIP-345's group.instance.id (workload.static_membership); None: the
    #: client has none, and its workers join as dynamic members
    instance_id_option: str | None = None
    #: the client gives up after a count of retries (sarama: Producer.Retry.Max 3, Transaction.Retry.Max
    #: 50; KafkaJS: retries 5), not after a time: kchaos' short backoff would cut its retry budget ten-
    #: to thirtyfold (KafkaJS's from about 9 s to 0.3 s), a harsher client than its users run, so its
    #: own backoff stands unless the campaign sets retry.backoff.ms (docs/clients.md)
    counts_retries: bool = False

    @property
    def library(self) -> str:
        """The library and the pinned release: ``franz-go 1.22.3``."""
        return f"{self.library_name} {self.pinned}"

    def library_at(self, version: str | None) -> str:
        return f"{self.library_name} {version or self.pinned}"

    def producer_defaults(self) -> dict[str, str | int | float | bool]:
        """kchaos' producer defaults for this client's worker, under the campaign's own."""
        return {k: v for k, v in NATIVE_PRODUCER_DEFAULTS.items()
                if not (self.counts_retries and k == "retry.backoff.ms")}


CLIENTS: dict[str, NativeClient] = {c.name: c for c in (
    NativeClient("franz-go", "franz-go", "github.com/twmb/franz-go", "1.22.3", "go", "franzgo",
                 _COMMON_PRODUCER | {"linger.ms", "delivery.timeout.ms"}, _COMMON_CONSUMER | {"fetch.max.wait.ms"},
                 group_protocols=("classic", "consumer"), instance_id_option="kgo.InstanceID"),
    NativeClient("sarama", "IBM/sarama", "github.com/IBM/sarama", "1.61.1", "go", "sarama",
                 _COMMON_PRODUCER | {"linger.ms"}, _COMMON_CONSUMER | {"fetch.max.wait.ms"},
                 txid_strategies=("per-worker", "per-partition"), instance_id_option="Consumer.Group.InstanceId",
                 counts_retries=True),
    # aiokafka 0.14.0 has no delivery timeout (its producer takes no delivery_timeout_ms): a batch
    # without an answer is retried until the transaction ends
    NativeClient("aiokafka", "aiokafka", "aiokafka", "0.14.0", "python", "aiokafka_worker.py",
                 _COMMON_PRODUCER | {"linger.ms"}, _COMMON_CONSUMER | {"fetch.max.wait.ms"},
                 instance_id_option="group_instance_id"),
    NativeClient("kafka-python", "kafka-python", "kafka-python", "3.0.12", "python", "kafka_python_worker.py",
                 _COMMON_PRODUCER | {"linger.ms", "delivery.timeout.ms"}, _COMMON_CONSUMER | {"fetch.max.wait.ms"},
                 instance_id_option="group_instance_id"),
    # KafkaJS 2.2.4 encodes a group instance id in its JoinGroup v5+ / SyncGroup v3+ / Heartbeat
    # v3+ requests, but its consumer has no option for one and never passes it (broker/index.js)
    NativeClient("kafkajs", "kafkajs", "kafkajs", "2.2.4", "node", "worker.js",
                 _COMMON_PRODUCER, _COMMON_CONSUMER | {"fetch.max.wait.ms"}, counts_retries=True),
)}

#: the pinned Python clients of the Python workers' own virtualenv
PYTHON_REQUIREMENTS = tuple(f"{c.package}=={c.pinned}" for c in CLIENTS.values() if c.toolchain == "python")


def check_native_workload(client: str, delivery: str, group_protocol: str, producer: dict[str, Any],
                          consumer: dict[str, Any], version: str | None = None) -> None:
    """What a client's worker cannot do is a load error (ValueError, as the spec's validators raise)."""
    native = CLIENTS[client]
    library = native.library_at(version)
    if delivery not in native.deliveries:
        raise ValueError(f"client = {client!r} cannot run delivery = {delivery!r} (it runs "
                         f"{', '.join(native.deliveries)}; docs/clients.md)")
    # KIP-848's protocol where the client lacks it: its worker joins a classic group (not_honoured)
    if group_protocol not in native.group_protocols and group_protocol != "consumer":
        raise ValueError(f"client = {client!r}: {library} does not speak group_protocol = {group_protocol!r} "
                         f"(it speaks {', '.join(native.group_protocols)}; docs/clients.md)")
    for table, given, known in (("producer", producer, native.producer_properties),
                                ("consumer", consumer, native.consumer_properties)):
        for name in sorted(given):
            if name not in known:
                raise ValueError(f"workload.{table}.{name}: the {client} worker does not map this property onto "
                                 f"{library} (it maps {', '.join(sorted(known))}; docs/clients.md)")


def not_honoured(workload: dict[str, Any], client: str | None = None, version: str | None = None,
                 group_protocol: str | None = None) -> dict[str, str]:
    """The campaign's settings (``workload`` as a dict) a client's worker runs without, and why. A
    worker records them when it starts (its ``settings`` event); ``kchaos plan`` names them.
    ``client`` and ``version``: the slot's (a fleet's slots differ; default: the workload's client
    at its pinned release); ``group_protocol``: the protocol the slot joins with (the registry's
    answer for that release, workloads/registry.py; default: the workload's where the client speaks it)."""
    native = CLIENTS[client or workload["client"]]
    library = native.library_at(version)
    wanted = workload.get("group_protocol")
    joins = group_protocol or (wanted if wanted in native.group_protocols else "classic")
    out: dict[str, str] = {}
    if workload.get("static_membership") and native.instance_id_option is None:
        out["workload.static_membership"] = (f"{library} has no group instance id (KIP-345): the worker "
                                             "joins as a dynamic member")
    if wanted == "consumer" and joins != "consumer":
        out["workload.group_protocol"] = (f"{library} has no KIP-848 consumer protocol: the worker joins a "
                                          "classic group (session timeout, heartbeats and rebalances of the classic "
                                          "protocol)")
    if workload.get("client_properties"):
        out["workload.client_properties"] = (f"{', '.join(sorted(workload['client_properties']))}'s own property "
                                             "names: not given to this client's worker")
    return out


def worker_config(config: dict[str, Any]) -> dict[str, Any]:
    """The pool's worker config with the resolved client properties (Kafka's names, as strings),
    the slot's group instance id where the client can join as a static member, and what it cannot
    honour. ``config["slot"]`` (the pool's): the slot's client, release and group protocol."""
    spec = config["workload"]
    slot = config.get("slot") or {}
    native = CLIENTS[slot.get("client") or spec["client"]]
    producer = {**native.producer_defaults(), **(spec.get("producer") or {})}
    consumer = dict(spec.get("consumer") or {})
    as_text = {True: "true", False: "false"}
    static = bool(spec.get("static_membership")) and native.instance_id_option is not None
    return {**config, "properties": {
        "producer": {k: as_text.get(v, str(v)) if isinstance(v, bool) else str(v) for k, v in producer.items()},
        "consumer": {k: as_text.get(v, str(v)) if isinstance(v, bool) else str(v) for k, v in consumer.items()}},
        "group_instance_id": static_member_id(spec["group_id"], config["worker"]) if static else None,
        "not_honoured": not_honoured(spec, native.name, slot.get("version"), slot.get("group_protocol"))}


def native_argv(program: list[str], config_path: Path, config: dict[str, Any]) -> list[str]:
    """Write the worker's config beside the pool's and return the command that runs it
    (``program``: worker_program's, for the slot's client and release)."""
    path = config_path.with_suffix(".native.json")
    path.write_text(json.dumps(worker_config(config), indent=2))
    return [*program, str(path)]


def worker_program(client: str, version: str | None = None, go_tags: tuple[str, ...] = ()) -> list[str]:
    """The command (without its config argument) that runs ``client``'s worker, built once: the
    pinned build, or (``version``, a release other than the pinned one) a build of its own against
    that release from the client's registry (``go_tags``: build tags of a Go worker for that
    release, workloads/registry.py)."""
    native = CLIENTS[client]
    version = None if version == native.pinned else version
    if native.toolchain == "go":
        home = _go_build() if version is None else _go_build_at(native, version, go_tags)
        return [str(home / "bin" / native.entry)]
    if native.toolchain == "node":
        return [_require("node", "KafkaJS's worker runs on Node.js 18+", "apt-get install nodejs npm"),
                str((_node_build() if version is None else _node_build_at(native, version)) / native.entry)]
    home = _python_build() if version is None else _python_build_at(native, version)
    return [str(home / "venv" / "bin" / "python"), str(home / native.entry)]


def build_all(say: Any = print) -> None:
    """Every worker whose toolchain is on this machine (``kchaos setup``); the others are named."""
    for toolchain, tool, build in (("go", "go", _go_build), ("node", "npm", _node_build),
                                   ("python", None, _python_build)):
        names = ", ".join(c.name for c in CLIENTS.values() if c.toolchain == toolchain)
        if tool is not None and _which(tool) is None:
            say(f"client workers ({names}): skipped ({tool} not found)")
            continue
        say(f"client workers ({names}): {build()}")


# -- builds ------------------------------------------------------------------------------------
def _which(tool: str) -> str | None:
    found = shutil.which(tool)
    if found is None and tool == "go" and os.path.exists("/usr/local/go/bin/go"):
        return "/usr/local/go/bin/go"
    return found


def _require(tool: str, why: str, hint: str) -> str:
    found = _which(tool)
    if found is None:
        raise SetupError(f"{tool} was not found: {why}", hint)
    return found


def _digest(folder: Path, extra: str = "") -> str:
    files = sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    h = hashlib.sha256(extra.encode())
    for p in files:
        h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes())
    return h.hexdigest()[:12]


def _built(kind: str, source: Path, marker: str, build: Any, extra: str = "") -> Path:
    """``<cache>/clients/<kind>-<digest>``, made by ``build(work_dir)`` once: built in a temporary
    directory beside it and renamed, under a lock (two runs or test workers at once)."""
    target = cache_dir() / "clients" / f"{kind}-{_digest(source, extra)}"
    if (target / marker).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / marker).exists():
            return target
        work = Path(tempfile.mkdtemp(prefix=f".{kind}-", dir=target.parent))
        try:
            shutil.copytree(source, work, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
            build(work)
            if target.exists():
                shutil.rmtree(target)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target


def _run(argv: list[str], cwd: Path, what: str, hint: str, env: dict[str, str] | None = None,
         timeout: float = 900) -> None:
    try:
        proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SetupError(f"{what} took longer than {timeout:g}s", hint) from None
    if proc.returncode != 0:
        raise SetupError(f"{what} failed", hint, detail=(proc.stdout + proc.stderr)[-3000:])


def _go_build() -> Path:
    go = _require("go", "kchaos builds its franz-go and sarama workers with `go build`",
                  "install Go 1.26+ (https://go.dev/doc/install)")

    def build(work: Path) -> None:
        env = dict(os.environ, GOFLAGS="-mod=readonly -buildvcs=false", CGO_ENABLED="0")
        (work / "bin").mkdir()
        _run([go, "build", "-trimpath", "-o", str(work / "bin"), "./..."], work,
             "building the Go workers (franz-go, sarama)", "check that the Go module proxy is reachable (GOPROXY) "
             "and Go is 1.26 or later", env=env)
        (work / "bin" / ".complete").write_text("")

    return _built("go", SOURCES / "go", "bin/.complete", build)


def _node_build() -> Path:
    npm = _require("npm", "kchaos installs KafkaJS with npm", "apt-get install nodejs npm")

    def build(work: Path) -> None:
        _run([npm, "ci", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts"], work,
             "npm ci of the KafkaJS worker", "check that the npm registry is reachable")

    return _built("node", SOURCES / "node", "node_modules/kafkajs/package.json", build)


def _python_build() -> Path:
    def build(work: Path) -> None:
        _run([sys.executable, "-m", "venv", str(work / "venv")], work, "making the Python workers' virtualenv",
             "install Python's venv module (apt-get install python3-venv)")
        _run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              *PYTHON_REQUIREMENTS], work, f"pip install {' '.join(PYTHON_REQUIREMENTS)}",
             "check that PyPI is reachable")
        (work / "requirements.installed").write_text("\n".join(PYTHON_REQUIREMENTS) + "\n")

    return _built("python", SOURCES / "python", "requirements.installed", build,
                  extra=" ".join((sys.version, *PYTHON_REQUIREMENTS)))


# -- builds for another release than the pinned one ----------------------------------------------
def _go_build_at(native: NativeClient, version: str, tags: tuple[str, ...]) -> Path:
    """The worker of one Go client against ``version``: a copy of the module without the other
    client's package, ``go mod edit -require`` of that release and ``go mod tidy`` through the Go
    module proxy (its checksum database verifying what it fetches), then ``go build`` of the one
    worker with ``tags``. Cached per (sources, client, release, tags)."""
    go = _require("go", f"kchaos builds its {native.name} worker with `go build`",
                  "install Go 1.26+ (https://go.dev/doc/install)")
    others = [c.entry for c in CLIENTS.values() if c.toolchain == "go" and c.name != native.name]

    def build(work: Path) -> None:
        for entry in others:
            shutil.rmtree(work / entry)
        env = dict(os.environ, GOFLAGS="-mod=mod -buildvcs=false", CGO_ENABLED="0")
        _run([go, "mod", "edit", f"-require={native.package}@v{version}"], work, "go mod edit", "", env=env)
        _run([go, "mod", "tidy"], work, f"fetching {native.package} v{version} from the Go module proxy",
             f"check that {native.library_name} {version} is a release (go list -m -versions {native.package}) "
             "and that the Go module proxy is reachable (GOPROXY)", env=env)
        (work / "bin").mkdir()
        _run([go, "build", "-trimpath", *([f"-tags={','.join(tags)}"] if tags else []), "-o", str(work / "bin"),
              f"./{native.entry}"], work, f"building kchaos' {native.name} worker against {native.library_name} "
             f"{version}", f"use a release kchaos' worker builds against (docs/clients.md, \"Versions\")",
             env=dict(env, GOFLAGS="-mod=readonly -buildvcs=false"))
        (work / "bin" / ".complete").write_text("")

    return _built(f"go-{native.name}-{version}", SOURCES / "go", "bin/.complete", build,
                  extra=f"{native.name} {version} {' '.join(tags)}")


def _node_build_at(native: NativeClient, version: str) -> Path:
    """KafkaJS ``version`` from the npm registry (``npm install kafkajs@X --save-exact``, no lock
    file of kchaos' own: npm writes the one it resolved beside the worker)."""
    npm = _require("npm", "kchaos installs KafkaJS with npm", "apt-get install nodejs npm")

    def build(work: Path) -> None:
        (work / "package-lock.json").unlink(missing_ok=True)
        package = json.loads((work / "package.json").read_text())
        package["dependencies"] = {native.package: version}
        (work / "package.json").write_text(json.dumps(package, indent=2) + "\n")
        _run([npm, "install", "--omit=dev", "--no-audit", "--no-fund", "--ignore-scripts", "--save-exact",
              f"{native.package}@{version}"], work, f"npm install {native.package}@{version}",
             f"check that {native.package} {version} is a release (npm view {native.package} versions) and that the "
             "npm registry is reachable")

    return _built(f"node-{native.name}-{version}", SOURCES / "node", f"node_modules/{native.package}/package.json",
                  build, extra=f"{native.name} {version}")


def _python_build_at(native: NativeClient, version: str) -> Path:
    """A virtualenv of its own with ``<package>==version`` from PyPI, beside the Python workers."""
    requirement = f"{native.package}=={version}"

    def build(work: Path) -> None:
        _run([sys.executable, "-m", "venv", str(work / "venv")], work, f"making the {native.name} {version} virtualenv",
             "install Python's venv module (apt-get install python3-venv)")
        _run([str(work / "venv" / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
              requirement], work, f"pip install {requirement}",
             f"check that {native.package} {version} is a release on PyPI for Python "
             f"{sys.version_info.major}.{sys.version_info.minor} (pip index versions {native.package}) and that PyPI "
             "is reachable")
        (work / "requirements.installed").write_text(requirement + "\n")

    return _built(f"python-{native.name}-{version}", SOURCES / "python", "requirements.installed", build,
                  extra=f"{sys.version} {requirement}")
