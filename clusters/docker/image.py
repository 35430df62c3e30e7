"""A Kafka image built on this machine, for an engine that cannot pull ``apache/kafka``.

Two layers, each built once and kept in the engine's data root:

- ``kchaos/base:bookworm-jre17``: a minimal Debian bookworm with OpenJDK 17's headless runtime,
  made by ``debootstrap`` from the Debian mirror and ``docker import``-ed (no registry needed);
- ``kchaos/kafka:<release>``: that base plus the broker jars kchaos already resolves from Maven
  Central for the local backend (the same classpath, so both backends run the same Kafka), and
  an entry point that honours the contract the Docker backend relies on in ``apache/kafka``:
  ``KAFKA_<PROPERTY>`` variables become ``server.properties`` lines (``_`` -> ``.``, ``__`` -> ``_``,
  ``___`` -> ``-``, as the official image maps them), ``CLUSTER_ID`` formats the storage on first
  start, ``KAFKA_HEAP_OPTS`` sizes the heap. One addition: ``KCHAOS_FORMAT_FEATURES`` (e.g.
  ``transaction.version=1``) is passed to the format as ``--feature``, so a feature level holds
  from the cluster's first record rather than being changed after start.

docs/clusters.md says what differs from the official image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from kchaos.clusters.docker.engine import engine_home
from kchaos.errors import ClusterError, SetupError
from kchaos.runtime.artifacts import resolve_kafka

BASE_IMAGE = "kchaos/base:bookworm-jre17"
DEBIAN_SUITE = "bookworm"
DEBIAN_PACKAGES = ("openjdk-17-jre-headless",)
DEFAULT_MIRROR = "http://deb.debian.org/debian"

# Console logging (the engine keeps it; the cluster copies it into the run directory at stop).
LOG4J2_XML = """<?xml version="1.0" encoding="UTF-8"?>
<Configuration status="WARN">
  <Appenders>
    <Console name="stdout" target="SYSTEM_OUT"><PatternLayout pattern="[%d{ISO8601}] %p %m (%c)%n"/></Console>
  </Appenders>
  <Loggers>
    <Root level="INFO"><AppenderRef ref="stdout"/></Root>
    <Logger name="kafka.request.logger" level="WARN"/>
    <Logger name="org.apache.kafka.storage.internals.log.LogCleaner" level="WARN"/>
  </Loggers>
