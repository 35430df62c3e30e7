"""Planned cluster changes during a run: feature-level flips and rolling binary upgrades.

A campaign's ``[[steps]]`` are run in order by a :class:`Stepper` thread, each no earlier than
``at_s`` seconds after the workload started (later if the previous step is still running),
while the workload and the fault schedule go on. Every step is one operation in the harness
history, ``f = "step:<action>"``: invoked when it starts, completed (``ok`` / ``fail``) when it
is done, with the feature levels before and after. The certification (verifier/certify.py)
cuts the run into phases at these operations.

Steps run on the same scheduled runner as the fault schedule (faults/timeline.py), and a step
and a node fault never touch the cluster at the same moment: both take the run's cluster lock
(a fault holds it for its whole inject-hold-heal; a rolling upgrade for each node's restart), so
faults land between node restarts, not inside one.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import traceback
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kchaos.clusters.base import Cluster
from kchaos.clusters.spec import ClusterSpec
from kchaos.errors import ConfigError, KchaosError
from kchaos.faults.protocols import FaultWorkload
from kchaos.faults.scheduled import ScheduledFault
from kchaos.faults.spec import FaultEntry
from kchaos.faults.timeline import ScheduledRunner
from kchaos.runtime.artifacts import validate_kafka_version
from kchaos.runtime.kafka_tools import describe_features, finalized_level, run_tool, tool_args, tool_jars
from kchaos.workloads.history import HistoryWriter


def version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split("."))


class StepSpec(BaseModel):
    """One ``[[steps]]`` entry."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    at_s: float = Field(..., ge=0, description="seconds after the workload started (later if the previous step runs on)")
    action: Literal["feature", "rolling-upgrade"]
    feature: str | None = Field(None, description="feature: e.g. transaction.version, metadata.version")
    level: int | Literal["latest"] | None = Field(
        None, description="feature: the level to set (upgrade or downgrade); latest = the running release's default")
    version: str | None = Field(None, description="rolling-upgrade: the Kafka release every node is restarted on")
    restart_workers: bool = Field(
        False, description="after the step, restart the workload's workers one by one (gracefully), as an operator "
                           "would so that long-lived clients pick the new feature level up")
    fault: FaultEntry | None = Field(
        None, description="feature steps: a fault held over the step: injected just before its change (aimed like a "
                          "scheduled fault: a kill of the transaction coordinator waits for a commit under way) and held "
                          "for its duration_s while the change and the workers' restarts run, so the change itself is "
                          "under fault, and no scheduled fault joins it; needs [faults]")
    settle_s: float = Field(5.0, ge=0, le=600, description="rolling-upgrade: wait after each node is back and healthy")
    node_timeout_s: float = Field(180.0, gt=0, le=1800, description="rolling-upgrade: longest wait for health per node")

    @model_validator(mode="after")
    def _fields_for_action(self) -> "StepSpec":
        if self.fault is not None and self.action != "feature":
            raise ValueError("fault: a fault is held over a feature step (a rolling upgrade restarts the nodes itself)")
        if self.action == "feature":
            if not self.feature or self.level is None or self.version is not None:
                raise ValueError("action = 'feature' takes feature and level (and no version)")
            if isinstance(self.level, int) and self.level < 0:
                raise ValueError("level must be 0 or more")
        else:
            if not self.version or self.feature is not None or self.level is not None:
                raise ValueError("action = 'rolling-upgrade' takes version (and no feature or level)")
            try:
                validate_kafka_version(self.version)
            except KchaosError as exc:
                raise ValueError(exc.one_line()) from None
        return self

    def describe(self) -> str:
        if self.action == "feature":
            return f"{self.feature} -> {self.level}"
        return f"rolling upgrade to {self.version}"


def check_steps(steps: tuple[StepSpec, ...], backend: str, kafka_version: str, duration_s: float,
                docker_image: str | None = None) -> None:
    """Raise ValueError for steps this campaign cannot run (before anything starts);
    ``docker_image``: the Docker backend's ``cluster.docker.image``, when the campaign fixes one."""
    version = kafka_version
    last_at = -1.0
    for i, step in enumerate(steps):
        where = f"steps[{i}]"
        if step.at_s < last_at:
            raise ValueError(f"{where}: at_s {step.at_s} is before the previous step's {last_at}; list steps in order")
        last_at = step.at_s
        if step.at_s >= duration_s:
            raise ValueError(f"{where}: at_s {step.at_s} is not within run.duration_s = {duration_s}")
        if step.action == "rolling-upgrade":
            if backend not in ("local", "docker"):
                raise ValueError(f"{where}: a rolling upgrade needs a cluster kchaos starts (cluster.backend = 'local' "
                                 f"or 'docker'), not {backend!r}")
            if backend == "docker" and docker_image and not docker_image.startswith("kchaos/kafka"):
                raise ValueError(f"{where}: cluster.docker.image = {docker_image!r} is one release; a rolling upgrade "
                                 "runs each release's own image (leave cluster.docker.image unset)")
            assert step.version is not None
            if version_tuple(step.version) <= version_tuple(version):
                raise ValueError(f"{where}: {step.version} is not newer than {version}, which the cluster runs then")
            version = step.version
        elif step.feature == "transaction.version" and isinstance(step.level, int):
            if step.level > 2:
                raise ValueError(f"{where}: transaction.version levels are 0, 1 and 2")
            if step.level == 2 and version_tuple(version) < (4, 0, 0):
                raise ValueError(f"{where}: transaction.version 2 needs Kafka 4.0 or later; the cluster runs {version} then")


