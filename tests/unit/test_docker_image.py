"""kchaos' Kafka image's entry point (clusters/docker/image.py), run by bash on hand-made
environments with a stand-in `java` that records its calls: the contract the Docker backend
relies on (KAFKA_* -> server.properties as apache/kafka maps it, format once with the requested
features, then the broker), without an engine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from kchaos.clusters.docker.cluster import env_name
from kchaos.clusters.docker.image import ENTRYPOINT, recipe_digest

FAKE_JAVA = """#!/bin/bash
echo "$*" >> "$CALLS"
case "$*" in *StorageTool*) touch "$DATA/meta.properties" ;; esac
"""


def run_entrypoint(tmp_path: Path, env: dict[str, str]) -> list[str]:
    home, data, bin_dir = tmp_path / "kafka", tmp_path / "data", tmp_path / "bin"
    for d in (home / "config", data, bin_dir):
        d.mkdir(parents=True, exist_ok=True)
    (bin_dir / "java").write_text(FAKE_JAVA)
    (bin_dir / "java").chmod(0o755)
    (tmp_path / "run").write_text(ENTRYPOINT)
    calls = tmp_path / "calls"
    full = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "KCHAOS_KAFKA_HOME": str(home), "KAFKA_LOG_DIRS": str(data),
            "CALLS": str(calls), "DATA": str(data), **env}
    subprocess.run(["bash", str(tmp_path / "run")], env=full, check=True, capture_output=True, text=True)
    return calls.read_text().splitlines()


def test_environment_becomes_properties_as_the_official_image_maps_it(tmp_path):
    props = {"node.id": "2", "transaction.state.log.min.isr": "2", "some_prop.with-dash": "x"}
    env = {env_name(k): v for k, v in props.items()}
    assert env == {"KAFKA_NODE_ID": "2", "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "2", "KAFKA_SOME__PROP_WITH___DASH": "x"}
    run_entrypoint(tmp_path, {**env, "CLUSTER_ID": "AAAAAAAAAAAAAAAAAAAAAA", "KAFKA_HEAP_OPTS": "-Xmx64m"})
    lines = (tmp_path / "kafka" / "config" / "server.properties").read_text().splitlines()
    assert {line.split("=", 1)[0]: line.split("=", 1)[1] for line in lines} == {
        "log.dirs": str(tmp_path / "data"), **props}  # KAFKA_HEAP_OPTS is the JVM's, not a property


def test_first_start_formats_with_the_features_then_runs_the_broker_and_a_restart_does_not_format(tmp_path):
    env = {"CLUSTER_ID": "AAAAAAAAAAAAAAAAAAAAAA", "KCHAOS_FORMAT_FEATURES": "share.version=1 transaction.version=1",
           "KCHAOS_CONTAINER": "kc-n1", "KAFKA_HEAP_OPTS": "-Xmx64m"}
    first = run_entrypoint(tmp_path, env)
    assert len(first) == 2
    assert "kafka.tools.StorageTool format -t AAAAAAAAAAAAAAAAAAAAAA" in first[0]
    assert first[0].endswith("--feature share.version=1 --feature transaction.version=1")
    assert first[1].startswith("-Xmx64m -Dkchaos.container=kc-n1") and first[1].endswith("kafka.Kafka "
                                                                                         f"{tmp_path}/kafka/config/server.properties")
    again = run_entrypoint(tmp_path, env)[len(first):]
    assert len(again) == 1 and "kafka.Kafka" in again[0]  # meta.properties exists: no second format


def test_no_cluster_id_is_refused_before_anything_runs(tmp_path):
    try:
        run_entrypoint(tmp_path, {})
    except subprocess.CalledProcessError as exc:
        assert "CLUSTER_ID is required" in exc.stderr
    else:
        raise AssertionError("the entry point started without CLUSTER_ID")
    assert not (tmp_path / "calls").exists()


def test_the_image_is_rebuilt_when_its_recipe_changes():
    jars = ["kafka_2.13-4.2.1.jar", "kafka-clients-4.2.1.jar"]
    assert recipe_digest("4.2.1", jars) == recipe_digest("4.2.1", list(reversed(jars)))
    assert recipe_digest("4.2.1", jars) != recipe_digest("4.2.1", jars[:1])
    assert recipe_digest("4.2.1", jars) != recipe_digest("4.1.1", jars)
