"""The Java workload client: ``workloads/java/KchaosCtpWorker.java`` on ``kafka-clients``.

librdkafka (confluent-kafka) speaks the classic transaction protocol only, even on a cluster
with ``transaction.version=2``; the Java producer speaks KIP-890's (TV2) when the cluster has it.
kchaos resolves ``org.apache.kafka:kafka-clients:<version>`` (and a quiet slf4j binding) from
Maven Central like the broker jars, compiles the driver once per (source, version) into the
cache, and starts it with a flat ``.properties`` file: client settings as they are, kchaos'
own settings under ``kchaos.*``.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kchaos.clusters.artifacts import MavenArtifact, resolve_jars, require_java, validate_kafka_version
from kchaos.errors import ConfigError, SetupError
from kchaos.paths import cache_dir
from kchaos.workloads.client_settings import JAVA_PRODUCER, java_value

# Package data (kchaos.workloads: java/*.java): a wheel installs it as a plain file beside this module.
SOURCE = Path(str(importlib.resources.files("kchaos.workloads").joinpath("java", "KchaosCtpWorker.java")))
MAIN_CLASS = "KchaosCtpWorker"
SLF4J_NOP = MavenArtifact("org.slf4j", "slf4j-nop", "1.7.36")


def _require_javac() -> str:
    javac = shutil.which("javac")
    if javac is None:
        raise SetupError("workload.client = 'java' needs a JDK (javac), not only a JRE",
                         "install one, e.g. `apt-get install openjdk-17-jdk-headless`")
    return javac


def client_classpath(version: str) -> str:
    """The compiled driver and the kafka-clients jars of ``version``, as one classpath; built once."""
    validate_kafka_version(version)
    jars = resolve_jars(f"kafka-clients-{version}",
                        [MavenArtifact("org.apache.kafka", "kafka-clients", version), SLF4J_NOP],
                        missing_hint=f"kafka-clients {version} is not on Maven Central; use a released version")
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:12]
    classes = cache_dir() / "java" / f"ctp-worker-{version}-{digest}"
    if not (classes / f"{MAIN_CLASS}.class").exists():
        require_java()
        javac = _require_javac()
        classes.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix=".ctp-worker-", dir=classes.parent))
        try:
            proc = subprocess.run([javac, "-nowarn", "-cp", jars.classpath, "-d", str(work), str(SOURCE)],
                                  capture_output=True, text=True)
            if proc.returncode != 0:
                raise SetupError(f"the Java workload driver did not compile against kafka-clients {version}",
                                 "use a kafka-clients release the driver supports (4.0 or later)",
                                 detail=(proc.stdout + proc.stderr)[-3000:])
            if classes.exists():
                shutil.rmtree(classes)
            work.rename(classes)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return f"{classes}:{jars.classpath}"


def worker_properties(config: dict[str, Any]) -> str:
    """The ``.properties`` text the Java driver reads, from the Python worker's config dict."""
    spec = config["workload"]
    lines = {**{k: str(v) for k, v in config["client"].items()},
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
             **campaign_properties(spec)}
    return "".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(lines.items()))


def campaign_properties(workload: dict[str, Any], defaults: bool = True) -> dict[str, str]:
    """kchaos' Java defaults under ``[workload.producer]`` / ``[workload.consumer]``, as the
    driver's ``kchaos.<table>.<name>`` lines (the driver adds the properties kchaos owns)."""
    tables = {"producer": {**(JAVA_PRODUCER if defaults else {}), **(workload.get("producer") or {})},
              "consumer": dict(workload.get("consumer") or {})}
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
        path.write_text("".join(f"{_escape(k)}={_escape(v)}\n" for k, v in sorted(lines.items())))
        proc = subprocess.run([*java_argv(classpath, path)[:-1], "--check-config", str(path)],
                              capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        problems = [line for line in proc.stdout.splitlines() if line.strip()] or [proc.stderr.strip()[-500:]]
        raise ConfigError("; ".join(problems), "use kafka-clients' property names and values "
                                               f"(ProducerConfig / ConsumerConfig of kafka-clients {version})")


def _escape(text: str) -> str:
    """java.util.Properties escaping for keys and values (backslash, separators, leading space)."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("=", "\\=").replace(":", "\\:")
    return ("\\" + out) if out.startswith(" ") else out


def java_argv(classpath: str, properties_path: Path) -> list[str]:
    """A small client JVM: two of these share two cores with three brokers."""
    return [require_java(), "-Xms32m", "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true", "-cp", classpath, MAIN_CLASS, str(properties_path)]
