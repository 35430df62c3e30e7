"""Spark for the verifier: the Kafka source jars and a session sized for a small machine.

pyspark comes from PyPI (``pyspark==4.0.0``). The Kafka source is not in pyspark's own jars: it
is resolved from Maven Central like the broker jars (``spark-sql-kafka-0-10_2.13`` of the same
Spark version, plus its runtime closure minus what pyspark already ships).

Why 4.0.0 and not a newer pyspark: the Kafka source needs ``spark-token-provider-kafka-0-10``
of the same version. Maven Central has both for 4.1.1 and 4.2.0 too (not for 4.3.0), but 4.2.0
measured no faster, on JDK 17 or on JDK 25 with an AOT cache (docs/benchmarks.md, 2026-11-25),
so the verifier stays on the version its tests run with. A session fails fast with a clear
error when the versions do not match.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path
from typing import Any

from kchaos.errors import SetupError
from kchaos.paths import cache_dir
from kchaos.runtime.artifacts import MavenArtifact, resolve_jars

SPARK_VERSION = "4.0.0"
#: the layers a check may import (everything below the harness), shipped to remote executors: the
#: root package ships its own modules only, so its sub-package layers are named here too (the
#: internal topics' decoders, which executors run, are in kchaos.protocol)
EXECUTOR_LAYERS = ("protocol", "runtime", "clusters", "workloads", "faults", "verifier", "reports")


def pyspark_home() -> Path:
    try:
        import pyspark
    except ImportError as exc:
        raise SetupError("pyspark is not installed", "run `make setup` (pip install -e .) in the project") from exc
    if not pyspark.__version__.startswith(SPARK_VERSION):
        raise SetupError(f"pyspark {pyspark.__version__} is installed, the verifier needs {SPARK_VERSION}",
                         f"pip install pyspark=={SPARK_VERSION} (the Kafka source jars must match it)")
    return Path(pyspark.__file__).parent


def _artifact_name(jar: Path) -> str:
    return re.sub(r"-\d[\w.\-]*\.jar$", "", jar.name)


def kafka_source_jars() -> list[str]:
    """Jars for ``spark.jars``: the Kafka source and what it needs that pyspark lacks."""

    home = pyspark_home()
    jars = resolve_jars(f"spark-kafka-{SPARK_VERSION}",
                        [MavenArtifact("org.apache.spark", "spark-sql-kafka-0-10_2.13", SPARK_VERSION)])
    shipped = {_artifact_name(j) for j in (home / "jars").glob("*.jar")}
    return sorted(str(j) for j in jars.directory.glob("*.jar") if _artifact_name(j) not in shipped)


def default_master() -> str:
    return os.environ.get("KCHAOS_SPARK_MASTER", "local[2]")


def package_zip(directory: Path) -> Path:
    """The ``kchaos`` package's Python modules as one zip (``kchaos/<layer>/<module>.py``), for
    executors on machines where kchaos is not installed: the internal-topic decoders run there.
    Built from the imported package, so an editable install (whose layers live in folders of
    other names) ships the same tree as a wheel does."""
    import importlib
    import importlib.util
    import pkgutil
    import zipfile

    names: list[str] = []
    for package in ("kchaos", *(f"kchaos.{layer}" for layer in EXECUTOR_LAYERS)):
        module = importlib.import_module(package)
        # a layer's own packages too (verifier.spark, whose functions executors run); the root's
        # modules only (its layers are the ones named here)
        found = pkgutil.iter_modules if package == "kchaos" else pkgutil.walk_packages
        names += [package, *(m.name for m in found(module.__path__, f"{package}."))]
    target = directory / "kchaos-modules.zip"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in sorted(set(names)):
            spec = importlib.util.find_spec(name)
            if spec is None or not spec.origin or not spec.origin.endswith(".py"):
                continue
            parts = name.split(".")
            inner = "/".join(parts + ["__init__.py"]) if spec.submodule_search_locations is not None else "/".join(parts) + ".py"
            archive.write(spec.origin, inner)
    return target


#: Below this many records (outputs, both views) the driver JVM compiles with C1 only. A small
#: job is mostly JVM warm-up, and C2 compiling Spark's hot paths takes one of the two cores away
#: from the job; a large one needs C2's code. Measured (docs/benchmarks.md, bench/verifier_scale.py):
#: C1 only is 3 s faster at 300k outputs (600k records), 15 s slower at 1M outputs.
QUICK_JIT_BELOW = 800_000
JIT_MODES = ("auto", "quick", "full")


def _java() -> Path | None:
    """The java that spark-submit starts (``$JAVA_HOME/bin/java``, else the one on PATH)."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home, "bin", "java") if home else (Path(shutil.which("java")) if shutil.which("java") else None)
    return found.resolve() if found is not None and found.exists() else None


def class_archive() -> Path | None:
    """Where the driver JVM's class-data-sharing archive lives (``$KCHAOS_CACHE/spark-cds``), named
    after what it depends on: the java binary and pyspark's jars. None without a java."""
    java = _java()
    if java is None:
        return None
    jars = pyspark_home() / "jars"
    # the JVM itself (an archive from another build is refused, silently) and the class path
    vm = [f for f in (java, java.parent.parent / "lib" / "server" / "libjvm.so") if f.exists()]
    identity = [*(f"{f}:{f.stat().st_size}:{int(f.stat().st_mtime)}" for f in vm),
                *sorted(f"{j.name}:{j.stat().st_size}" for j in jars.glob("*.jar"))]
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    directory = cache_dir() / "spark-cds"
    directory.mkdir(exist_ok=True)  # a JVM asked to dump into a missing directory does not start
    return directory / f"driver-{digest}.jsa"


