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
#: Releases known to work with the local backend (any released version is accepted).
KNOWN_KAFKA_VERSIONS = ("3.9.1", "4.1.2", "4.2.0", "4.2.1", "4.3.0", "4.3.1")
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
                text = proc.stdout + proc.stderr
                if "Could not find artifact" in text or "could not be resolved" in text.lower():
                    missing = ", ".join(str(a) for a in artifacts)
                    raise SetupError(
                        f"Maven could not resolve {missing}",
                        missing_hint or "check the version exists on Maven Central and that Maven Central is reachable",
                        detail=text[-3000:],
                    )
                raise SetupError("Maven failed to resolve jars", "run `mvn -v` and check network access to Maven Central",
                                 detail=text[-3000:])
            if target.exists():
                shutil.rmtree(target)
            out.rename(target)
            marker.write_text("\n".join(str(a) for a in artifacts) + "\n")
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return JarSet(name, target)


def resolve_kafka(version: str) -> JarSet:
    """Broker, controller and admin tools of one Kafka release, plus log4j2, on one classpath."""
    validate_kafka_version(version)
    artifacts = [
        MavenArtifact("org.apache.kafka", "kafka_2.13", version),
        MavenArtifact("org.apache.kafka", "kafka-tools", version),
        MavenArtifact("org.apache.logging.log4j", "log4j-core", LOG4J_VERSION),
        MavenArtifact("org.apache.logging.log4j", "log4j-slf4j-impl", LOG4J_VERSION),
    ]
    jars = resolve_jars(
        f"kafka-{version}", artifacts,
        missing_hint=f"Kafka {version} is not on Maven Central; use a released version such as "
                     f"{', '.join(KNOWN_KAFKA_VERSIONS)}",
    )
    # Kafka 3.x brings its own slf4j binding (reload4j). Two bindings on one classpath make
    # slf4j pick one at random, so keep exactly one: the release's own when it has one.
    if any(jars.directory.glob("slf4j-reload4j-*.jar")):
        for extra in jars.directory.glob("log4j-slf4j-impl-*.jar"):
            extra.unlink()
    return jars
