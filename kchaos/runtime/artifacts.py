"""Resolve Kafka (and other JVM) artefacts from Maven Central into a per-version cache.

A resolved set is a directory of jars; its classpath is ``<dir>/*``. Resolution writes into a
temporary directory and renames it into place only when Maven succeeded, so a half-resolved
cache is never used. A file lock serialises concurrent resolutions of the same set.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from kchaos.errors import SetupError
from kchaos.paths import cache_dir

#: log4j2 is not in Kafka's published POM; without it the broker logs nothing.
LOG4J_VERSION = "2.25.1"
#: Releases the tests run (any released version is accepted; the registry's list is asked when
#: one does not resolve).
KNOWN_KAFKA_VERSIONS = ("3.9.1", "4.1.2", "4.2.1", "4.3.1", "4.4.0")
DEFAULT_KAFKA_VERSION = "4.2.1"
_VERSION_RE = re.compile(r"^\d+\.\d+\.\d+$")


@dataclass(frozen=True)
class MavenArtifact:
    group: str
    artifact: str
    version: str

    @classmethod
    def parse(cls, coords: str) -> "MavenArtifact":
        parts = coords.split(":")
        if len(parts) != 3 or not all(parts):
            raise SetupError(f"bad Maven coordinates {coords!r}", "use group:artifact:version")
        return cls(*parts)

    def __str__(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


@dataclass(frozen=True)
class JarSet:
    """A resolved set of jars: everything on one JVM classpath."""

    name: str
    directory: Path

    @property
    def classpath(self) -> str:
        return str(self.directory / "*")


def require_java() -> str:
    java_home = os.environ.get("JAVA_HOME")
    java = os.path.join(java_home, "bin", "java") if java_home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise SetupError("Java was not found", "install a JDK 17+ (apt-get install openjdk-17-jdk-headless) or set JAVA_HOME")
    return java


def _require_maven() -> str:
    mvn = shutil.which("mvn")
    if not mvn:
        raise SetupError("Maven (mvn) was not found; it resolves the Kafka jars", "install it: apt-get install maven")
    return mvn


def validate_kafka_version(version: str) -> str:
    if not _VERSION_RE.match(version):
        raise SetupError(
            f"Kafka version {version!r} is not a release number",
            f"use a released version such as {', '.join(KNOWN_KAFKA_VERSIONS)}",
        )
    return version


def _pom(artifacts: list[MavenArtifact]) -> str:
    deps = "\n".join(
        "    <dependency><groupId>{}</groupId><artifactId>{}</artifactId><version>{}</version></dependency>".format(
            escape(a.group), escape(a.artifact), escape(a.version)
        )
        for a in artifacts
    )
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>kchaos.resolve</groupId><artifactId>jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
{deps}
  </dependencies>
</project>
"""


#: Some POMs (Spark's) declare extra repositories this machine cannot reach; unless the user
#: has Maven settings of their own, every repository is mirrored to Maven Central.
_CENTRAL_ONLY_SETTINGS = """<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors><mirror><id>kchaos-central</id><mirrorOf>*</mirrorOf>
    <url>https://repo.maven.apache.org/maven2</url></mirror></mirrors>
</settings>
"""


def _maven_settings_args(work: Path) -> list[str]:
    explicit = os.environ.get("KCHAOS_MAVEN_SETTINGS")
    if explicit:
        return ["-s", explicit]
    if (Path.home() / ".m2" / "settings.xml").exists():
        return []
    (work / "settings.xml").write_text(_CENTRAL_ONLY_SETTINGS)
    return ["-s", str(work / "settings.xml")]


def maven_log_path(name: str) -> Path:
    path = cache_dir() / "jars" / "logs" / f"{name}.maven.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def missing_artifacts(maven_output: str) -> list[str]:
    """``group:artifact:version`` of each jar Maven says it could not find, in either of its
    wordings: the first miss, and the miss it remembers from an earlier attempt."""
    first = re.findall(r"Could not find artifact ([\w.\-]+:[\w.\-]+):\w+:([\w.\-]+)", maven_output)
    remembered = re.findall(r"([\w.\-]+:[\w.\-]+):jar:([\w.\-]+) was not found in", maven_output)
    return sorted({f"{ga}:{v}" for ga, v in first + remembered})


