"""The Java workload drivers: ``workloads/java/KchaosCtpWorker.java`` on ``kafka-clients`` and
``workloads/java/KchaosStreamsApp.java``, a Kafka Streams application on ``kafka-streams``.

librdkafka (confluent-kafka) speaks the classic transaction protocol only, even on a cluster
with ``transaction.version=2``; the Java producer speaks KIP-890's (TV2) when the cluster has it.
kchaos resolves ``org.apache.kafka:<artifact>:<version>`` (and slf4j-simple, into the worker's log) from
Maven Central like the broker jars, compiles the driver once per (sources, version) into the
cache, and starts it with a flat ``.properties`` file: client settings as they are, kchaos'
own settings under ``kchaos.*``.
"""

from __future__ import annotations

import importlib.resources
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.clusters.client_security import java_client_properties, properties_text
from kchaos.errors import ConfigError
from kchaos.runtime.artifacts import MavenArtifact, require_java, resolve_jars, validate_kafka_version
from kchaos.runtime.java_build import compiled_classes
from kchaos.workloads.client_settings import JAVA_PRODUCER, java_value

# Package data (kchaos.workloads: java/*.java): a wheel installs it as a plain file beside this module.
SOURCES = Path(str(importlib.resources.files("kchaos.workloads").joinpath("java")))
# slf4j-simple, not a silent binding: a worker's Kafka and Streams log goes to its log file in the
# run directory (warnings, and Streams' own state and assignment lines), which is evidence a lead
# needs (a Streams instance RUNNING with no tasks said nothing under slf4j-nop)
SLF4J_SIMPLE = MavenArtifact("org.slf4j", "slf4j-simple", "1.7.36")
LOG_LEVELS = {"defaultLogLevel": "warn", "log.org.apache.kafka.streams": "info", "showDateTime": "true",
              "dateTimeFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSZ", "showThreadName": "true", "showShortLogName": "true"}


@dataclass(frozen=True)
class Driver:
    """A Java program kchaos runs as a worker: its main class, the sources it is compiled from
    (the Streams application reuses the worker's history and JSON writers) and the artifact it
    runs on."""

    main_class: str
    sources: tuple[str, ...]
    artifact: str

    def jars(self, version: str) -> Any:
        return resolve_jars(f"{self.artifact}-{version}-logged",
                            [MavenArtifact("org.apache.kafka", self.artifact, version), SLF4J_SIMPLE],
                            missing_hint=f"{self.artifact} {version} is not on Maven Central; use a released version")


CTP_WORKER = Driver("KchaosCtpWorker", ("KchaosCtpWorker.java",), "kafka-clients")
STREAMS_APP = Driver("KchaosStreamsApp", ("KchaosCtpWorker.java", "KchaosStreamsApp.java"), "kafka-streams")


def client_classpath(version: str, driver: Driver = CTP_WORKER) -> str:
    """The compiled driver and the jars of ``version`` it runs on, as one classpath; built once."""
    validate_kafka_version(version)
    jars = driver.jars(version)
    classes = compiled_classes(driver.main_class, [SOURCES / name for name in driver.sources], jars.classpath, version,
                               f"the Java driver {driver.main_class} (workload.client = 'java' or 'streams') against "
                               f"{driver.artifact} {version}", "use a release the driver supports (kafka-clients 3.0.0 or later, "
                               "kafka-streams 4.0.0 or later)")
    return f"{classes}:{jars.classpath}"


