"""Spark for the verifier: the Kafka source jars and a session sized for a small machine.

pyspark comes from PyPI (``pyspark==4.0.0``). The Kafka source is not in pyspark's own jars: it
is resolved from Maven Central like the broker jars (``spark-sql-kafka-0-10_2.13`` of the same
Spark version, plus its runtime closure minus what pyspark already ships).

Why 4.0.0 and not a newer pyspark: the Kafka source needs ``spark-token-provider-kafka-0-10``
of the same version, and Maven Central (as this machine reaches it) has that artefact up to
4.0.0 only; 4.3.0's ``spark-sql-kafka`` is not published at all. A session fails fast with a
clear error when the versions do not match.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from kchaos.errors import SetupError

SPARK_VERSION = "4.0.0"
#: the layers a check may import (everything below the harness), shipped to remote executors
EXECUTOR_LAYERS = ("clusters", "workloads", "faults", "verifier", "reports")


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
    from kchaos.clusters.artifacts import MavenArtifact, resolve_jars

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
        names += [package, *(m.name for m in pkgutil.iter_modules(module.__path__, f"{package}."))]
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


def spark_session(master: str | None = None, app: str = "kchaos-verifier", driver_memory: str = "2g",
                  extra_conf: dict[str, str] | None = None, ship_code_from: Path | None = None) -> Any:
    """A Spark session with the Kafka source on the classpath; small shuffles, no UI.

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