#: features Kafka does not lower again (or only losing metadata): a change of one on a cluster kchaos did
#: not start could not be undone, so it is refused there
IRREVERSIBLE_FEATURES = ("metadata.version", "kraft.version")


def check_feature_consent(steps: tuple[StepSpec, ...], cluster: ClusterSpec) -> None:
    """On a cluster kchaos did not start, a feature step changes the whole cluster for every client
    of it: it needs ``cluster.external.allow_feature_changes = true`` and the cluster's own
    ``cluster_id`` (checked against DescribeCluster before anything is touched), and a feature whose
    level kchaos can put back. ConfigError (exit 3, before anything starts) naming what is missing."""
    ext = cluster.external
    flips = [(i, step) for i, step in enumerate(steps) if step.action == "feature"]
    if cluster.backend != "external" or ext is None or not flips:
        return
    for i, step in flips:
        if step.feature in IRREVERSIBLE_FEATURES:
            raise ConfigError(f"steps[{i}] ({step.describe()}): kchaos does not change {step.feature} on a cluster it "
                              "did not start: Kafka does not lower it again, so the change could not be undone",
                              "make that change yourself, or certify it on the local or docker backend")
    missing = [what for what, given in (("cluster.external.allow_feature_changes = true", ext.allow_feature_changes),
                                        ("cluster.external.cluster_id", ext.cluster_id)) if not given]
    if missing:
        i, step = flips[0]
        raise ConfigError(f"steps[{i}] ({step.describe()}) would change a feature level of an external cluster, which "
                          f"needs {' and '.join(missing)}",
                          f"set {'both' if len(missing) > 1 else 'it'} (kafka-cluster.sh cluster-id prints the id; it "
                          "is checked against the cluster before anything is touched); the level before is "
                          "journaled and put back at the end of the run")


def latest_level(cluster: Cluster, feature: str) -> int:
    """The level ``feature`` has by default in the release the cluster's tools come from."""
    args, version = tool_args(cluster)
    if tool_jars("features", version)[1] == version:
        out = run_tool("features", [*args, "version-mapping"], version).stdout
    else:
        # version-mapping is release-specific: an older release's tools would name its own
        # levels, so ask the broker's own StorageTool instead
        out = run_tool("storage", ["version-mapping"], version).stdout
    match = re.search(rf"^{re.escape(feature)}=(\d+)", out, re.MULTILINE)
    if not match:
        raise KchaosError(f"Kafka {version} maps no level for feature {feature!r}")
    return int(match.group(1))


