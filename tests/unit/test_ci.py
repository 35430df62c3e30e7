"""CI pieces without a cluster: JUnit XML validates against the schema, exit codes, matrices."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xmlschema

from kchaos.ci.nightly import load_matrix
from kchaos.harness.runs import exit_code
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.verifier.outcome import Outcome
from kchaos.errors import ConfigError

SCHEMA = Path(__file__).resolve().parents[2] / "ci" / "junit.xsd"
CASE = {"explanation": "input 0@2 slot 0 is visible 2 times in committed outputs"}


def _run(name, expected, verdict, seconds, run_dir=None, replay=None, **outcome):
    if verdict == "harness-error":
        return JudgedRun(name, name.split()[0], expected, seconds, None, outcome.get("errors", []))
    return JudgedRun(name, name.split()[0], expected, seconds,
                     Outcome(run_dir, verdict, replay=replay, **{k: tuple(v) if k == "errors" else v
                                                                 for k, v in outcome.items()}))


def _outcomes():
    return [_run("default seed=1", "valid", "valid", 12.5, "/r/1", "kchaos run x --seed 1"),
            _run("default seed=2", "valid", "invalid", 13.0, "/r/2", "kchaos run x --seed 2",
                 anomalies={"duplicate": [CASE, CASE]}),
            _run("default seed=3", "valid", "unknown", 9.0, "/r/3", errors=["the drain timed out"]),
            _run("control seed=1", "invalid", "invalid", 8.0, "/r/4", anomalies={"aborted-read": [CASE]}),
            _run("control seed=2", "invalid", "valid", 8.0, "/r/5"),
            _run("default seed=4", "valid", "harness-error", 1.0, errors=["port taken"])]


def test_junit_xml_validates_and_carries_the_anomaly_summary(tmp_path):
    path = write_junit(_outcomes(), tmp_path / "junit.xml", "kchaos.nightly")
    schema = xmlschema.XMLSchema(str(SCHEMA))
    schema.validate(str(path))
    data = schema.to_dict(str(path))
    suite = data["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (6, 2, 2)
    cases = {c["@name"]: c for c in suite["testcase"]}
    assert "duplicate (2 cases)" in cases["default seed=2"]["failure"]["@message"]
    assert "visible 2 times" in cases["default seed=2"]["failure"]["$"]
    assert "not caught" in cases["control seed=2"]["failure"]["@message"]
    assert cases["default seed=3"]["error"]["@type"] == "unknown"
    assert "failure" not in cases["control seed=1"] and "error" not in cases["default seed=1"]


def test_a_schema_violation_is_detected(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<testsuites tests="x" failures="0" errors="0"/>')
    with pytest.raises(xmlschema.XMLSchemaValidationError):
        xmlschema.XMLSchema(str(SCHEMA)).validate(str(bad))


@pytest.mark.parametrize("verdicts, code", [
    (["valid"], 0), (["valid", "unknown"], 2), (["harness-error", "unknown"], 3),
    (["harness-error", "invalid"], 1), (["valid", "uncaught-control"], 1),
])
def test_exit_code_ranks_correctness_findings_first(verdicts, code):
    outcomes = []
    for v in verdicts:
        if v == "uncaught-control":
            outcomes.append(_run("c", "invalid", "valid", 1.0))
        else:
            outcomes.append(_run("r", "valid", v, 1.0))
    assert exit_code(outcomes) == code


@pytest.mark.parametrize("verdict, certification, code", [
    ("valid", None, 0), ("invalid", None, 1), ("unknown", None, 2),
    ("valid", "pass", 0), ("valid", "unknown", 2), ("valid", "fail", 1), ("invalid", "fail", 1)])
def test_a_certifications_exit_code_is_its_own_whoever_reads_it(tmp_path, verdict, certification, code):
    """One outcome from the run directory (load_outcome) for run, replay, analyze, --count, JUnit and
    the index: a certification whose checker verdict is valid but whose overall is unknown exits 2,
    and is an unexpected unknown in a matrix."""
    from kchaos.verifier.outcome import load_outcome

    (tmp_path / "results.json").write_text(json.dumps({"verdict": verdict, "anomalies": {}, "errors": []}))
    if certification:
        (tmp_path / "certification.json").write_text(json.dumps({"overall": certification}))
    outcome = load_outcome(tmp_path)
    assert outcome.exit_code == code and outcome.verdict == verdict
    assert exit_code([JudgedRun("r", "r", "valid", 1.0, outcome)]) == code


def test_a_run_directory_without_results_has_no_outcome(tmp_path):
    from kchaos.verifier.outcome import load_outcome

    with pytest.raises(ConfigError, match="holds no verdict"):
        load_outcome(tmp_path)


def test_shipped_nightly_matrix_loads_and_validates_every_campaign():
    matrix, entries = load_matrix(Path(__file__).resolve().parents[2] / "campaigns" / "nightly.toml")
    assert matrix.name == "nightly" and any(e.expect == "invalid" for e, *_ in entries)
    from kchaos.workloads.native_clients import CLIENTS
    assert set(CLIENTS) <= {c.workload.client for *_, c in entries}  # every client worker, every night


def test_release_matrix_expands_each_entry_per_release_and_transaction_version():
    """The shipped release matrix: 5 releases x TV1 (expected to break) and TV2, each variant's
    campaign loaded with the brokers and the Java clients at that release."""
    matrix, entries = load_matrix(Path(__file__).resolve().parents[2] / "campaigns" / "matrix-kip890.toml")
    seen = {(c.cluster.kafka_version, c.workload.java_client_version, c.cluster.transaction_version, e.expect)
            for e, _, _, _, c in entries}
    releases = ["4.0.0", "4.1.1", "4.2.2", "4.3.1", "4.4.0"]
    assert seen == {(r, r, 1, "invalid") for r in releases} | {(r, r, 2, "valid") for r in releases}
    assert len({label for _, label, *_ in entries}) == 10  # every variant named apart


def test_client_matrix_runs_every_client_on_two_releases_with_its_controls():
    """The shipped client matrix (issue 63): the default campaign on 10 seeds per client and
    release, the Java control, and every client's at-least-once negative control expected caught."""
    matrix, entries = load_matrix(Path(__file__).resolve().parents[2] / "campaigns" / "matrix-clients.toml")
    clients = {"franz-go", "sarama", "aiokafka", "kafka-python", "kafkajs"}
    default = {(c.workload.client, c.cluster.kafka_version) for e, _, _, _, c in entries
               if c.name == "default" and len(e.seeds) == 10}
    assert default == {(client, release) for client in clients for release in ("4.2.1", "4.4.0")}
    assert {c.workload.client for e, _, _, _, c in entries if c.name == "default" and e.expect == "valid"} >= {"java"}
    controls = {c.workload.client for e, _, _, _, c in entries if e.expect == "invalid"}
    assert controls == clients and all(c.workload.delivery == "at-least-once"
                                       for e, _, _, _, c in entries if e.expect == "invalid")
    assert len({label for _, label, *_ in entries}) == len(entries)


