"""TLS on a cluster kchaos did not start: the compose-style lab (tests/compose_lab.py) with an SSL
client listener and certificates of a test CA made by the test. The campaign names only what a
user would (``security.protocol = SSL``, the CA); kchaos' front terminates the clients' TLS with a
certificate of its own and opens TLS to the brokers, so message faults and client toxics work as
on a plaintext cluster, and Kafka's tools and the Spark ingest get the same settings in Java's
dialect. Twice: TLS alone, and TLS with SASL PLAIN whose password is only in the environment (the
run directory must not hold it anywhere), with Java workers beside librdkafka's. Long tier: about 15 s per lab, 2 minutes per run."""

from __future__ import annotations

import json
import os
import secrets

import pytest

from kchaos.runtime.heal_journal import JOURNAL_NAME, HealJournal
from kchaos.runtime.processes import processes_with_marker
from tests.compose_lab import running_compose_lab
from tests.integration.test_external import KAFKA, campaign, kchaos, only_run

pytestmark = [pytest.mark.cluster, pytest.mark.external, pytest.mark.long]


PASSWORD_ENV = "KCHAOS_LAB_KAFKA_PASSWORD"


@pytest.fixture(scope="module", params=["SSL", "SASL_SSL"])
def tls_lab(request, tmp_path_factory):
    """SSL: TLS only. SASL_SSL: TLS and SASL PLAIN, the password in the environment only (a fresh
    one per lab), named in the campaign as ${ENV:...}."""
    sasl = request.param == "SASL_SSL"
    if sasl:
        os.environ[PASSWORD_ENV] = secrets.token_urlsafe(16)
    try:
        with running_compose_lab(tmp_path_factory.mktemp("lab-tls"), KAFKA, tls=True,
                                 sasl_password_env=PASSWORD_ENV if sasl else None) as started:
            yield started
    finally:
        os.environ.pop(PASSWORD_ENV, None)


def test_the_default_campaign_through_the_tls_front_is_valid_with_message_faults(tls_lab, tmp_path):
    # the client port speaks TLS only: a plaintext client gets no answer
    from confluent_kafka.admin import AdminClient

    plain = AdminClient({"bootstrap.servers": tls_lab.bootstrap_servers, "log_level": 0, "socket.timeout.ms": 3000})
    with pytest.raises(Exception):
        plain.describe_cluster(request_timeout=4).result()
    faults = [{"kind": "kill", "target": "txn-coordinator"}, {"kind": "partition", "target": "isolate-leader-output"},
              {"kind": "message-delay", "target": "txn-coordinator", "params": {"apis": ["EndTxn"], "count": 2,
                                                                                "delay_ms": 1500}},
              {"kind": "latency", "target": "all-clients", "params": {"latency_ms": 150, "jitter_ms": 50}},
              {"kind": "pause", "target": "group-coordinator"}]
    # with SASL, Java workers beside librdkafka's: the same settings in Java's dialect, the password
    # a reference Kafka's EnvVarConfigProvider resolves in each worker's JVM
    client = "mixed" if tls_lab.sasl_password_env else "confluent"
    path = campaign(tmp_path / "c.toml", tls_lab, faults, duration_s=50, client=client)
    proc = kchaos("run", str(path), "--out", str(tmp_path / "runs"), "--seed", "4", timeout=900)
    run = only_run(tmp_path / "runs")
    results = json.loads((run / "results.json").read_text())
    assert proc.returncode == 0, (results["verdict"], results.get("errors"), results.get("anomalies"), proc.stderr[-3000:])
    assert results["verdict"] == "valid" and not results.get("required_not_checked")
    coverage = results["run"]["faults"]
    assert coverage["short"] == {} and set(coverage["executed"]) == {"kill", "partition", "message-delay", "latency",
                                                                     "pause"}, coverage
    # the front spoke TLS both ways: it rewrote the brokers' addresses (so it read the answers) and
    # held EndTxn requests; the clients trusted kchaos' own front CA, recorded in the run
    front = json.loads((run / "cluster" / "messages" / "front.json").read_text())
    assert front["rewritten"].get("Metadata", 0) > 0, front
    assert '"kind": "delay"' in (run / "cluster" / "messages" / "events.jsonl").read_text()
    assert (run / "cluster" / "messages" / "front-ca.pem").read_text().startswith("-----BEGIN CERTIFICATE-----")
    recorded = json.loads((run / "cluster" / "client-security.json").read_text())
    assert recorded["security.protocol"] == tls_lab.client_settings()["security.protocol"]
    assert recorded["ssl.ca.location"] != str(tls_lab.tls.ca)  # the front's CA, not the brokers
    # the Spark job read the topics through the front with the same settings (Java's dialect)
    ingest = json.loads((run / "topics-spark" / "ingest.json").read_text())
    assert sum(t["records"] for t in ingest["topics"].values()) > 0, ingest
    # healed, nothing left: no rule, no paused container; the front's key went with the run
    assert all(e.healed for e in HealJournal(run / "cluster" / JOURNAL_NAME).entries())
    assert all(tls_lab.kchaos_rules(n) == [] for n in tls_lab.nodes)
    assert all(tls_lab.process_state(n) not in ("", "T") for n in tls_lab.nodes)
    assert not list(run.rglob("*.key")), "a private key was left in the run directory"
    # the run's dead man's switch (its reaper) sees the harness gone within a poll, then ends too
    tls_lab.wait(lambda: processes_with_marker(str(run)) == [], 30, "the run's processes (front, Toxiproxy, reaper) gone")
    if tls_lab.sasl_password_env:  # SASL passed through the front; its password is nowhere in the run
        assert recorded["sasl.password"] == f"${{ENV:{PASSWORD_ENV}}}"
        password = os.environ[PASSWORD_ENV].encode()
        leaked = [str(p) for p in run.rglob("*") if p.is_file() and password in p.read_bytes()]
        assert leaked == [], f"the SASL password is written in {leaked}"
        assert any("kafka-clients" in c for c in results["run"]["clients"]), results["run"]["clients"]
