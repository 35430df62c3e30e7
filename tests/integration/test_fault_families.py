"""Every fault family on one schedule (campaigns/nemesis-all.toml, Jepsen's `--nemesis all`),
end to end through the CLI: each family executed and healed, the clock faults proved on the
broker, the full disk stopped its broker and heal brought it back, and the Java client on TV2
stays VALID (the split-transaction check setting aside what the moved clocks cannot place)."""

from __future__ import annotations

import json

import pytest

from .test_cli import kchaos

FAMILIES = {"node": {"kill", "terminate"}, "network": {"partition", "latency"}, "clients": {"zombie", "worker-crash"},
            "messages": {"message-hold", "message-duplicate"}, "clock": {"clock-bump", "clock-strobe"},
            "disk": {"disk-full"}}


@pytest.mark.long  # one 100 s campaign with every family (about 5 minutes); each kind has its own quick test
def test_nemesis_all_executes_every_family_and_stays_valid(tmp_path):
    done = kchaos("run", "nemesis-all", "--seed", "1", "--out", str(tmp_path), timeout=1200)
    run = next(tmp_path.iterdir())
    results = json.loads((run / "results.json").read_text())
    assert done.returncode == 0 and results["verdict"] == "valid", (results.get("anomaly_types"), done.stderr[-3000:])
    executed = results["facts"]["fault_coverage"]["executed"]
    assert {family for family, kinds in FAMILIES.items() if kinds & set(executed)} == set(FAMILIES), executed
    history = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    faults = {r["f"][6:]: r["value"] for r in history if r["f"].startswith("fault:") and r["type"] == "ok"}
    assert faults["clock-bump"]["resolved"]["detail"]["measured_offset_ms"]["applied"]
    assert faults["clock-bump"]["heal"]["measured_offset_ms"]["applied"]
    disk = faults["disk-full"]["heal"]
    assert disk["stopped"] and any("No space left on device" in line for lines in disk["broker_said"].values()
                                   for line in lines)
    split = results["checks"]["split-transaction"]
    assert split["verdict"] == "valid" and "clock faults had moved a broker's clock" in split["note"]
