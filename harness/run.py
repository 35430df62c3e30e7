"""``kchaos run``: one campaign, one run directory, one exit code."""

from __future__ import annotations

import random
import sys
from pathlib import Path

from clusters import create_cluster
from harness.campaign import Campaign
from harness.rundir import RunDir
from harness.smoke import run_smoke

EXIT_VALID, EXIT_INVALID, EXIT_UNKNOWN, EXIT_HARNESS_ERROR = 0, 1, 2, 3


def say(message: str) -> None:
    print(f"[kchaos] {message}", file=sys.stderr, flush=True)


def execute_run(campaign: Campaign, out_root: Path, seed: int | None = None) -> tuple[RunDir, int]:
    """Run a campaign. Until the workload and verifier land, a run is a cluster smoke test."""
    seed = seed if seed is not None else campaign.run.seed
    if seed is None:
        seed = random.SystemRandom().randrange(2**31)
    run = RunDir.create(out_root, campaign.name, seed)
    (run.path / "seed").write_text(f"{seed}\n")
    run.write_json("campaign.json", campaign.model_dump(mode="json"))
    run.set_status("setup")
    say(f"run directory {run.path}")
    cluster = create_cluster(campaign.cluster, run.cluster_dir)
    try:
        say(f"starting {campaign.cluster.nodes}-node Kafka {campaign.cluster.kafka_version} cluster ({campaign.cluster.backend})")
        cluster.start()
        say(f"cluster ready at {cluster.bootstrap_servers}")
        run.write_json("cluster.json", cluster.info())
        run.set_status("smoke")
        result = run_smoke(cluster, records=campaign.run.smoke_records)
        run.write_json("smoke.json", result.to_json())
    finally:
        say("stopping the cluster")
        cluster.stop()
    code = EXIT_VALID if result.ok else EXIT_HARNESS_ERROR
    run.set_status("done", complete=True, exit_code=code,
                   note="smoke test only: no exactly-once verdict until the workload and verifier exist")
    say(f"smoke test {'passed' if result.ok else 'FAILED'}: {result.consumed}/{result.produced} records read back "
        f"with read_committed in {result.committed_transactions} transactions ({result.seconds}s)")
    return run, code
