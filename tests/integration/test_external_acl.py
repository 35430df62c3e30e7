"""Evidence on a cluster with limits: the compose-style lab with SASL and an authorizer whose ACLs
deny kchaos' principal everything on ``__transaction_state``, as a staging cluster's may. The run
works (the clients need no access to it), but the coordinator's own account cannot be read, so the
checks that need it are ``not_checked`` and the verdict is ``unknown``: never VALID on evidence the
run did not see. Long tier: about 15 s for the lab and 2 minutes for the run."""

from __future__ import annotations

import json
import os
import secrets

import pytest

from tests.compose_lab import running_compose_lab
from tests.integration.test_external import KAFKA, campaign, kchaos, only_run

pytestmark = [pytest.mark.cluster, pytest.mark.external, pytest.mark.long]

PASSWORD_ENV = "KCHAOS_LAB_KAFKA_PASSWORD"


@pytest.fixture(scope="module")
def acl_lab(tmp_path_factory):
    os.environ[PASSWORD_ENV] = secrets.token_urlsafe(16)
    try:
        with running_compose_lab(tmp_path_factory.mktemp("lab-acl"), KAFKA, sasl_password_env=PASSWORD_ENV,
                                 denied_topics=("__transaction_state",)) as started:
            yield started
    finally:
        os.environ.pop(PASSWORD_ENV, None)


def test_a_transaction_log_the_acls_hide_makes_the_verdict_unknown_not_valid(acl_lab, tmp_path):
    # a target found without the denied topic (the transaction coordinator is found through it:
    # with its ACL denied, such a fault cannot be aimed, and the run says so; docs/clusters.md)
    path = campaign(tmp_path / "c.toml", acl_lab, [{"kind": "kill", "target": "leader-output"}], duration_s=30)
    proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "5", timeout=900)
    run = only_run(tmp_path / "runs")
    results = json.loads((run / "results.json").read_text())
    assert results["verdict"] == "unknown", (results["verdict"], results.get("anomalies"), proc.stderr[-3000:])
    assert proc.returncode != 0 and not results.get("anomaly_types"), results.get("anomaly_types")
    denied = "__transaction_state could not be read: the cluster denies this client access to it"
    assert any(denied in e for e in results["errors"]), results["errors"]
    assert denied in results["not_checked"]["split-transaction"], results["not_checked"]
    # everything else was seen and judged: the workload ran through SASL, the fault was executed
    assert results["checks"]["lost-write"]["verdict"] == "valid" and results["checks"]["duplicate"]["verdict"] == "valid"
    assert results["run"]["faults"]["executed"].get("kill", 0) >= 1 and results["run"]["faults"]["short"] == {}