</Configuration>
"""
LOG4J1_PROPERTIES = """log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
"""

ENTRYPOINT = r"""#!/bin/bash
# kchaos' Kafka image: environment -> server.properties, format once, run the broker.
set -euo pipefail
home=${KCHAOS_KAFKA_HOME:-/opt/kafka}
props=$home/config/server.properties
data=${KAFKA_LOG_DIRS:-/var/lib/kafka/data}
data=${data%%,*}
{
  echo "log.dirs=$data"
  for var in $(compgen -e | sort); do
    case "$var" in
      KAFKA_HEAP_OPTS|KAFKA_OPTS|KAFKA_JVM_PERFORMANCE_OPTS|KAFKA_LOG4J_OPTS) continue ;;
      KAFKA_*) ;;
      *) continue ;;
    esac
    key=${var#KAFKA_}
    key=${key//___/-}
    key=${key//__/@}
    key=${key//_/.}
    key=${key//@/_}
    printf '%s=%s\n' "${key,,}" "${!var}"
  done
} > "$props"
logging=(-Dlog4j2.configurationFile=$home/config/log4j2.xml -Dlog4j.configuration=file:$home/config/log4j.properties)
if [ ! -e "$data/meta.properties" ]; then
  features=()
  for f in ${KCHAOS_FORMAT_FEATURES:-}; do features+=(--feature "$f"); done
  java "${logging[@]}" -cp "$home/libs/*" kafka.tools.StorageTool format -t "${CLUSTER_ID:?CLUSTER_ID is required}" \
    -c "$props" "${features[@]}"
fi
# -Dkchaos.container names the process on the host, so a crashed harness's reaper can find it.
exec java ${KAFKA_HEAP_OPTS:--Xmx512m} ${KAFKA_OPTS:-} -Dkchaos.container=${KCHAOS_CONTAINER:-none} \
  "${logging[@]}" -cp "$home/libs/*" kafka.Kafka "$props"
"""

DOCKERFILE = """FROM {base}
COPY libs /opt/kafka/libs
COPY config /opt/kafka/config
COPY kchaos-kafka-run /opt/kafka/kchaos-kafka-run
LABEL kchaos.image="{digest}" kchaos.kafka_version="{version}"
EXPOSE 9092
ENTRYPOINT ["/bin/bash", "/opt/kafka/kchaos-kafka-run"]
"""


def image_tag(version: str) -> str:
    return f"kchaos/kafka:{version}"


def recipe_digest(version: str, jar_names: list[str]) -> str:
    """What the image is made of: a changed entry point, config or jar list makes a new image."""
    text = "\n".join([ENTRYPOINT, LOG4J2_XML, LOG4J1_PROPERTIES, DOCKERFILE, version, *sorted(jar_names)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _has_image(client: Any, tag: str) -> Any:
    import docker

    try:
        return client.images.get(tag)
    except docker.errors.ImageNotFound:
        return None


def ensure_base_image(client: Any, say: Any = None) -> str:
    """The Debian + JRE base, made with debootstrap and imported (once per engine data root)."""
    if _has_image(client, BASE_IMAGE) is not None:
        return BASE_IMAGE
    if not shutil.which("debootstrap"):
        raise SetupError("building the base image needs debootstrap", "run `kchaos setup --docker` (apt-get install debootstrap)")
    if say:
        say(f"building {BASE_IMAGE} with debootstrap (once; about a minute)")
    build = engine_home() / "build"
    build.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=build) as tmp:
        rootfs = Path(tmp) / "rootfs"
        mirror = os.environ.get("KCHAOS_DEBIAN_MIRROR", DEFAULT_MIRROR)
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}",
                               DEBIAN_SUITE, str(rootfs), mirror], capture_output=True, text=True)
        if proc.returncode != 0:
            raise SetupError(f"debootstrap of Debian {DEBIAN_SUITE} failed", f"check that {mirror} is reachable "
                             "(KCHAOS_DEBIAN_MIRROR names another mirror)", detail=(proc.stdout + proc.stderr)[-3000:])
        for junk in ("usr/share/doc", "usr/share/man", "usr/share/locale", "var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / junk, ignore_errors=True)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "-cf", str(tarball), "."], check=True, capture_output=True)
        repo, tag = BASE_IMAGE.split(":")
        client.api.import_image_from_file(str(tarball), repository=repo, tag=tag)
    if _has_image(client, BASE_IMAGE) is None:
        raise ClusterError(f"importing {BASE_IMAGE} did not produce the image")
    return BASE_IMAGE


def ensure_kafka_image(client: Any, version: str, say: Any = None) -> str:
    """``kchaos/kafka:<version>`` from the jars in kchaos' cache; rebuilt when its recipe changed."""
    jars = resolve_kafka(version)
    jar_paths = sorted(Path(jars.directory).glob("*.jar"))
    digest = recipe_digest(version, [p.name for p in jar_paths])
    tag = image_tag(version)
    existing = _has_image(client, tag)
    if existing is not None and existing.labels.get("kchaos.image") == digest:
        return tag
    base = ensure_base_image(client, say)
    if say:
        say(f"building {tag} from the cached Kafka {version} jars")
    build = engine_home() / "build"
    build.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=build) as tmp:
        ctx = Path(tmp)
        (ctx / "libs").mkdir()
        for jar in jar_paths:
            shutil.copy2(jar, ctx / "libs" / jar.name)
        (ctx / "config").mkdir()
        (ctx / "config" / "log4j2.xml").write_text(LOG4J2_XML)
        (ctx / "config" / "log4j.properties").write_text(LOG4J1_PROPERTIES)
        (ctx / "kchaos-kafka-run").write_text(ENTRYPOINT)
        (ctx / "Dockerfile").write_text(DOCKERFILE.format(base=base, digest=digest, version=version))
        try:
            client.images.build(path=str(ctx), tag=tag, rm=True, forcerm=True)
        except Exception as exc:
            raise ClusterError(f"building {tag} failed: {exc}") from None
    return tag
