"""What a user reads about a run names what ran (issue 61, item 5): the replay command names the
campaign by every path a run gets one (a file, a shipped name, none, `kchaos replay`, `kchaos
findings verify`, the nightly), and the client and workload lines name Kafka Streams, a user's app
or kchaos' own workers. No cluster: the paths are followed up to the run they would start."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kchaos.ci import nightly
from kchaos.cli import main as cli
from kchaos.harness import findings, run as harness_run
from kchaos.harness.campaign import CAMPAIGNS_DIR, load_campaign
from kchaos.harness.run import environment, replay_command
from kchaos.reports.run_report import render_run_report
from kchaos.reports.what_ran import app_name, workers_client, workload_line
from kchaos.rundir import RunDir
from kchaos.verifier.campaign import load_recorded
from kchaos.verifier.verdict import run_block

from .test_reports import ReportRun, _finish

ROOT = Path(__file__).resolve().parents[2]
F10 = ROOT / "docs" / "evidence" / "streams-lost-assignment-4.4.0"
CONFLUENT = "confluent-kafka 2.16.1 (librdkafka 2.16.1)"


def _run_dir(tmp_path: Path) -> RunDir:
    path = tmp_path / "20261201T000000Z-x-seed1"
    path.mkdir()
    return RunDir(path)


@pytest.fixture
def started(monkeypatch):
    """Every execute_run a command would make, recorded instead of run: its campaign and the
    replay command its run directory would get."""
    calls: list[dict] = []

    def execute(campaign, out_root, seed=None, campaign_path=None, schedule=None, replay_of=None, overrides=None):
        seed = seed if seed is not None else campaign.run.seed
        calls.append({"campaign": campaign.name, "command": replay_command(
            RunDir(Path("/runs/RUN")), campaign.name, campaign_path, seed, overrides)})
        raise SystemExit(0)  # nothing starts

    monkeypatch.setattr(harness_run, "execute_run", execute)
    monkeypatch.setattr(findings, "execute_run", execute)
    monkeypatch.setattr("kchaos.harness.runs.execute_run", execute)
    monkeypatch.setattr(nightly, "execute_run", execute)
    return calls


def _cli(*argv: str) -> None:
    args = cli.build_parser().parse_args(list(argv))
    try:
        args.func(args)
    except SystemExit:
        pass


def test_a_shipped_campaign_by_name_is_replayed_by_its_name(started, tmp_path):
    _cli("run", "hunt-streams-lost-assignment", "--seed", "1", "--out", str(tmp_path))
    assert started[-1]["command"].startswith("kchaos run hunt-streams-lost-assignment --seed 1 ")


def test_no_campaign_is_the_default_and_a_users_file_is_named_by_its_absolute_path(started, tmp_path, monkeypatch):
    _cli("run", "--seed", "2", "--out", str(tmp_path))
    assert started[-1]["command"].startswith("kchaos run default --seed 2 ")
    mine = tmp_path / "mine.toml"
    mine.write_text((CAMPAIGNS_DIR / "byo-copier.toml").read_text().replace('name = "byo-copier"', 'name = "mine"'))
    monkeypatch.chdir(tmp_path)
    _cli("run", "mine.toml", "--seed", "3", "--set", "workload.records=100", "--out", str(tmp_path))
    assert started[-1]["command"].startswith(f"kchaos run {mine} --seed 3 --set workload.records=100 ")


def test_a_replay_names_the_campaign_that_ran_not_the_default(started, tmp_path):
    """`kchaos replay` and `kchaos findings verify` run a recorded campaign, with no file behind
    it: before issue 61 their reports said `kchaos run campaigns/default.toml --seed 1`."""
    _cli("replay", str(F10), "--out", str(tmp_path))
    for replay in ([], ["F10"]):
        if replay:
            _cli("findings", "verify", *replay, "--out", str(tmp_path))
        command = started[-1]["command"]
        assert started[-1]["campaign"] == "hunt-streams-lost-assignment"
        assert command.startswith("kchaos replay /runs/RUN  # campaign hunt-streams-lost-assignment, seed 1")
        assert "default" not in command


def test_the_nightly_names_each_entrys_campaign(started, tmp_path):
    matrix = tmp_path / "nightly.toml"
    matrix.write_text(f'[[entry]]\ncampaign = "{CAMPAIGNS_DIR / "hunt-streams-lost-assignment.toml"}"\nseeds = [4]\n')
    try:
        nightly.run_nightly(matrix, tmp_path / "out")
    except SystemExit:
        pass
    assert started[-1]["command"].startswith("kchaos run hunt-streams-lost-assignment --seed 4 ")


def test_client_and_workload_lines_name_streams_the_copier_and_kchaos_workers():
    streams = load_campaign(Path("hunt-streams-lost-assignment")).workload
    assert workers_client(streams, CONFLUENT) == "Kafka Streams 4.2.1 (kafka-streams, its kafka-clients)"
    assert "3 Kafka Streams instances" in workload_line(streams) and "exactly_once_v2" in workload_line(streams)
    copier = load_campaign(Path("byo-copier")).workload
    assert app_name(copier.external_command) == "byo-copier"
    assert workers_client(copier, CONFLUENT).startswith("the user's app byo-copier (external_command")
    assert "3 instances of the user's app byo-copier" in workload_line(copier)
    assert workers_client(load_campaign(None).workload, CONFLUENT) == CONFLUENT
    assert app_name(["/opt/app/bin/my-pipeline", "--fast"]) == "my-pipeline"


def test_results_name_the_users_app_as_the_client(tmp_path):
    """results.json's run.clients reads environment.json's client for a confluent-slot workload;
    a user's app runs in that slot, so the environment names the app there."""
    run = _run_dir(tmp_path)
    campaign = load_campaign(Path("byo-copier"))
    run.write_json("environment.json", environment(campaign))
    assert run_block(run, campaign, [], 0, "python")["clients"][0].startswith("the user's app byo-copier")
    env = environment(load_campaign(Path("hunt-streams-lost-assignment")))
    assert env["workers"].startswith("Kafka Streams") and env["confluent_kafka"].startswith("confluent-kafka")


def test_the_report_of_a_streams_run_names_streams_and_its_replay(tmp_path):
    """The F10 replay's page said "confluent-kafka 2.16.1 ... Java kafka-clients 4.4.0" for a run
    whose workers were Kafka Streams instances."""
    run = _finish(ReportRun().write(tmp_path / "20261122T010000Z-hunt-streams-lost-assignment-seed1"))
    recorded = json.loads((F10 / "campaign.json").read_text())
    campaign = json.loads((run / "campaign.json").read_text())
    campaign["workload"] = {**campaign["workload"], **{k: recorded["workload"][k] for k in (
        "client", "java_client_version", "group_protocol", "workers", "streams_threads")}}
    (run / "campaign.json").write_text(json.dumps(campaign))
    load_recorded(run)
    (run / "environment.json").write_text(json.dumps({"client": "confluent-kafka 2.16.1 (librdkafka 2.16.1)"}))
    (run / "replay.json").write_text(json.dumps({"command": replay_command(
        RunDir(run), "hunt-streams-lost-assignment", None, 1), "replay_of": str(F10)}))
    html = render_run_report(run).read_text()
    client = html[html.index("<th>Client</th>"):html.index("<th>Workload</th>")]
    assert "Kafka Streams 4.4.0" in client and "Java kafka-clients" not in client
    assert "seeder writes the input with confluent-kafka 2.16.1" in client
    assert "Kafka Streams instances" in html and "default.toml" not in html
    assert f"kchaos replay {run}  # campaign hunt-streams-lost-assignment, seed 1" in html
