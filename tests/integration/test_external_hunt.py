"""The hunt on someone else's cluster: ``hunt-kip890`` (KAFKA-17754, transaction.version 1) against
each lab (tests/external_lab.py: brokers in network namespaces over ssh; tests/compose_lab.py:
containers through the docker preset), through the address-rewriting front, finds what it finds on
a cluster kchaos starts. Its own module: the labs here are formatted with transaction.version=1.
About 15 s (ssh) or a minute (docker) for the lab and 5-7 minutes for the hunt, each."""

from __future__ import annotations

import json
import tomllib

import pytest

from tests.compose_lab import running_compose_lab
from tests.external_lab import running_lab
from tests.integration.test_external import KAFKA, REPO, kchaos, only_run, toml_value

pytestmark = [pytest.mark.cluster, pytest.mark.external, pytest.mark.long]


@pytest.fixture(scope="module", params=["ssh", "docker"])
def tv1_lab(request, tmp_path_factory):
    labs = {"ssh": running_lab, "docker": running_compose_lab}
    with labs[request.param](tmp_path_factory.mktemp(f"lab-tv1-{request.param}"), KAFKA,
                             features={"transaction.version": 1}) as started:
        yield started


def as_toml(table: dict, prefix: str = "") -> list[str]:
    """A campaign dict back to TOML (tables, arrays of tables, inline tables for their params)."""
    lines, nested = [], []
    for key, value in table.items():
        if isinstance(value, dict) and key not in ("params",):
            nested.append((key, value))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                nested.append((f"[{key}]", item))
        else:
            lines.append(f"{json.dumps(key)} = {toml_value(value)}")
    out = lines
    for key, value in nested:
        if key.startswith("["):
            name = f"{prefix}{key[1:-1]}"
            out += [f"[[{name}]]", *as_toml(value, name + ".")]
        else:
            out += [f"[{prefix}{key}]", *as_toml(value, f"{prefix}{key}.")]
    return out


def test_hunt_kip890_on_a_cluster_kchaos_did_not_start_is_invalid(tv1_lab, tmp_path):
    hunt = tomllib.loads((REPO / "campaigns" / "hunt-kip890.toml").read_text())
    ext = tv1_lab.external()
    hunt["cluster"] = {"backend": "external", "kafka_version": KAFKA, "external": ext}
    path = tmp_path / "hunt.toml"
    path.write_text("\n".join(as_toml(hunt)) + "\n")
    proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "1", timeout=1200)
    run = only_run(tmp_path / "runs")
    assert (run / "results.json").exists(), proc.stderr[-3000:]
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 1, (results["verdict"], proc.stderr[-3000:])
    named = set(results["anomaly_types"])
    # KAFKA-17754's signatures on a kchaos cluster (docs/findings.md F1): a lost or aborted-read
    # write, or a transaction the coordinator split
    assert named & {"aborted-read", "lost-write", "torn-transaction", "split-transaction", "zombie-write"}, named
    # and says whose they are: the classic protocol's, with the late EndTxn the proxy saw
    assert results["attribution"]["labels"].get("kafka-17754"), results["attribution"]["summary"]
    front = json.loads((run / "cluster" / "messages" / "front.json").read_text())
    assert front["rewritten"].get("Metadata", 0) > 0