def resolve_jars(name: str, artifacts: list[MavenArtifact], missing_hint: str | None = None) -> JarSet:
    """Resolve ``artifacts`` and their runtime closure into ``<cache>/jars/<name>``; idempotent."""
    target = cache_dir() / "jars" / name
    marker = target / ".complete"
    if marker.exists():
        return JarSet(name, target)
    mvn = _require_maven()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return JarSet(name, target)
        work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=target.parent))
        try:
            (work / "pom.xml").write_text(_pom(artifacts))
            out = work / "lib"
            proc = subprocess.run(
                [mvn, "-B", "-q", *_maven_settings_args(work), "-f", str(work / "pom.xml"), "dependency:copy-dependencies",
                 "-DincludeScope=runtime", f"-DoutputDirectory={out}"],
                capture_output=True, text=True,
            )
            if proc.returncode != 0:
                # Maven's own words go to a log file; the error names what is missing and points there
                log = maven_log_path(name)
                log.write_text(proc.stdout + proc.stderr)
                text = proc.stdout + proc.stderr
                if "Could not find artifact" in text or "could not be resolved" in text.lower():
                    named = ", ".join(missing_artifacts(text)) or ", ".join(str(a) for a in artifacts)
                    raise SetupError(f"Maven could not resolve {named} (Maven's output: {log})",
                                     missing_hint or "check the version exists on Maven Central and that Maven Central "
                                                     "is reachable")
                raise SetupError(f"Maven failed to resolve jars (its output: {log})",
                                 "run `mvn -v` and check network access to Maven Central")
            if target.exists():
                shutil.rmtree(target)
            out.rename(target)
            marker.write_text("\n".join(str(a) for a in artifacts) + "\n")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return JarSet(name, target)


MAVEN_REPOSITORY = os.environ.get("KCHAOS_MAVEN_REPOSITORY", "https://repo.maven.apache.org/maven2")


def released_versions(group: str, artifact: str) -> list[str] | None:
    """Release numbers of an artifact from the registry's maven-metadata.xml, oldest first;
    None when the registry cannot be asked (the caller then says so instead of guessing)."""
    import urllib.request

    cached = cache_dir() / "jars" / "metadata" / f"{group}.{artifact}.xml"
    url = f"{MAVEN_REPOSITORY}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=15) as response:
            text = response.read().decode()
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text(text)
    except OSError:
        if not cached.exists():
            return None
        text = cached.read_text()
    versions = [v for v in re.findall(r"<version>([^<]+)</version>", text) if _VERSION_RE.match(v)]
    return sorted(set(versions), key=version_key)


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


def _broker_artifacts(version: str) -> list[MavenArtifact]:
    return [MavenArtifact("org.apache.kafka", "kafka_2.13", version),
            MavenArtifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
            MavenArtifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION)]


def _missing_release_error(version: str) -> SetupError:
    brokers = released_versions("org.apache.kafka", "kafka_2.13")
    listed = (f"releases of the broker (kafka_2.13) on the registry: {', '.join(brokers[-12:])}" if brokers
              else "the registry's version list could not be read either")
    return SetupError(f"Kafka {version}: org.apache.kafka:kafka_2.13:{version} does not resolve from Maven "
                      f"(Maven's output: {maven_log_path(f'kafka-{version}')})", f"use a released version; {listed}")


def resolve_kafka(version: str) -> JarSet:
    """Broker and controller of one Kafka release, plus log4j2, on one classpath, with the
    release's admin tools (kafka-tools) when that release of them resolves. A release whose
    kafka-tools is not on the registry (4.4.0 until late 2026) still gets its broker: see
    :func:`resolve_kafka_tools` for the tools it is then run with."""
    validate_kafka_version(version)
    try:
        jars = resolve_jars(f"kafka-{version}",
                            [*_broker_artifacts(version), MavenArtifact("org.apache.kafka", "kafka-tools", version)])
    except SetupError as exc:
        if f"kafka_2.13:{version}" in exc.cause:
            raise _missing_release_error(version) from None
        if "Maven could not resolve" not in exc.cause:
            raise
        # kafka-tools or a jar of its closure (Connect's, on 4.0.1 here) is not served: the broker
        # alone still runs, with an older release's tools (resolve_kafka_tools)
        try:  # the broker without its own release of the tools
            jars = resolve_jars(f"kafka-{version}", _broker_artifacts(version))
        except SetupError as again:
            if f"kafka_2.13:{version}" in again.cause:
                raise _missing_release_error(version) from None
            raise
    # Kafka 3.x brings its own slf4j binding (reload4j). Two bindings on one classpath make
    # slf4j pick one at random, so keep exactly one: the release's own when it has one.
    if any(jars.directory.glob("slf4j-reload4j-*.jar")):
        for extra in jars.directory.glob("log4j-slf4j-impl-*.jar"):
            extra.unlink()
    return jars


def has_own_tools(jars: JarSet) -> bool:
    return any(jars.directory.glob("kafka-tools-[0-9]*.jar"))


def resolve_kafka_tools(version: str) -> tuple[JarSet, str]:
    """The admin tools to run against a ``version`` cluster: its own release's, or else the
    newest older release of kafka-tools that resolves. Only tools that speak the wire protocol
    may come from another release (kafka_tools.py says which); the pair says which release."""
    jars = resolve_kafka(version)
    if has_own_tools(jars):
        return jars, version
    known = released_versions("org.apache.kafka", "kafka-tools") or []
    for candidate in sorted((v for v in known if version_key(v) < version_key(version)), key=version_key, reverse=True):
        try:
            older = resolve_kafka(candidate)
        except SetupError:
            continue
        if has_own_tools(older):
            return older, candidate
    raise SetupError(f"no release of org.apache.kafka:kafka-tools up to {version} resolves from Maven",
                     "check that Maven Central is reachable")