def driver_java_options(records: int | None = None, dump_archive_to: Path | None = None, jit: str | None = None) -> str:
    """The driver JVM's options: its class archive if there is one (Spark loads ~15k classes at
    start; mapped from the archive the session starts in ~5 s instead of ~9 s), or
    ``dump_archive_to`` to write one when the JVM exits; and C1-only compilation when ``records``
    is below QUICK_JIT_BELOW. ``jit`` (else ``$KCHAOS_SPARK_JIT``) = quick or full overrides the
    choice; auto (the default) decides by ``records``, full when unknown."""
    options = ["-XX:+UseParallelGC"]  # a batch job on two cores: throughput, no concurrent GC threads
    archive = class_archive()
    if archive is not None and archive.exists():
        options.append(f"-XX:SharedArchiveFile={archive}")
    elif dump_archive_to is not None:
        options.append(f"-XX:ArchiveClassesAtExit={dump_archive_to}")
    # the JVM's stdout is the job's: CDS warnings (signed jars and old class files are left out of
    # the archive, an outdated archive is ignored) must not reach it
    options.append("-Xlog:cds=off,cds+dynamic=off")
    jit = jit or os.environ.get("KCHAOS_SPARK_JIT") or "auto"
    if jit not in JIT_MODES:
        raise SetupError(f"KCHAOS_SPARK_JIT={jit!r} is not one of {', '.join(JIT_MODES)}")
    if jit == "quick" or (jit == "auto" and records is not None and records < QUICK_JIT_BELOW):
        options.append("-XX:TieredStopAtLevel=1")
    return " ".join(options)


def finish_class_archive(dumped: Path, keep: bool = True, timeout_s: float = 180.0) -> bool:
    """After ``spark.stop()`` in a process that asked the driver JVM to dump its class archive to
    ``dumped``: end that JVM (it dumps on exit), then move the archive into place atomically
    (``keep``) or delete it. False if no archive was kept (the next run simply tries again)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return False
    try:
        gateway.shutdown()
    except Exception:
        pass
    if proc.stdin is not None:
        proc.stdin.close()  # the gateway JVM exits when its stdin closes
    try:
        code = proc.wait(timeout=timeout_s)
    except Exception:
        proc.kill()
        code = -1
    archive = class_archive()
    if keep and code == 0 and archive is not None and dumped.exists() and dumped.stat().st_size > 0:
        os.replace(dumped, archive)
        return True
    dumped.unlink(missing_ok=True)
    return False


def remove_stale_dumps(directory: Path) -> None:
    """Archive dumps (``<archive>.<pid>.tmp``) whose process is gone: a job killed while its JVM
    was writing one leaves it half written."""
    for dump in directory.glob("*.jsa.*.tmp"):
        pid = dump.suffixes[-2].lstrip(".")
        try:
            alive = pid.isdigit() and (os.kill(int(pid), 0) is None)
        except OSError:  # no such process (or not ours: a pid reused by another user)
            alive = False
        if not alive:
            dump.unlink(missing_ok=True)


def spark_session(master: str | None = None, app: str = "kchaos-verifier", driver_memory: str = "2g",
                  extra_conf: dict[str, str] | None = None, ship_code_from: Path | None = None,
                  records: int | None = None, dump_archive_to: Path | None = None, jit: str | None = None) -> Any:
    """A Spark session with the Kafka source on the classpath; small shuffles, no UI, and a driver
    JVM started for the job's size (driver_java_options).

    Executors run Python for the decoders: ``$PYSPARK_PYTHON`` if set (on a cluster, the
    executors' Python, with pyarrow and pandas), else this interpreter. On a ``spark://``
    master the kchaos modules are shipped with the job (``ship_code_from``: a directory for the
    zip), so the executors need kchaos no more than they need the run directory."""
    import sys

    home = pyspark_home()
    os.environ.setdefault("SPARK_HOME", str(home))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # read by pyspark when the context starts
    master = master or default_master()
    from pyspark.sql import SparkSession

    conf = {
        # Python workers start with `-m`, which puts their working directory first on sys.path;
        # in a checkout that is the repository root, whose kchaos/ folder holds the foundation
        # only and would shadow the installed package (its layers live in other folders)
        "spark.executorEnv.PYTHONSAFEPATH": "1",
        "spark.jars": ",".join(kafka_source_jars()),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.adaptive.enabled": "true",
        "spark.driver.memory": driver_memory,
        "spark.executor.memory": "1g",
        "spark.sql.session.timeZone": "UTC",
        # a standalone master (spark://) gives executors only what they ask for
        "spark.cores.max": "2",
        "spark.driver.extraJavaOptions": driver_java_options(records, dump_archive_to, jit),
        **(extra_conf or {}),
    }
    builder = SparkSession.builder.master(master).appName(app)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    if ship_code_from is not None and master.startswith("spark://"):
        spark.sparkContext.addPyFile(str(package_zip(ship_code_from)))
    return spark
