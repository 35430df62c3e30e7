"""The ``[verifier]`` table of a campaign: which engine checks the run, and where it runs."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kchaos.faults.kinds import KINDS
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
    start_ahead: bool = Field(
        True, description="kchaos run starts the Spark job's JVM and session as the workers stop after the drain, so "
                          "that they come up while the final reads run; it checks nothing before the run is recorded")
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


#: what a phase is, relative to the change being certified (verifier/certify.py)
PhaseKind = Literal["before", "during", "after"]


class KnownExposure(BaseModel):
    """``[[certification.known_exposure]]``: an anomaly a team knows a row carries and accepts for
    now (the classic protocol under late requests, KAFKA-17754, say). A row whose every case it
    matches is ``known-exposure``, not ``invalid``: the gate can pass, and the report and the exit
    line still name the row and this reason. A case it does not match fails the row."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    reason: str = Field(..., min_length=3, description="why the row may carry it (a finding, a KAFKA- issue, a ticket)")
    client: str = Field("*", description="the client it applies to: an implementation (confluent, java, franz-go, "
                                         "...), a fleet label (\"java 3.9.1\"), or * (any, cases naming no client too)")
    phase: Literal["before", "during", "after", "any"] = "any"
    transaction_version: int | None = Field(
        None, ge=0, le=2, description="only in phases where this transaction.version is in force (a phase during a "
                                      "flip has both levels)")
    protocol: Literal["classic", "tv2"] | None = Field(
        None, description="only where the coordinator's log shows the row's committed transactions on this protocol "
                          "(classic: some ran the classic protocol; tv2: all ran KIP-890's)")
    # observed-aborted-read is the reader's side of the same shapes: a late EndTxn(COMMIT) ends
    # the producer's next transaction early, and an observer reads its outputs before its client
    # asked to commit them (certify-tv-flip seed 30, 2026-12-02: 4 such reads at TV1, each under a
    # held EndTxn the broker answered as committed)
    anomalies: tuple[str, ...] = Field(
        ("aborted-read", "duplicate", "lost-input", "lost-write", "observed-aborted-read", "split-transaction",
         "stray-offset-commit", "torn-transaction", "zombie-write"),
        description="the anomaly types it covers (default: the shapes a late EndTxn makes, KAFKA-17754, as the "
                    "pipeline's outputs and as an observer read them); liveness anomalies are never covered")

    @field_validator("anomalies")
    @classmethod
    def _anomalies(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [n for n in value if n not in CHECK_NAMES]
        if unknown or not value:
            raise ValueError(f"known_exposure.anomalies: {', '.join(map(repr, unknown)) or 'empty'}; the checks are: "
                             f"{', '.join(CHECK_NAMES)}")
        return value


class CertificationSpec(BaseModel):
    """``[certification]``: how a run with planned steps is judged as a gate (verifier/certify.py).
    The phase before the change is the baseline a team flips to get away from: reported, gating
    only when ``gate = "all"``. The phases during and after the change gate."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    gate: Literal["change", "all"] = Field(
        "change", description="change: the phases during and after the first step gate; all: the baseline too")
    exposure: dict[str, int] = Field(
        default_factory=dict,
        description="per fault kind: committed transactions (the coordinator's log) each gating row must have under "
                    "that kind's windows, in the phases before and after a step; below it the row is unknown, with "
                    "the figure")
    exposure_during: dict[str, int] = Field(
        default_factory=dict, description="the same for the phases during a step (the flip and the workers' restarts)")
    known_exposure: tuple[KnownExposure, ...] = ()
    app_label: str = Field("app", description="the client label of a bring-your-own pipeline's transactions")

    @field_validator("exposure", "exposure_during")
    @classmethod
    def _kinds(cls, value: dict[str, int]) -> dict[str, int]:
        for kind, count in value.items():
            if kind not in KINDS:
                raise ValueError(f"certification exposure: unknown fault kind {kind!r}; accepted: {', '.join(sorted(KINDS))}")
            if count < 0:
                raise ValueError(f"certification exposure: {kind} = {count}: a count of 0 or more")
        return value
