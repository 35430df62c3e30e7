"""The verifier on a real Spark standalone cluster (a master and two workers from pyspark's own
jars), as on machines other than the driver's: the workers and their executors cannot read the
run directory, nor the verifier's installed source; the topics, internal ones included, reach them
only through Spark's Kafka source and a shared data directory. The verdict and every check must
be those of ``local[2]`` on the same run, with the client dumps out of reach."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import kchaos.verifier
from kchaos.runtime.processes import processes_with_marker
from kchaos.verifier.results import Results
from kchaos.verifier.standalone import StandaloneSpark, can_hide_paths
from kchaos.verifier.verify import SparkJob, disagreements

from .test_workload import Harness, _spec


@pytest.mark.long  # a run, local[2], then a master and two workers (about 3 minutes)
def test_verifier_on_two_workers_that_cannot_read_the_run_directory(cluster3, tmp_path):
    if not can_hide_paths():
        pytest.skip("no mount namespace here: the workers could read the run directory")
    h = Harness(cluster3, tmp_path / "run", _spec(records=600, rate=2000), engine="spark")
    local = h.finish()  # local[2], reading through the Kafka source, cross-checked by the Python reader
    assert local["verdict"] == "valid" and local["cross_check"]["agrees"], local["errors"]
    run = h.run.path
    (run / "topics").rename(tmp_path / "client-dumps")  # the Spark path must not need them
    shared = tmp_path / "shared"
    spark_dir = tmp_path / "spark"
    hidden = [run, Path(kchaos.verifier.__file__).parent]  # the run, and the verifier's source
    with StandaloneSpark(spark_dir, worker_cores=1, worker_memory="1g", workers=2, hidden=hidden) as standalone:
        remote = SparkJob(run, standalone.master_url, cluster3.bootstrap_servers,
                          data_dir=f"file://{shared}").start().results(600)
        executors = {i: list(standalone.work_dir(i).glob("app-*/*/stderr")) for i in range(2)}
    assert not remote.errors, remote.errors
    assert remote.spark["master"] == standalone.master_url
    # the same verdict, checks and case counts as local[2]
    assert remote.verdict == "valid" and disagreements(remote, Results.from_json(local)) == []
    for fact in ("inputs_committed", "outputs_committed", "outputs_raw", "transaction_log_records",
                 "client_transaction_versions", "final_group_offsets"):
        assert remote.facts[fact] == local["facts"][fact], fact
    assert remote.facts["outputs_committed"] == 1200 and remote.facts["transaction_log_records"] > 0
    # the topics went through the shared directory, the internal ones too
    ingest = json.loads((run / "topics-spark" / "ingest.json").read_text())
    assert ingest["data_dir"] == f"file://{shared}/{run.name}"
    assert ingest["topics"]["__transaction_state.raw"]["records"] > 0
    assert list((shared / run.name / "raw").glob("topic=__transaction_state/*.parquet"))
    # both workers launched an executor, which ran tasks for the driver
    for i, logs in executors.items():
        assert logs, f"worker {i} launched no executor"
        assert any("Successfully registered with driver" in log.read_text(errors="replace") for log in logs)
    assert processes_with_marker(str(spark_dir)) == []