class Stepper(ScheduledRunner[StepSpec]):
    """The planned steps of a run, on the fault schedule's runner and lock."""

    def __init__(self, cluster: Cluster, steps: tuple[StepSpec, ...], history: HistoryWriter,
                 cluster_lock: threading.Lock, on_event: Any = None, workload: FaultWorkload | None = None,
                 nemesis: Any = None, seed: int = 0):
        super().__init__("stepper", steps, lambda step: step.at_s, cluster_lock)
        self.cluster, self.steps, self.history = cluster, steps, history
        self.workload = workload
        #: strikes the faults held over steps (faults/nemesis.py Nemesis.strike)
        self.nemesis = nemesis
        self.seed = seed
        self.on_event = on_event or (lambda message: None)
        self.executed: list[dict[str, Any]] = []
        self.current: StepSpec | None = None

    @property
    def done(self) -> bool:
        return len(self.executed) >= len(self.steps)

    def stop(self, timeout_s: float = 300.0) -> None:
        """No further step or node upgrade starts; a node restart under way is waited for (so
        that no node is started after the cluster is stopped); returns within ``timeout_s``."""
        self.stopping.set()
        if self.cluster_lock.acquire(timeout=timeout_s):
            self.cluster_lock.release()
        self.halt(5)

    def _features(self) -> dict[str, Any]:
        try:
            return describe_features(self.cluster)
        except Exception as exc:
            return {"error": repr(exc)}

    def execute(self, index: int, step: StepSpec) -> None:
        f = f"step:{step.action}"
        self.current = step
        value = {"index": index, **step.model_dump(mode="json", exclude_none=True), "describe": step.describe()}
        op = self.history.invoke(f, value)
        if self.nemesis is not None:
            self.nemesis.begin_phase()
        self.on_event(f"step {index}: {step.describe()}")
        before = self._features()
        # a step with a fault of its own holds the cluster lock from the strike to the fault's heal:
        # no scheduled fault joins it, so the change runs under that one fault
        held = self.cluster_lock if step.fault is not None and self.nemesis is not None else contextlib.nullcontext()
        try:
            with held:
                strike = self._strike(index, step)
                detail = (self._feature(step, before, locked=strike is not None) if step.action == "feature"
                          else self._rolling_upgrade(step))
                pool = self.workload.pool if self.workload is not None else None
                if step.restart_workers and pool is not None:
                    detail["workers_restarted"] = pool.restart_all()
                if strike is not None:  # the step lasts until its fault healed: its phase covers the fault
                    strike.join(timeout=(step.fault.duration_s if step.fault and step.fault.duration_s else 10.0)
                                + 120)
        except Exception as exc:
            reason = exc.one_line() if isinstance(exc, KchaosError) else repr(exc)
            after = self._features()
            self.history.complete(op, f, "fail", {"index": index, "features_before": before, "features_after": after},
                                  error=reason)
            self.executed.append({"index": index, "action": step.action, "outcome": "fail", "error": reason,
                                  "trace": traceback.format_exc(limit=3)})
            self.on_event(f"step {index} failed: {reason}")
        else:
            after = self._features()
            self.history.complete(op, f, "ok", {"index": index, "features_before": before, "features_after": after,
                                                **detail})
            self.executed.append({"index": index, "action": step.action, "outcome": "ok", **detail})
            self.on_event(f"step {index} done: {step.describe()}")
        finally:
            self.current = None
            if self.nemesis is not None:
                self.nemesis.end_phase(step.at_s)

    #: a fault held over step i has index STRIKE_INDEX + i, past any schedule's
    STRIKE_INDEX = 10_000
    #: how long a step waits for its fault to land before it acts anyway (aiming waits up to 60 s)
    STRIKE_WAIT_S = 75.0

    def _strike(self, index: int, step: StepSpec) -> threading.Thread | None:
        """The step's fault (``fault``), struck now in a thread of its own; returns once it acted."""
        if step.fault is None or self.nemesis is None:
            return None
        entry = step.fault
        sf = ScheduledFault(self.STRIKE_INDEX + index, 0.0, entry.kind, entry.resolved_target,
                            entry.duration_s or 10.0, self.seed + self.STRIKE_INDEX + index, dict(entry.params))
        injected = threading.Event()
        thread = threading.Thread(target=self.nemesis.strike, args=(sf, f"step {index}: {step.describe()}", injected),
                                  name=f"step-{index}-fault", daemon=True)
        thread.start()
        injected.wait(self.STRIKE_WAIT_S)
        return thread

    def _feature(self, step: StepSpec, before: dict[str, Any], locked: bool = False) -> dict[str, Any]:
        assert step.feature is not None
        target = latest_level(self.cluster, step.feature) if step.level == "latest" else int(step.level)  # type: ignore[arg-type]
        # metadata.version prints as a release name (None): the tool decides the direction
        current = None if "error" in before else finalized_level(before, step.feature)
        if current == target:
            return {"feature": step.feature, "level": target, "changed": False}
        with contextlib.nullcontext() if locked else self.cluster_lock:
            if self.stopping.is_set():
                raise KchaosError("the run stopped before the feature change")
            # a cluster kchaos did not start journals the change and its undo first
            self.cluster.change_feature(step.feature, target, current)
        return {"feature": step.feature, "level": target, "from": current if current is not None else -1,
                "changed": True}

    def _rolling_upgrade(self, step: StepSpec) -> dict[str, Any]:
        assert step.version is not None
        cluster = self.cluster
        # the active controller last: one leader election instead of one per restart
        try:
            leader = cluster.active_controller()
        except Exception:
            leader = None
        order = sorted((n.node_id for n in cluster.nodes), key=lambda i: (i == leader, i))
        nodes = []
        for node_id in order:
            with self.cluster_lock:
                if self.stopping.is_set():
                    break
                done = cluster.upgrade_node(node_id, step.version)
            self.history.event("upgrade-node", done, outcome="ok")
            started = time.monotonic()
            cluster.wait_healthy(step.node_timeout_s)
            done["healthy_after_s"] = round(time.monotonic() - started, 1)
            nodes.append(done)
            self.on_event(f"node {node_id} runs {step.version} (healthy after {done['healthy_after_s']}s)")
            if self.wait(step.settle_s):
                break
        if len(nodes) == len(order):
            cluster.finish_upgrade(step.version)
        else:
            raise KchaosError(f"the rolling upgrade to {step.version} was stopped after {len(nodes)} of {len(order)} nodes")
        return {"nodes": nodes, "version": step.version}
