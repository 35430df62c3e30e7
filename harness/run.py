"""``kchaos run``: one campaign, one run directory, one exit code.

Phases: setup -> steady -> (faults) -> heal -> drain -> final reads -> verify. Every phase is
written to ``status.json`` as it starts; ``complete: true`` only once results are written, so an
interrupted or crashed run is never mistaken for a finished one. Whatever happens, the workers
and the cluster are stopped (``finally``), and the history recorded so far is merged.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import platform
import random
import re
import shlex
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka

from kchaos.clusters import create_cluster
from kchaos.clusters.docker import DockerCluster
from kchaos.clusters.base import Capability
from kchaos.clusters.clock_probe import measure_broker_clocks
from kchaos.clusters.node_config import SMALL_MACHINE_DEFAULTS
from kchaos.faults.base import FaultContext
from kchaos.faults.nemesis import Nemesis
from kchaos.faults.schedule import read_schedule, write_schedule
from kchaos.faults.steps import Stepper
from kchaos.harness.campaign import campaign_argument, planned_schedule
from kchaos.harness.progress import Progress
from kchaos import log
from kchaos.errors import ConfigError
from kchaos.log import say
from kchaos.reports.run_report import render_run_report
from kchaos.reports.what_ran import seeder_client, workers_client
from kchaos.rundir import RunDir
from kchaos.runtime import faketime
from kchaos.runtime.artifacts import resolve_kafka
from kchaos.runtime.reaper import start_reaper
from kchaos.signals import GracefulStop
from kchaos.verifier.campaign import Campaign, load_recorded, record
from kchaos.verifier.outcome import Outcome
from kchaos.verifier.verdict import judge_run
from kchaos.verifier.verify import SparkJob, start_spark_job_ahead
from kchaos.workloads import make_workload
from kchaos.workloads.ctp import CtpWorkload
from kchaos.workloads.history import HistoryWriter, merge_history
from kchaos.workloads.java_client import check_java_properties
from kchaos.workloads.registry import library_label, prepare

#: after a graceful stop, how long the drain may take at most (the user wants out soon)
INTERRUPTED_DRAIN_S = 60.0


def replay_command(run: RunDir, campaign: str, campaign_path: Path | None, seed: int,
                   overrides: list[str] | None = None) -> str:
    """The command that runs this run again, naming the campaign that ran. A run of a campaign
    file: ``kchaos run`` of that file (a shipped one by its name, which finds it from any
    directory and from a wheel; the user's own by its absolute path), its seed and the user's
    ``--set``. A run of a recorded campaign (``kchaos replay``, ``kchaos findings verify``) has
    no file behind it: ``kchaos replay`` of its own directory, whose ``campaign.json`` holds it."""
    again = f"kchaos replay {shlex.quote(str(run.path))}"
    if campaign_path is None:
        return f"{again}  # campaign {campaign}, seed {seed}: its recorded config and fault schedule"
    sets = "".join(f" --set {shlex.quote(o)}" for o in overrides or [])
    return f"kchaos run {shlex.quote(campaign_argument(campaign_path))} --seed {seed}{sets}  # or: {again}"


def replay_record(run: RunDir, campaign: str, campaign_path: Path | None, seed: int,
                  overrides: list[str] | None, replay_of: Path | None) -> dict[str, Any]:
    """``replay.json``: how to run this run again, and which run it replayed, if any."""
    return {"command": replay_command(run, campaign, campaign_path, seed, overrides), "campaign": campaign,
            "seed": seed, "replay_of": str(replay_of) if replay_of else None,
            "note": "replays the same config, seed and fault schedule; timing is not reproduced exactly"}


def replay_run(source: Path, out_root: Path, campaign: Campaign | None = None) -> tuple[RunDir, Outcome]:
    """Re-run a stored run (a run directory or an evidence bundle): its recorded campaign (or
    ``campaign``, the recorded one changed: another release), its seed and its stored fault
    schedule."""
    campaign = campaign or load_recorded(source)
    try:
        schedule = read_schedule(source / "schedule.json")
        seed = int((source / "seed").read_text().strip())
    except FileNotFoundError as exc:
        raise ConfigError(f"{source} cannot be replayed: {exc.filename} is missing",
                          "pass a run directory made by `kchaos run`") from None
    return execute_run(campaign, out_root, seed=seed, schedule=schedule, replay_of=source)


def execute_run(campaign: Campaign, out_root: Path, seed: int | None = None,
                campaign_path: Path | None = None, schedule: list | None = None,
                replay_of: Path | None = None, overrides: list[str] | None = None) -> tuple[RunDir, Outcome]:
    """One run of ``campaign`` into a new directory under ``out_root``: its directory and its
    outcome, exactly as the verifier judged it (verifier/outcome.py)."""
    seed = seed if seed is not None else campaign.run.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    prepare_artifacts(campaign)  # jars, the Java driver, client properties: a failure creates and starts nothing
    if schedule is None:
        schedule = planned_schedule(campaign, seed)
    check_out_root(out_root)
    run = RunDir.create(out_root, campaign.name, seed)
    campaign = own_topics(campaign, run)
    run_log = log.copied_to(run.path / "kchaos.log")  # every line of the run, kept with it
    run_log.__enter__()
    (run.path / "seed").write_text(f"{seed}\n")
    record(run, campaign, seed)
    run.write_json("replay.json", replay_record(run, campaign.name, campaign_path, seed, overrides, replay_of))
    # The schedule is written before anything runs (record first).
    write_schedule(run.path / "schedule.json", schedule, seed)
    run.write_json("environment.json", environment(campaign))
    run.set_status("setup")
    say(f"run directory {run.path} (seed {seed})")
    history = HistoryWriter(run.path / "history" / "harness.jsonl", "harness")
    start_reaper(run.path)  # kills whatever this run started if the harness itself dies
    cluster = create_cluster(campaign.cluster, run.cluster_dir)
    workload: CtpWorkload | None = None
    nemesis: Nemesis | None = None
    spark_job: SparkJob | None = None
    stepper: Stepper | None = None
    cluster_lock = threading.Lock()
    drained = merged = False
    heal: dict[str, Any] = {"healthy": True, "faults": 0}
    healed_at = 0.0
    workload_started = time.monotonic()
    # From the workload's start to the verdict, a first signal winds the run down gracefully
    # (kchaos/signals.py); before that, and at a second signal, it aborts as any exception does.
    stop = GracefulStop(on_request=say, describe=lambda: {
        "phase": run.phase, "at_s": round(time.monotonic() - workload_started, 1)})
    try:
        say(f"starting {campaign.cluster.nodes}-node Kafka {campaign.cluster.kafka_version} cluster ({campaign.cluster.backend})")
        cluster.start()
        say(f"cluster ready at {cluster.bootstrap_servers}")
        run.write_json("cluster.json", cluster.info())
        clocks = _measure_clocks(cluster, run, [])
        workload = make_workload(campaign.workload, cluster, run, seed, history, campaign.observers)
        workload.setup()
        run.set_status("steady")
        history.event("phase", {"phase": "steady"}, outcome="ok")
        workload_started = time.monotonic()
        stop.__enter__()
        workload.start()
        if schedule:
            nemesis = Nemesis(FaultContext(cluster, workload), schedule, history, on_event=say, cluster_lock=cluster_lock,
                              pacing=campaign.faults.pacing)
            nemesis.start()
            run.set_status("faults")
            say(f"fault schedule: {len(schedule)} faults ({', '.join(sorted({f.kind for f in schedule}))})")
        if campaign.steps:
            stepper = Stepper(cluster, campaign.steps, history, cluster_lock, on_event=say, workload=workload,
                              nemesis=nemesis, seed=seed)
            stepper.start()
            say(f"planned steps: {'; '.join(f'{s.at_s:.0f}s {s.describe()}' for s in campaign.steps)}")
        _wait_with_progress(workload, campaign.run.duration_s, campaign.run.progress_interval_s,
                            "faults" if schedule else "steady", nemesis, stepper, stop,
                            pacing_slack_s=pacing_slack_s(campaign, schedule))
        if campaign.workload.records is None and campaign.workload.kind != "txn" and not stop.requested:
            # inputs followed the workload phase; the drain waits for what was seeded (kind txn seeds nothing)
            workload.halt_seeding()
            history.event("seeding-stopped", {"reason": "the workload phase ended", "seeded": workload.snapshot()["seeded"]},
                          outcome="ok")
        if stop.requested:
            history.event("interrupted", stop.requested, outcome="info")
            if nemesis is not None:
                # no new fault once the user asked to stop: halting the seeder can take seconds (a
                # commit in flight during a fault), and the nemesis would go on injecting meanwhile
                nemesis.stop()
            workload.halt_seeding()
        if stepper is not None:
            stepper.stop()
            run.write_json("steps.json", {"steps": stepper.executed,
                                          "planned": [s.model_dump(mode="json") for s in campaign.steps]})
        if nemesis is not None:
            run.set_status("heal")
            nemesis.stop()
            say("healing: every node, link and worker back; waiting for a healthy cluster")
            dropped = sum(1 for e in nemesis.executed if e["outcome"] == "dropped")
            heal = {**nemesis.final_heal(campaign.faults.heal_timeout_s), "faults": len(nemesis.executed) - dropped,
                    "dropped": dropped, "executed": nemesis.executed}
            healed_at = time.monotonic()
            run.write_json("heal.json", heal)
            say("cluster healthy again" if heal["healthy"] else f"cluster NOT healthy after heal: {heal.get('error')}")
        run.set_status("drain")
        history.event("phase", {"phase": "drain"}, outcome="ok")
        drain_s = campaign.workload.drain_timeout_s
        if stop.requested:
            drain_s = min(drain_s, INTERRUPTED_DRAIN_S)
        interrupted_before_drain = stop.requested is not None
        say(f"draining: waiting up to {drain_s:.0f}s for every input to be processed" if campaign.workload.kind != "txn"
            else "draining: nothing to wait for (kind txn has no inputs)")
        # a signal during the drain ends it (the final reads and the verdict follow)
        drained = workload.drain(drain_s, cancel=lambda: stop.requested is not None and not interrupted_before_drain)
        say("drained" if drained else "drain timed out: some inputs were not processed")
        workload.stop()
        # the verifier's JVM and session come up during the final reads, once the workers have
        # stopped (started at the drain, they took the CPU its backlog needed: docs/benchmarks.md);
        # it checks nothing before the run is recorded (verify.SparkJob)
        # (none for kind txn: the job ingests the pipeline's topics; verify.py's txn_run_results runs
        # the isolation check's Spark side itself)
        spark_job = (start_spark_job_ahead(run.path, campaign.verifier, cluster.bootstrap_servers)
                     if campaign.workload.kind != "txn" else None)
        run.set_status("final-reads")
        history.event("phase", {"phase": "final-reads", "drained": drained}, outcome="ok")
        final = workload.final_reads(recover_hanging=campaign.faults.enabled and campaign.faults.recover_hanging)
        _measure_clocks(cluster, run, clocks)
        final["drained"] = drained
        final["load_average"] = load_average()
        final["heal"] = {k: v for k, v in heal.items() if k != "trace"}
        if nemesis is not None and heal.get("healthy"):
            final["heal"]["at_end"] = _registration_at_end(cluster, healed_at + _fence_deadline_s(campaign))
        # read again after the registration watch: a broker fenced since the final reads shows
        final["brokers_at_end"] = {**workload.brokers_at_end(),
                                   "after_heal_s": round(time.monotonic() - healed_at, 1) if healed_at else None}
        if stop.requested:
            final["interrupted"] = stop.requested
        run.write_json("final.json", final)
        workload.close()
        history.close()
        merge_history(run.path / "history", run.path)
        merged = True
        # verified while the cluster is still up: the Spark job reads the topics through Kafka
        outcome = judge_run(run, campaign,
                            bootstrap=cluster.bootstrap_servers if campaign.verifier.read_from_kafka else None,
                            spark_job=spark_job)
    finally:
        if spark_job is not None:
            spark_job.cancel()  # a job never released (the run failed first) stands down; a finished one is gone
        stop.__exit__()
        if stepper is not None:
            stepper.stop()
        if nemesis is not None:
            nemesis.stop()  # heals the active fault even when the run failed or was interrupted
        if workload is not None:
            workload.close()
        say("stopping the cluster")
        cluster.stop()
        history.close()
        if not merged and (run.path / "history").exists():
            merge_history(run.path / "history", run.path)
        render_report(run)
        run_log.__exit__(None, None, None)
    return run, outcome


#: the suffix a run on an external cluster gives its topics and group (one replayed is re-suffixed)
_RUN_SUFFIX = re.compile(r"-r[0-9a-f]{8}$")


def own_topics(campaign: Campaign, run: RunDir) -> Campaign:
    """On a cluster kchaos did not start, the run's topics and group are its own: the names get a
    suffix unique to the run (recorded in campaign.json, so every reader sees them). Another run's
    records in a topic of the same name, or its group's committed offsets, would otherwise be
    judged as this run's (a cluster kchaos starts is new for every run)."""
    if campaign.cluster.backend != "external" or campaign.workload.external_command:
        return campaign
    tag = "-r" + hashlib.blake2b(str(run.path).encode(), digest_size=4).hexdigest()

    def own(name: str) -> str:
        return _RUN_SUFFIX.sub("", name) + tag

    workload = campaign.workload.model_copy(update={
        "input_topic": own(campaign.workload.input_topic),
        "output_topics": tuple(own(t) for t in campaign.workload.output_topics),
        "group_id": own(campaign.workload.group_id),
        **({"txn_topic": own(campaign.workload.txn_topic)} if campaign.workload.kind == "txn" else {})})
    return campaign.model_copy(update={"workload": workload})


METADATA_RETRY_S = 10.0


def _fence_deadline_s(campaign: Campaign) -> float:
    """How long after the heal the controller has surely fenced a broker whose heartbeats had
    stopped by then: its session timeout (the campaign's, else what kchaos' clusters set, else
    Kafka's default on a cluster kchaos did not start), and a heartbeat interval to spare."""
    configured = (campaign.cluster.broker or {}).get("broker.session.timeout.ms")
    if configured is None:
        configured = 9000 if campaign.cluster.backend == "external" else SMALL_MACHINE_DEFAULTS["broker.session.timeout.ms"]
    return int(configured) / 1000 + 2


def _registration_at_end(cluster: Any, not_before: float) -> str | None:
    """Whether every broker is still registered at the end of the run, watched until at least
    ``not_before`` (monotonic); None when so. The heal's health check can pass while a broker's
    heartbeats have already stopped, since the controller fences it only a session timeout later
    (docs/findings.md F9: brokers whose clocks were stepped back stayed cut from their controller,
    and the heal found the cluster healthy seconds before the fence). A slow drain or final reads
    cost nothing here; a run that ended sooner waits out the rest, and stops at the first broker
    missing."""
    give_up = not_before + METADATA_RETRY_S  # a read that fails at the deadline is tried again
    while True:
        try:
            missing, failed = cluster.unregistered_brokers(), None
        except Exception as exc:
            missing, failed = [], exc
        if missing:
            say(f"brokers {missing} not registered at the end of the run (healthy at the final heal)")
            return f"brokers {missing} not registered"
        now = time.monotonic()
        if now >= not_before and failed is None:
            return None
        if now >= give_up:
            return f"the brokers' metadata could not be read: {failed!r}"
        time.sleep(min(1.0, max(0.1, not_before - now)))


def _measure_clocks(cluster: Any, run: RunDir, clocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """On a cluster kchaos did not start, the brokers' clocks against this machine's, at the start
    and at the end (``clock.json``; the split-transaction check shifts and widens by them). On a
    cluster whose clocks the campaign moves, the same at the start: the baseline, and the probe's
    topic made while every broker is up (a clock fault measures through it)."""
    if cluster.backend_name != "external" and not cluster.has(Capability.CLOCK):
        return clocks
    try:
        clocks.append(measure_broker_clocks(cluster))
    except Exception as exc:
        clocks.append({"at": time.time(), "error": repr(exc)})
    run.write_json("clock.json", {"measurements": clocks})
    measured = clocks[-1].get("brokers") or {}
    missed = clocks[-1].get("not_measured") or []
    say("broker clocks against this machine's: " + (", ".join(
        f"{b} {m['offset_ms']:+.0f} ms (within {m['bound_ms']:.0f})" for b, m in sorted(measured.items()))
        or f"not measured ({clocks[-1].get('error', 'no answer')})")
        + (f"; not measured: {', '.join(str(b) for b in sorted(missed))} (no leader for its probe partition, "
           "or no answer)" if measured and missed else ""))
    return clocks


def check_out_root(out_root: Path) -> None:
    """Where run directories go must be (or become) a directory: checked before anything starts."""
    out_root = Path(out_root)
    blocker = next((p for p in (out_root, *out_root.parents) if p.exists()), None)
    if blocker is not None and not blocker.is_dir():
        raise ConfigError(f"--out {out_root}: {blocker} is a file, not a directory", "pass a directory for run directories")


def prepare_artifacts(campaign: Campaign) -> None:
    """Resolve what the run will need later (the Java driver, the releases of a rolling upgrade)
    before any cluster starts, so that a missing artefact is an error that starts nothing."""
    if campaign.cluster.backend == "local":
        resolve_kafka(campaign.cluster.kafka_version)
        if campaign.cluster.clock_control:
            faketime.ensure_library()
    if campaign.cluster.backend == "docker":
        DockerCluster.preflight(campaign.cluster)
        resolve_kafka(campaign.cluster.kafka_version)  # kchaos' image is built from these jars
    workload = campaign.workload
    if not workload.external_command:
        # every client and release of the fleet (workload.client, mixed or [[workload.fleet]]), built
        # from its registry into the cache (workloads/registry.py); a release that is not there stops here
        java = set()
        for slot, _ in workload.fleet_groups():
            prepare(slot.client, slot.version)
            if slot.client in ("java", "streams"):
                java.add(slot.version)
        for version in sorted(java):  # the driver's --check-config, on each kafka-clients release
            check_java_properties(workload.model_dump(mode="json"), version)
    workload.external_jars()
    for step in campaign.steps:
        if step.action == "rolling-upgrade" and step.version:
            resolve_kafka(step.version)


def environment(campaign: Campaign) -> dict[str, Any]:
    """What the run was made with (shown in the report's "what was tested"). ``client`` is what
    results.json names for a workload whose client is confluent: the user's app when one runs
    as the workers (its ``client`` is then confluent by default), else confluent-kafka."""
    confluent = f"confluent-kafka {importlib.metadata.version('confluent-kafka')} (librdkafka {confluent_kafka.libversion()[0]})"
    info: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(),
                            "confluent_kafka": confluent,
                            "client": workers_client(campaign.workload, confluent) if campaign.workload.external_command
                            else confluent,
                            "workers": workers_client(campaign.workload, confluent),
                            "seeder": seeder_client(confluent),
                            # the nodes' log stamps are local time: the verifier reads them in this offset
                            "utc_offset_s": time.localtime().tm_gmtoff}
    if not campaign.workload.external_command:
        # what ran in which slots, by client and release (the release table, the report and run.clients read it)
        info["fleet"] = [{"client": slot.client, "version": slot.version, "label": slot.label,
                          "library": library_label(slot.client, slot.version), "slots": slots}
                         for slot, slots in campaign.workload.fleet_groups()]
    try:
        info["pyspark"] = importlib.metadata.version("pyspark")
    except importlib.metadata.PackageNotFoundError:
        info["pyspark"] = None
    info["load_average"] = load_average()  # every figure of a run is read beside its load
    return info


def load_average() -> list[float]:
    """The machine's 1, 5 and 15 minute load averages, now."""
    return [round(x, 2) for x in os.getloadavg()]


def render_report(run: RunDir) -> None:
    """The HTML report; a failure to render is said, never turned into a verdict."""
    try:
        say(f"report: {render_run_report(run.path)}")
    except Exception as exc:  # the verdict stands; the report can be re-rendered with `kchaos report`
        say(f"the report could not be rendered ({exc!r}); try `kchaos report {run.path}`")


def pacing_slack_s(campaign: Campaign, schedule: list | None) -> float:
    """How much longer than twice its duration a run may wait for its schedule when its faults are
    paced by the work: each fault may wait for the pipeline's recovery, then for a commit to aim at."""
    pacing = campaign.faults.pacing
    if pacing.mode != "recovery" or not schedule:
        return 0.0
    return len(schedule) * (pacing.max_wait_s + (pacing.aim_wait_s if pacing.aim else 0.0))


def _wait_with_progress(workload: Any, duration_s: float, interval_s: float, phase: str, nemesis: Any = None,
                        stepper: Any = None, stop: GracefulStop | None = None, pacing_slack_s: float = 0.0) -> None:
    """Wait ``duration_s``, and on until every scheduled fault ran (at most twice as long, plus what
    paced faults may wait: ``pacing_slack_s``) and every planned step is done (at most 2 x duration
    + 15 min), showing live progress (harness/progress.py)."""
    progress = Progress(interval_s)
    started = time.monotonic()
    try:
        while True:
            now = time.monotonic()
            schedule_done = nemesis is None or len(nemesis.executed) >= len(nemesis.schedule)
            steps_done = stepper is None or stepper.done
            elapsed = now - started
            if stop is not None and stop.requested:
                return
            if (elapsed >= duration_s and (schedule_done or elapsed >= 2 * duration_s + pacing_slack_s)
                    and (steps_done or elapsed >= 2 * duration_s + 900)):
                return
            if progress.due():
                snap = workload.snapshot()
                # a workload without inputs (kind txn) says its own progress
                work = snap.get("progress") or (f"seeded {snap['seeded']} inputs, "
                                                f"{progress.processed_text(workload.processed_inputs())}")
                active = nemesis.active.name if nemesis is not None and nemesis.active is not None else "none"
                faults = f", faults done {len(nemesis.executed)}/{len(nemesis.schedule)}" if nemesis is not None else ""
                if stepper is not None:
                    current = stepper.current
                    faults += (f", steps done {len(stepper.executed)}/{len(stepper.steps)}"
                               + (f" (now: {current.describe()})" if current is not None else ""))
                progress.show(f"{phase}: {now - started:.0f}s elapsed, {max(0.0, duration_s - (now - started)):.0f}s left; "
                              f"{work}; active fault {active}{faults}; "
                              f"worker restarts {snap['restarts']}")
            time.sleep(0.25)
    finally:
        progress.close()
