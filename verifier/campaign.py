"""The campaign a run executes, typed: what ``kchaos run`` loads from a TOML file
(harness/campaign.py) and records as ``RUN_DIR/campaign.json``, and what every later reader of the
run (the verifier, the certification, the reports, ``replay``) gets back from that file through
:func:`load_recorded`, its one parser.

It lives with the verifier because it composes every lower layer's table (``[cluster]``,
``[workload]``, ``[faults]``, ``[[steps]]``) and the verifier's own, and the verifier is the
lowest layer that reads a whole run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kchaos.clusters.spec import ClusterSpec, describe_validation_error
from kchaos.errors import ConfigError
from kchaos.faults.kinds import KINDS
from kchaos.faults.spec import PACKAGES, FaultsSpec
from kchaos.faults.steps import StepSpec, check_steps
from kchaos.rundir import CAMPAIGN_FILE, RunDir
from kchaos.verifier.spec import CertificationSpec, VerifierSpec
from kchaos.workloads.spec import ObserverSpec, WorkloadSpec


class RunSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    seed: int | None = Field(None, ge=0, description="None: a fresh seed, recorded in the run directory")
    duration_s: float = Field(60.0, gt=0, le=86400, description="steady + fault phase; seeding may go on into the drain")
    progress_interval_s: float = Field(5.0, gt=0)


def _merged(tables: list[Mapping[str, Any]]) -> dict[str, Any]:
    return {key: value for table in tables for key, value in table.items()}


class Campaign(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = "default"
    description: str = ""
    run: RunSettings = Field(default_factory=RunSettings)
    cluster: ClusterSpec = Field(default_factory=ClusterSpec)
    workload: WorkloadSpec = Field(default_factory=WorkloadSpec)
    observers: ObserverSpec = Field(default_factory=ObserverSpec)
    faults: FaultsSpec = Field(default_factory=lambda: FaultsSpec(enabled=False))
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    steps: tuple[StepSpec, ...] = Field((), description="planned feature flips and rolling upgrades (faults/steps.py)")
    certification: CertificationSpec = Field(default_factory=CertificationSpec,
                                             description="how a run with steps is judged as a gate (verifier/certify.py)")

    @model_validator(mode="before")
    @classmethod
    def _streams_group(cls, data: Any) -> Any:
        """KIP-1071's streams groups need streams.version 1 finalised: set at format time unless
        the campaign says otherwise (a cluster kchaos did not start must have it already)."""
        workload = data.get("workload") if isinstance(data, dict) else None
        cluster = data.get("cluster") if isinstance(data, dict) and isinstance(data.get("cluster"), dict) else {}
        if isinstance(workload, dict) and workload.get("group_protocol") == "streams" \
                and cluster.get("backend", "local") != "external":
            data = {**data, "cluster": {**cluster, "streams_version": cluster.get("streams_version", 1)}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _share_inputs(cls, data: Any) -> Any:
        """A share workload draws its poison inputs from the input count before the run: without
        ``workload.records`` it seeds what its rate brings over ``run.duration_s``."""
        workload = data.get("workload") if isinstance(data, dict) else None
        if isinstance(workload, dict) and workload.get("kind") == "share" and workload.get("records") is None:
            run = data.get("run") if isinstance(data.get("run"), dict) else {}
            rate = float(workload.get("rate", WorkloadSpec.model_fields["rate"].default))
            duration = float(run.get("duration_s", RunSettings.model_fields["duration_s"].default))
            data = {**data, "workload": {**workload, "records": max(1, round(rate * duration))}}
        return data

    @model_validator(mode="before")
    @classmethod
    def _what_faults_need(cls, data: Any) -> Any:
        """What the campaign's fault kinds need the cluster started with (faults/kinds:
        ``ClusterNeeds``; e.g. a message fault the message proxy on the client path, and with link =
        'inter-broker' on the links between brokers; on a cluster kchaos did not start, its front):
        turned on unless the campaign says otherwise (then the capability check names the conflict)."""
        recording = isinstance(data, dict) and isinstance(data.get("cluster"), dict) \
            and bool(data["cluster"].get("record_apis")) and data["cluster"].get("backend", "local") == "local"
        if recording:  # the whole run's record of some APIs' exchanges is the message proxy's too
            data = {**data, "cluster": {"proxy_messages": True, **data["cluster"]}}
        faults = data.get("faults") if isinstance(data, dict) else None
        if not isinstance(faults, dict) or faults.get("enabled", True) is False:
            return data
        entries = [e for e in faults.get("mix") or () if isinstance(e, dict)]
        entries += [s["fault"] for s in data.get("steps") or () if isinstance(s, dict) and isinstance(s.get("fault"), dict)]
        entries += [e for name in faults.get("packages") or () for e in PACKAGES.get(name, [])]
        needs = [KINDS[e["kind"]].cluster_needs(e["params"] if isinstance(e.get("params"), dict) else {})
                 for e in entries if e.get("kind") in KINDS]  # an unknown kind is refused by what follows
        cluster_data = data.get("cluster") if isinstance(data.get("cluster"), dict) else {}
        if cluster_data.get("backend") == "external" and isinstance(cluster_data.get("external"), dict):
            external = _merged([n.external for n in needs])
            if external:
                data = {**data, "cluster": {**cluster_data, "external": {**external, **cluster_data["external"]}}}
            return data
        cluster = _merged([n.cluster for n in needs])
        if cluster:
            data = {**data, "cluster": {**cluster, **cluster_data}}
        return data

    @model_validator(mode="after")
    def _steps_fit(self) -> "Campaign":
        check_steps(self.steps, self.cluster.backend, self.cluster.kafka_version, self.run.duration_s,
                    self.cluster.docker.image if self.cluster.backend == "docker" else None)
        held = [s.describe() for s in self.steps if s.fault is not None]
        if held and not self.faults.enabled:
            raise ValueError(f"steps ({', '.join(held)}) hold a fault over the change: that needs [faults] (the nemesis "
                             "strikes it)")
        if self.certification != CertificationSpec() and not self.steps:
            raise ValueError("[certification] judges a run with planned [[steps]] (a flip, a rolling upgrade); this "
                             "campaign has none")
        return self

    @model_validator(mode="after")
    def _group_protocol_fits(self) -> "Campaign":
        """KIP-848's consumer group protocol is Kafka 4.0's: on 3.9 it is an early access a broker
        must be told to serve, and the workers join no group (a run processes nothing)."""
        version = self.cluster.kafka_version
        if self.workload.group_protocol == "consumer" and self.cluster.backend != "external" and version \
                and tuple(int(p) for p in version.split(".")[:2]) < (4, 0):
            raise ValueError(f"workload.group_protocol = 'consumer' (KIP-848) needs Kafka 4.0 or later, not "
                             f"{version}; use --set workload.group_protocol=classic (and, for the default campaign, "
                             "--set faults.exposure= if its bar is not the question)")
        return self

    @model_validator(mode="after")
    def _faults_fit(self) -> "Campaign":
        if not self.faults.enabled:
            return self
        for entry in self.faults.entries():
            if entry.resolved_target == "txn-coordinator" and not self.workload.transactional:
                raise ValueError(f"faults: {entry.kind} targets the transaction coordinator but workload.delivery is "
                                 f"{self.workload.delivery!r} (no transactional.id); use another target")
            if "share-coordinator" in entry.resolved_target and self.workload.kind != "share":
                raise ValueError(f"faults: {entry.kind} targets the share coordinator but workload.kind is "
                                 f"{self.workload.kind!r}; use workload.kind = 'share' or another target")
            if "consumer-group" in KINDS[entry.kind].workload and self.workload.kind == "share":
                raise ValueError(f"faults: {entry.kind} is for the consumer-group pipeline; under a share workload use "
                                 "worker-pause (past the record lock) or worker-crash")
            if "transactional" in KINDS[entry.kind].workload and not self.workload.transactional:
                raise ValueError(f"faults: {entry.kind} needs a transactional workload (workload.delivery = 'exactly-once')")
        return self

    @model_validator(mode="after")
    def _txn_fits(self) -> "Campaign":
        """``workload.kind = 'txn'`` (workloads/txn.py) has no consumer group, no input or output
        topics and no seeder: what needs them is refused on load, with the reason, not run blind."""
        if self.workload.kind != "txn":
            return self
        if self.observers.count:
            raise ValueError("observers read the consume-transform-produce topics; under workload.kind = 'txn' the "
                             "workers' own polls are the reads (set observers.count = 0)")
        if self.steps:
            raise ValueError("[[steps]] are judged by the certification, which reads consume-transform-produce "
                             "results: not wired for workload.kind = 'txn'")
        if not self.faults.enabled:
            return self
        for entry in self.faults.entries():
            target = entry.resolved_target
            role = next((r for r in ("group-coordinator", "leader-input", "leader-output") if r in target), None)
            if role is not None:
                raise ValueError(f"faults: {entry.kind} targets {target}, but workload.kind = 'txn' has "
                                 + ("no consumer group" if role == "group-coordinator" else
                                    f"no {role.split('-')[1]} topic (its one topic is workload.txn_topic)")
                                 + "; use txn-coordinator, random, controller or minority")
            if "consumer-group" in KINDS[entry.kind].workload:
                raise ValueError(f"faults: {entry.kind} is for the consumer-group pipeline; workload.kind = 'txn' "
                                 "joins no group (use worker-crash or worker-pause)")
        return self


def record(run: RunDir, campaign: Campaign, seed: int) -> None:
    """Write ``campaign.json``: the resolved campaign with the run's seed filled in."""
    data = campaign.model_dump(mode="json")
    run.write_campaign({**data, "run": {**data["run"], "seed": seed}})


def load_recorded(run_dir: Path) -> Campaign:
    """The campaign a run recorded, typed; ConfigError (exit 3) when it is missing or does not validate."""
    path = f"{Path(run_dir)}/{CAMPAIGN_FILE}"  # as given, as messages name it
    try:
        data: Any = RunDir(run_dir).campaign_data()
    except FileNotFoundError:
        raise ConfigError(f"{run_dir} is not a kchaos run directory (no {CAMPAIGN_FILE})",
                          "pass a directory made by `kchaos run`") from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigError(f"{path} cannot be read: {exc}", "pass a run directory made by `kchaos run`") from None
    try:
        return Campaign.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {describe_validation_error(exc, '').lstrip('.')}",
                          "the run directory's campaign.json was altered or made by another kchaos") from None
