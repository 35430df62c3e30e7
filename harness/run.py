"""``kchaos run``: one campaign, one run directory, one exit code.

Phases: setup -> steady -> (faults) -> heal -> drain -> final reads -> verify. Every phase is
written to ``status.json`` as it starts; ``complete: true`` only once results are written, so an
interrupted or crashed run is never mistaken for a finished one. Whatever happens, the workers
and the cluster are stopped (``finally``), and the history recorded so far is merged.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

from clusters import create_cluster
from harness.campaign import Campaign
from harness.rundir import RunDir

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_HARNESS_ERROR = 0, 1, 2, 3
VERDICT_EXIT = {"valid": EXIT_VALID, "invalid": EXIT_INVALID, "unknown": EXIT_UNKNOWN}


def say(message: str) -> None:
    print(f"[kchaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def replay_command(run: RunDir, campaign_path: Path | None, seed: int) -> str:
    target = str(campaign_path) if campaign_path else "campaigns/default.toml"
    return f"kchaos run {target} --seed {seed}  # or: kchaos replay {run.path}"


def execute_run(campaign: Campaign, out_root: Path, seed: int | None = None,
                campaign_path: Path | None = None, schedule: list | None = None,
                replay_of: Path | None = None) -> tuple[RunDir, int]:
    from faults.library import FaultContext
    from faults.nemesis import Nemesis
    from faults.schedule import generate_schedule, write_schedule
    from workloads.ctp import CtpWorkload
    from workloads.history import HistoryWriter, merge_history

    seed = seed if seed is not None else campaign.run.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    run = RunDir.create(out_root, campaign.name, seed)
    (run.path / "seed").write_text(f"{seed}\n")
    run.write_json("campaign.json", {**campaign.model_dump(mode="json"), "run": {**campaign.run.model_dump(mode="json"),
                                                                                  "seed": seed}})
    run.write_json("replay.json", {"command": replay_command(run, campaign_path, seed), "seed": seed,
                                   "replay_of": str(replay_of) if replay_of else None,
                                   "note": "replays the same config, seed and fault schedule; timing is not reproduced exactly"})
    # The schedule is written before anything runs (record first).
    if schedule is None:
        schedule = generate_schedule(campaign.faults, campaign.run.duration_s, seed)
    write_schedule(run.path / "schedule.json", schedule, seed)
    run.set_status("setup")
    say(f"run directory {run.path} (seed {seed})")
    history = HistoryWriter(run.path / "history" / "harness.jsonl", "harness")
    from clusters.reaper import start_reaper

    start_reaper(run.path)  # kills whatever this run started if the harness itself dies
    cluster = create_cluster(campaign.cluster, run.cluster_dir)
    workload: CtpWorkload | None = None
    nemesis: Nemesis | None = None
    drained = False
    heal: dict[str, Any] = {"healthy": True, "faults": 0}
    try:
        say(f"starting {campaign.cluster.nodes}-node Kafka {campaign.cluster.kafka_version} cluster ({campaign.cluster.backend})")
        cluster.start()
        say(f"cluster ready at {cluster.bootstrap_servers}")
        run.write_json("cluster.json", cluster.info())
        workload = CtpWorkload(campaign.workload, cluster, run, seed, history)
        workload.setup()
        run.set_status("steady")
        history.event("phase", {"phase": "steady"}, outcome="ok")
        workload.start()
        if schedule:
            nemesis = Nemesis(FaultContext(cluster, workload), schedule, history, on_event=say)
            nemesis.start()
            run.set_status("faults")
            say(f"fault schedule: {len(schedule)} faults ({', '.join(sorted({f.kind for f in schedule}))})")
        _wait_with_progress(workload, campaign.run.duration_s, campaign.run.progress_interval_s,
                            "faults" if schedule else "steady", nemesis)
        if nemesis is not None:
            run.set_status("heal")
            nemesis.stop()
            say("healing: every node, link and worker back; waiting for a healthy cluster")
            heal = {**nemesis.final_heal(campaign.faults.heal_timeout_s), "faults": len(nemesis.executed),
                    "executed": nemesis.executed}
            run.write_json("heal.json", heal)
            say("cluster healthy again" if heal["healthy"] else f"cluster NOT healthy after heal: {heal.get('error')}")
        run.set_status("drain")
        history.event("phase", {"phase": "drain"}, outcome="ok")
        say(f"draining: waiting up to {campaign.workload.drain_timeout_s:.0f}s for every input to be processed")
        drained = workload.drain(campaign.workload.drain_timeout_s)
        say("drained" if drained else "drain timed out: some inputs were not processed")
        workload.stop()
        run.set_status("final-reads")
        history.event("phase", {"phase": "final-reads", "drained": drained}, outcome="ok")
        final = workload.final_reads()
        final["drained"] = drained
        final["heal"] = {k: v for k, v in heal.items() if k != "trace"}
        run.write_json("final.json", final)
    finally:
        if nemesis is not None:
            nemesis.stop()  # heals the active fault even when the run failed or was interrupted
        if workload is not None:
            workload.close()
        say("stopping the cluster")
        cluster.stop()
        history.close()
        if (run.path / "history").exists():
            merge_history(run.path / "history", run.path)
    return run, verify(run)


def _wait_with_progress(workload: Any, duration_s: float, interval_s: float, phase: str, nemesis: Any = None) -> None:
    """Wait ``duration_s``, and on until every scheduled fault ran (at most twice as long)."""
    started = time.monotonic()
    next_line = started + interval_s
    while True:
        now = time.monotonic()
        schedule_done = nemesis is None or len(nemesis.executed) >= len(nemesis.schedule)
        if now - started >= duration_s and (schedule_done or now - started >= 2 * duration_s):
            return
        if now >= next_line:
            snap = workload.snapshot()
            remaining = workload.remaining_inputs()
            active = nemesis.active.name if nemesis is not None and nemesis.active is not None else "none"
            say(f"{phase}: {now - started:.0f}/{duration_s:.0f}s, inputs seeded {snap['seeded']}, "
                f"not yet processed {remaining if remaining is not None else '?'}, worker restarts {snap['restarts']}, "
                f"active fault {active}")
            next_line = now + interval_s
        time.sleep(0.5)


def verify(run: RunDir) -> int:
    """Check a stored run; write ``results.json`` and ``metrics.json``; return the exit code."""
    from verifier.pychecker import check_run
    from workloads.history import pair_operations, read_lines
    from workloads.metrics import compute_metrics

    run.set_status("verify")
    ops = None
    if (run.path / "history.jsonl").exists():
        ops = pair_operations(list(read_lines(run.path / "history.jsonl")))  # read once, for both
        run.write_json("metrics.json", compute_metrics(ops))
    results = check_run(run.path, ops).to_json()
    final = run.read_json("final.json") if (run.path / "final.json").exists() else {}
    if final and not final.get("drained", True):
        results["errors"].append("the drain timed out: not every input was processed before the final reads")
        if results["verdict"] == "valid":
            results["verdict"] = "unknown"
    heal = final.get("heal") or {}
    if heal and not heal.get("healthy", True):
        results["errors"].append(f"the cluster was not healthy after the final heal: {heal.get('error')}")
        if results["verdict"] == "valid":
            results["verdict"] = "unknown"
    run.write_json("results.json", results)
    code = VERDICT_EXIT[results["verdict"]]
    run.set_status("done", complete=True, verdict=results["verdict"], exit_code=code)
    facts = results.get("facts", {})
    say(f"verdict: {results['verdict'].upper()}"
        + (f" ({', '.join(results['anomaly_types'])})" if results["anomaly_types"] else "")
        + f"; inputs {facts.get('inputs_committed')}, committed outputs {facts.get('outputs_committed')}, "
          f"transactions {facts.get('transactions')}")
    for name, reason in results.get("not_checked", {}).items():
        say(f"not checked yet: {name} ({reason})")
    return code