def test_release_table_reads_what_each_run_recorded(tmp_path):
    """Rows come from the runs' own records: a run without results keeps its matrix verdict and
    '-' for what it could not show, never a zero."""
    import json

    from kchaos.ci.release_table import release_row, render_markdown

    ran, broken = tmp_path / "20261125T190000Z-hunt-seed13", tmp_path / "20261125T191000Z-hunt-seed13"
    for run, tv in ((ran, 1), (broken, 2)):
        run.mkdir()
        (run / "campaign.json").write_text(json.dumps({
            "cluster": {"kafka_version": "4.0.0", "transaction_version": tv},
            "workload": {"client": "java", "java_client_version": "4.0.0"}}))
    (ran / "results.json").write_text(json.dumps({
        "verdict": "invalid", "run": {"seed": 13}, "anomalies": {"lost-write": [CASE, CASE], "duplicate": [CASE]},
        "facts": {"transactions": {"committed": 1334, "aborted": 1300},
                  "late_requests": {"accepted": 7, "ended_a_transaction": 4, "ended_against_the_client": 2}}}))
    rows = [release_row(ran, "a", "invalid"), release_row(broken, "b", "harness-error")]
    assert rows[0]["anomalies"] == {"duplicate": 1, "lost-write": 2} and rows[0]["committed"] == 1334
    assert rows[1]["committed"] is None and rows[1]["late"] is None and rows[1]["transaction_version"] == 2
    table = render_markdown(rows, "t").splitlines()
    assert "| 4.0.0 | java 4.0.0 | 1 | 13 | INVALID | duplicate 1, lost-write 2 | 1334 | 7 / 4 / 2 |" in table[4]
    assert table[5].startswith("| 4.0.0 | java 4.0.0 | 2 | - | harness-error | - | - | - |")