def worker_properties(config: dict[str, Any]) -> str:
    """The ``.properties`` text the Java driver reads, from the Python worker's config dict."""
    spec = config["workload"]
    client = {k: str(v) for k, v in config["client"].items()}
    # librdkafka's security settings in Java's dialect, secrets as references the JVM resolves
    lines = {**{k: v for k, v in client.items() if not k.startswith(("ssl.", "sasl.", "security."))},
             **java_client_properties(client),
             "kchaos.worker": config["worker"], "kchaos.incarnation": str(config["incarnation"]),
             "kchaos.transactional.id": f"{config['txid_prefix']}-{config['worker']}",
             "kchaos.seed": str(config["seed"]), "kchaos.history.path": config["history_path"],
             "kchaos.input.topic": spec["input_topic"], "kchaos.output.topics": ",".join(spec["output_topics"]),
             "kchaos.outputs.per.input": str(spec["outputs_per_input"]), "kchaos.max.batch": str(spec["max_batch"]),
             "kchaos.process.delay.ms": str(spec["process_delay_ms"]),
             "kchaos.abort.fraction": repr(float(spec["abort_fraction"])),
             "kchaos.transaction.timeout.ms": str(spec["transaction_timeout_ms"]),
             "kchaos.session.timeout.ms": str(spec["session_timeout_ms"]), "kchaos.isolation": spec["isolation"],
             "kchaos.group.id": spec["group_id"],
             # KIP-345 (workload.static_membership): empty for a dynamic member
             "kchaos.group.instance.id": f"{spec['group_id']}-{config['worker']}" if spec.get("static_membership")
             else "",
             # the slot's protocol: the campaign's, or classic where its release lacks KIP-848 (registry.py)
             "kchaos.group.protocol": (config.get("slot") or {}).get("group_protocol") or spec.get("group_protocol")
             or "classic",
             **campaign_properties(spec)}
    if spec["client"] == "streams":
        lines.update({"kchaos.streams.guarantee": STREAMS_GUARANTEE[spec["delivery"]],
                      "kchaos.streams.group.protocol": spec.get("group_protocol") or "classic",
                      "kchaos.streams.threads": str(spec["streams_threads"]),
                      "kchaos.streams.commit.interval.ms": str(spec.get("streams_commit_interval_ms") or ""),
                      # per process: a paused instance and its replacement never share a state lock
                      "kchaos.streams.state.dir": str(Path(config["history_path"]).parent.parent / "workers"
                                                      / f"{config['worker']}.{config['incarnation']}-state")})
    return properties_text(lines)


#: Kafka Streams' processing.guarantee for each delivery a Streams workload accepts (spec.py)
STREAMS_GUARANTEE = {"exactly-once": "exactly_once_v2", "at-least-once": "at_least_once"}


def campaign_properties(workload: dict[str, Any], defaults: bool = True) -> dict[str, str]:
    """kchaos' Java defaults under ``[workload.producer]`` / ``[workload.consumer]``, as the
    driver's ``kchaos.<table>.<name>`` lines (the driver adds the properties kchaos owns)."""
    own = (workload.get("client_properties") or {}).get("java") or {}
    tables = {"producer": {**(JAVA_PRODUCER if defaults else {}), **(workload.get("producer") or {}),
                           **(own.get("producer") or {})},
              "consumer": {**(workload.get("consumer") or {}), **(own.get("consumer") or {})}}
    return {f"kchaos.{table}.{name}": java_value(value) for table, given in tables.items()
            for name, value in given.items()}


def check_java_properties(workload: dict[str, Any], version: str) -> None:
    """kafka-clients only warns about an unknown property; the driver's ``--check-config`` makes
    it (and a value kafka-clients cannot parse) a load error, before any cluster starts."""
    lines = campaign_properties(workload, defaults=False)
    if not lines:
        return
    classpath = client_classpath(version)
    with tempfile.TemporaryDirectory(prefix="kchaos-java-check-") as tmp:
        path = Path(tmp) / "check.properties"
        path.write_text(properties_text(lines))
        proc = subprocess.run([*java_argv(classpath, path)[:-1], "--check-config", str(path)],
                              capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        problems = [line for line in proc.stdout.splitlines() if line.strip()] or [proc.stderr.strip()[-500:]]
        raise ConfigError("; ".join(problems), "use kafka-clients' property names and values "
                                               f"(ProducerConfig / ConsumerConfig of kafka-clients {version})")


def java_argv(classpath: str, properties_path: Path, driver: Driver = CTP_WORKER) -> list[str]:
    """A small client JVM: two of these share two cores with three brokers."""
    return [require_java(), "-Xms32m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", *(f"-Dorg.slf4j.simpleLogger.{k}={v}" for k, v in LOG_LEVELS.items()),
            "-cp", classpath, driver.main_class, str(properties_path)]
