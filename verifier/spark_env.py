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


def spark_session(master: str | None = None, app: str = "kchaos-verifier", driver_memory: str = "2g",
                  extra_conf: dict[str, str] | None = None) -> Any:
    """A Spark session with the Kafka source on the classpath; small shuffles, no UI."""
    home = pyspark_home()
    os.environ.setdefault("SPARK_HOME", str(home))
    from pyspark.sql import SparkSession

    conf = {
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
    builder = SparkSession.builder.master(master or default_master()).appName(app)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