def test_release_table_names_a_native_client_by_the_library_its_run_recorded(tmp_path):
    """A client worker's row names the library release the run's environment.json recorded (a
    later pin must not rename an old run); without that record, the client's name alone."""
    import json

    from kchaos.ci.release_table import release_row

    recorded, bare = tmp_path / "20261129T120000Z-default-seed1", tmp_path / "20261129T121000Z-default-seed1"
    for run in (recorded, bare):
        run.mkdir()
        (run / "campaign.json").write_text(json.dumps({
            "cluster": {"kafka_version": "4.4.0", "transaction_version": 2},
            "workload": {"client": "sarama", "java_client_version": "4.4.0"}}))
    (recorded / "environment.json").write_text(json.dumps(
        {"workers": "IBM/sarama 1.60.0 (kchaos' worker on that client, docs/clients.md)"}))
    assert release_row(recorded, "a", "invalid")["client"] == "IBM/sarama 1.60.0"
    assert release_row(bare, "b", "invalid")["client"] == "sarama"


@pytest.mark.parametrize("text, needle", [
    ('[[entry]]\ncampaign = "nope.toml"\nseeds = [1]\n', "does not exist"),
    ('[[entry]]\ncampaign = "{default}"\nseeds = [1]\nset = ["cluster.nodes=0"]\n', "cluster.nodes"),
    ('[[entry]]\ncampaign = "{default}"\n', "no seeds"),
    ('[[entry]]\ncampaign = "{default}"\nseeds = [1]\nexpect = "maybe"\n', "expect"),
    ('name = "x"\n', "entry"),
    ('[[entry]]\ncampaign = "{default}"\nseeds = [1]\nreleases = ["3.9.1"]\ntransaction_versions = [2]\n',
     "3.9.1 tv2"),
    ('[[entry]]\ncampaign = "{default}"\nseeds = [1]\ntransaction_versions = [3]\n', "transaction_versions"),
])
def test_bad_matrix_is_a_clear_error_before_anything_runs(tmp_path, text, needle):
    default = Path(__file__).resolve().parents[2] / "campaigns" / "default.toml"
    path = tmp_path / "m.toml"
    path.write_text(text.replace("{default}", str(default)))
    with pytest.raises(ConfigError) as err:
        load_matrix(path)
    assert needle in err.value.one_line()


def test_results_carry_the_seed_the_run_recorded(tmp_path):
    """A matrix run gets its seed from outside the campaign (run.seed unset there): results.json
    and the release table read the seed the run directory recorded."""
    from types import SimpleNamespace

    from kchaos.verifier.model import run_seed

    (tmp_path / "seed").write_text("13\n")
    assert run_seed(tmp_path, SimpleNamespace(run=SimpleNamespace(seed=None))) == 13
    assert run_seed(tmp_path / "missing", SimpleNamespace(run=SimpleNamespace(seed=7))) == 7


def test_analyze_exits_with_the_certifications_code_not_the_checkers(tmp_path):
    """A stored certification run whose checker verdict is valid but whose certification is
    unknown (no worker committed in a phase: nothing certified) exits 2 from `kchaos analyze`, and
    its outcome says both."""
    from kchaos.cli.main import main
    from kchaos.verifier.outcome import load_outcome
    from tests.unit.test_checkers import RunBuilder

    run = RunBuilder().write(tmp_path / "run")
    campaign = json.loads((run / "campaign.json").read_text())
    campaign["steps"] = [{"at_s": 10.0, "action": "feature", "feature": "transaction.version", "level": 2}]
    (run / "campaign.json").write_text(json.dumps(campaign))
    assert main(["analyze", str(run), "--engine", "python"]) == 2
    outcome = load_outcome(run)
    assert (outcome.verdict, outcome.certification, outcome.exit_code) == ("valid", "unknown", 2)
    assert json.loads((run / "results.json").read_text())["run"]["exit_code"] == 2
