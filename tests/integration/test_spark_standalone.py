"""The verifier on a real Spark standalone cluster (master + worker from pyspark's own jars),
checking a run recorded on real brokers: same verdict as the single-process checker, the work
done by an executor the worker launched, and nothing left running afterwards."""

from __future__ import annotations

import json

import pytest

from kchaos.clusters.processes import processes_with_marker
from kchaos.harness.run import verify
from kchaos.verifier.standalone import StandaloneSpark

from .test_workload import Harness, _spec


@pytest.mark.long  # a standalone master and worker plus a run (about 2 minutes)
def test_verifier_runs_on_a_standalone_spark_master(cluster3, tmp_path):
    h = Harness(cluster3, tmp_path / "run", _spec(records=600, rate=2000))
    assert h.finish()["verdict"] == "valid"
    spark_dir = tmp_path / "spark"
    with StandaloneSpark(spark_dir, worker_cores=1, worker_memory="1g") as standalone:
        code = verify(h.run, bootstrap=cluster3.bootstrap_servers,
                      verifier_overrides={"engine": "spark", "spark_master": standalone.master_url})
        results = json.loads((h.run.path / "results.json").read_text())
        assert code == 0 and results["verdict"] == "valid", results["errors"]
        assert results["spark"]["master"] == standalone.master_url
        assert results["facts"]["topic_source"] == "spark-kafka-source" and results["cross_check"]["agrees"]
        assert results["facts"]["outputs_committed"] == 1200
        # the checks ran in an executor the worker launched, not in the driver
        executors = list((spark_dir / "work").glob("app-*/*/stderr"))
        assert executors, "no executor was launched by the standalone worker"
        assert any("Successfully registered with driver" in e.read_text(errors="replace") for e in executors)
    assert processes_with_marker(str(spark_dir)) == []
