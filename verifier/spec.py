"""The ``[verifier]`` table of a campaign: which engine checks the run, and where it runs."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kchaos.verifier.checks import CHECK_NAMES

_MASTER_RE = re.compile(r"^(local(\[(\d+|\*)\])?|spark://[^\s:/]+:\d+)$")


class VerifierSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    engine: Literal["spark", "python"] = Field(
        "spark", description="spark: the PySpark job (the product); python: the single-process reference checker only")
    spark_master: str | None = Field(None, description="local[2] (default), local[*] or spark://host:port")
    read_from_kafka: bool = Field(
        True, description="the Spark job reads the topics (internal ones too) through Spark's Kafka source while the cluster is up")
    data_dir: str | None = Field(
        None, description="where the Spark ingest writes the topics (a Hadoop-compatible URL every executor reaches: "
                          "hdfs://, s3a://, a shared file: mount; the run's name is appended); default RUN/topics-spark")
    cross_check: bool = Field(
        True, description="also run the Python checker; a disagreement on the anomaly types makes the verdict unknown")
    cross_check_max_outputs: int = Field(5_000_000, ge=0, description="skip the cross-check above this many outputs")
    timeout_s: float = Field(1800.0, gt=0)
    require: tuple[str, ...] = Field(
        (), description="checks to claim beyond what the workload claims (verifier/checks.py claimed_checks); a claimed "
                        "check that is not checked makes the verdict unknown")
    waive: tuple[str, ...] = Field(
        (), description="claimed checks this campaign does not require: not checked, they leave the verdict alone")

    @field_validator("require", "waive")
    @classmethod
    def _checks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [n for n in value if n not in CHECK_NAMES]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))} is not a check; the checks are: {', '.join(CHECK_NAMES)}")
        return value

    @field_validator("data_dir")
    @classmethod
    def _data_dir(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^([a-z][a-z0-9+.-]*://|/)\S*$", value):
            raise ValueError(f"{value!r} is not a data directory: use an absolute path or a URL such as "
                             "hdfs://namenode/kchaos or file:///mnt/shared/kchaos")
        return value

    @field_validator("spark_master")
    @classmethod
    def _master(cls, value: str | None) -> str | None:
        if value is not None and not _MASTER_RE.match(value):
            raise ValueError(f"{value!r} is not a Spark master: use local, local[N], local[*] or spark://host:port")
        return value
