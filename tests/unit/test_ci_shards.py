"""The nightly on shards without a cluster: the split (deterministic, balanced, every run exactly
once, the same fresh seeds on every shard), selection, bad input, the merge and its refusals on
hand-made shard folders, the certification rows in JUnit, and docs/ci.md's budget figures
against the plan."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest
import xmlschema

from kchaos.ci.merge import merge_nights
from kchaos.ci.nightly import load_matrix, resolve_night
from kchaos.ci.shards import PlannedRun, ShardSpec, fingerprint, plan_night, resolve, select, split
from kchaos.cli.main import main, run_estimate
from kchaos.errors import ConfigError
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.verifier.outcome import Outcome

REPO = Path(__file__).resolve().parents[2]
SCHEMA = xmlschema.XMLSchema(str(REPO / "ci" / "junit.xsd"))
NIGHTLY = REPO / "campaigns" / "nightly.toml"


def _runs(estimates: list[float]) -> list[PlannedRun]:
    return [PlannedRun(i, f"c{i % 3}", [], Path(f"/m/c{i % 3}.toml"), None, 100 + i, False, "valid", f"c{i % 3}",
                       e, 2 * e) for i, e in enumerate(estimates)]


# --- the split ---

@pytest.mark.parametrize("count", [1, 2, 3, 4, 7, 40])
def test_the_split_holds_every_run_exactly_once_whatever_the_order_it_is_given(count):
    rng = random.Random(count)
    runs = _runs([rng.choice([90, 240, 300, 660, 45]) for _ in range(39)])
    shards = split(runs, count)
    assert len(shards) == count
    keys = [r.key for s in shards for r in s]
    assert sorted(keys) == list(range(39))  # every run, once
    shuffled = list(runs)
    rng.shuffle(shuffled)
    assert [[r.key for r in s] for s in split(shuffled, count)] == [[r.key for r in s] for s in shards]
    assert all([r.key for r in s] == sorted(r.key for r in s) for s in shards)  # the matrix' order in a shard


def test_the_split_is_balanced_longest_first():
    """Greedy longest-first: no shard exceeds the lightest by more than one run's estimate, and a
    heavy run never lands beside another while a shard stands empty."""
    rng = random.Random(7)
    for _ in range(50):
        runs = _runs([rng.randint(60, 900) for _ in range(rng.randint(5, 60))])
        count = rng.randint(2, 6)
        loads = [sum(r.estimate_s for r in s) for s in split(runs, count)]
        assert max(loads) - min(loads) <= max(r.estimate_s for r in runs)
    assert [[r.key for r in s] for s in split(_runs([600, 500, 400, 100, 100, 100]), 3)] == [[0], [1, 4], [2, 3, 5]]


def test_runs_of_equal_or_unknown_estimates_are_dealt_evenly():
    assert [len(s) for s in split(_runs([0] * 10), 4)] == [3, 3, 2, 2]


@pytest.mark.parametrize("text, needle", [
    ("0/4", "does not exist"), ("5/4", "does not exist"), ("1/0", "does not exist"), ("a/b", "not I/N"),
    ("3", "not I/N"),
])
def test_a_bad_shard_is_a_clear_error(text, needle):
    with pytest.raises(ConfigError, match=needle):
        ShardSpec.parse(text)


@pytest.fixture(scope="module")
def nightly():
    return load_matrix(NIGHTLY)  # the shipped matrix, every campaign validated: once for the module


def test_every_shard_of_a_night_resolves_the_same_runs_and_fresh_seeds(nightly):
    """Fresh seeds come from the night's id: the same on every shard (each resolves the night on its
    own), other ones on another night; fixed seeds never change, and neither does a run's key or
    seed when a selection leaves others out."""
    matrix, variants = nightly
    a = resolve(matrix.name, variants, "2026-12-01", cost=run_estimate)
    b = resolve(matrix.name, variants, "2026-12-01", cost=run_estimate)
    other = resolve(matrix.name, variants, "2026-12-02")
    assert [(r.key, r.name, r.seed, r.fresh) for r in a] == [(r.key, r.name, r.seed, r.fresh) for r in b]
    fresh = [r for r in a if r.fresh]
    assert fresh and all(r.seed != o.seed for r, o in zip(a, other) if r.fresh)
    assert [(r.key, r.seed) for r in a if not r.fresh] == [(r.key, r.seed) for r in other if not r.fresh]
    assert fingerprint(a) == fingerprint(b) != fingerprint(other)
    shards = [plan_night("nightly", a, 4, "2026-12-01", only=i)["split"][0]["plan"] for i in (1, 2, 3, 4)]
    assert sorted((r["key"], r["seed"]) for s in shards for r in s) == [(r.key, r.seed) for r in a]
    subset = select(resolve(matrix.name, variants, "2026-12-01"), labels=["hunt-clock*"])
    assert [(r.key, r.seed) for r in subset] == [(r.key, r.seed) for r in a if r.label.startswith("hunt-clock")]


def test_entries_and_labels_select_an_ad_hoc_subset():
    runs = [PlannedRun(i, label, [], Path("/m.toml"), None, 1, False, "valid", entry)
            for i, (label, entry) in enumerate([("default", "default"), ("hunt 4.0.0 tv1", "hunt"),
                                                ("hunt 4.0.0 tv2", "hunt"), ("default-sarama", "default-sarama")])]
    assert [r.key for r in select(runs, entries=["hunt"])] == [1, 2]
    assert [r.key for r in select(runs, entries=["hunt 4.0.0 tv2"])] == [2]
    assert [r.key for r in select(runs, labels=["default*"])] == [0, 3]
    assert [r.key for r in select(runs, entries=["default"], labels=["*tv1"])] == [0, 1]
    assert select(runs) == runs
    with pytest.raises(ConfigError, match="--entry 'nope'"):
        select(runs, entries=["nope"])
    with pytest.raises(ConfigError, match="--label 'x\\*'"):
        select(runs, labels=["x*"])


@pytest.mark.parametrize("args, needle", [
    (["--shard", "5/4"], "shard 5 of 4 does not exist"),
    (["--shard", "x"], "not I/N"),
    (["--night-id", "a night"], "--night-id"),
    (["--entry", "no-such-entry"], "--entry 'no-such-entry'"),
    (["--label", "zz*"], "--label 'zz*'"),
    (["--fresh-seeds", "-1"], "--fresh-seeds -1"),
    (["--shards", "4"], "--shards N is for --plan"),
    (["--plan", "--shards", "0"], "--shards 0"),
    (["--json"], "--json is for --plan"),
    (["--matrix", "/no/such.toml"], "does not exist"),
])
def test_bad_nightly_input_is_one_line_and_exit_3_before_anything_starts(tmp_path, capsys, args, needle):
    out = tmp_path / "out"
    assert main(["ci", "nightly", "--matrix", str(_tiny(tmp_path)), "--out", str(out), *args]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err
    assert not out.exists()  # nothing was started, not even the night's directory


def _tiny(tmp_path: Path) -> Path:
    matrix = tmp_path / "tiny.toml"
    matrix.write_text(f"""
name = "tiny"
[[entry]]
campaign = "{REPO / 'campaigns' / 'default.toml'}"
seeds = [1, 2]
fresh_seeds = 1
[[entry]]
label = "control"
campaign = "{REPO / 'campaigns' / 'negative-read-uncommitted.toml'}"
seeds = [1]
expect = "invalid"
""")
    return matrix


def test_the_plan_prints_each_shards_runs_and_minutes(tmp_path, capsys):
    tiny = str(_tiny(tmp_path))
    assert main(["ci", "nightly", "--matrix", tiny, "--plan", "--shards", "2", "--night-id", "n", "--entry", "default",
                 "--label", "contr*"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("nightly tiny, night n: 4 runs, about ")
    assert re.search(r"^shard 1/2: 2 runs, about \d+ min \(at most \d+ min\)$", text, re.M)
    assert "shard 2/2" in text and "control seed=1" in text and "(fresh seed)" in text
    assert main(["ci", "nightly", "--matrix", tiny, "--plan", "--shard", "2/2", "--night-id", "n", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [s["shard"] for s in data["split"]] == ["2/2"] and data["shards"] == 2 and data["runs"] == 4


# --- docs/ci.md's budget figures are the plan's ---

FIGURES = re.compile(r"<!-- plan-figures.*?-->(.*?)<!-- /plan-figures -->", re.S)


def _numbers(cell: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", cell)]


def test_the_budget_figures_in_docs_ci_md_are_what_the_plan_prints():
    """The marked table of docs/ci.md (matrix, night id, shards, runs, minutes about and at most per
    shard) against `kchaos ci nightly --plan`: a changed matrix, campaign or estimate fails here
    until the docs say it. The example workflow's comment states the unsharded night and the
longest of its 4 shards (its timeouts come from the plan itself, in its first job)."""
    table = FIGURES.search((REPO / "docs" / "ci.md").read_text())
    assert table, "docs/ci.md has no <!-- plan-figures --> table"
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in table.group(1).strip().splitlines()
            if line.startswith("|") and "---" not in line][1:]
    assert {r[0] for r in rows} >= {"campaigns/nightly.toml", "campaigns/matrix-clients.toml"}
    for matrix, night_id, shards, runs, about, at_most in rows:
        m, resolved = resolve_night(REPO / matrix, night_id.strip("`"), cost=run_estimate)
        planned = plan_night(m.name, resolved, int(shards), night_id)
        stated = (_numbers(runs), _numbers(about), _numbers(at_most))
        assert stated == ([s["runs"] for s in planned["split"]], [s["estimate_min"] for s in planned["split"]],
                          [s["at_most_min"] for s in planned["split"]]), f"{matrix} on {shards} shards"
        if matrix == "campaigns/matrix-clients.toml" and int(shards) > 1:
            assert max(_numbers(at_most)) <= 360  # each shard within a hosted job's 6 hours, even at most
        if matrix == "campaigns/nightly.toml" and int(shards) == 4:
            assert max(_numbers(about)) <= 60  # the night's budget: an hour a shard by the estimates
    whole = {r[0]: r for r in rows if r[2] == "1"}["campaigns/nightly.toml"]
    workflow = (REPO / "ci" / "examples" / "github-nightly.yml").read_text()
    said = re.search(r"shipped matrix \((\d+) runs, about (\d+) minutes", workflow)
    assert said and [int(said[1]), int(said[2])] == [_numbers(whole[3])[0], _numbers(whole[4])[0]]
    four = {r[0]: r for r in rows if r[2] == "4"}["campaigns/nightly.toml"]
    said = re.search(r"on (\d+) shards is (\d+) runs a shard, the longest about (\d+) minutes, (\d+) at most", workflow)
    assert said and [int(said[i]) for i in range(1, 5)] == [4, max(_numbers(four[3])), max(_numbers(four[4])),
                                                           max(_numbers(four[5]))]


# --- the certification's rows in JUnit ---

ROWS = [
    {"phase": "before step 1", "client": "java 4.2.1", "verdict": "valid", "gating": False,
     "committed_transactions": 40, "exposure": {"committed_by_kind": {"kill": 12}, "short": []},
     "protocol": {"seen": "classic"}},
    {"phase": "after step 1", "client": "java 4.2.1", "verdict": "invalid", "committed_transactions": 30,
     "case_count": 2, "cases": [{"anomaly": "duplicate", "explanation": "input 0@2 twice"}], "note": "duplicate"},
    {"phase": "after step 1", "client": "confluent", "verdict": "unknown", "gating": True,
     "exposure": {"committed_by_kind": {"kill": 3}, "short": ["kill: 3 committed transactions, 50 required"]}},
    {"phase": "after step 1", "client": "franz-go 1.20", "verdict": "known-exposure",
     "known_exposure": "KAFKA-17754 on the classic protocol", "protocol": {"seen": "tv2"}},
    {"phase": "during step 1", "client": "java 4.2.1", "verdict": "not-exercised"},
    {"phase": "before step 1", "client": "confluent", "verdict": "invalid", "gating": False, "case_count": 1},
    {},  # a row of a form to come: tolerated
]


def test_a_certifications_rows_are_test_cases_of_their_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "certification.json").write_text(json.dumps({"overall": "fail", "rows": ROWS}))
    judged = JudgedRun("certify seed=3", "certify", "valid", 60.0, Outcome(str(run), "invalid", certification="fail"))
    plain = JudgedRun("default seed=1", "default", "valid", 10.0, Outcome(str(tmp_path / "none"), "valid"))
    path = write_junit([judged, plain], tmp_path / "junit.xml", "kchaos.t")
    SCHEMA.validate(str(path))
    suite = SCHEMA.to_dict(str(path))["testsuite"][0]
    # the run and its 7 rows, the plain run: failures = the run + the gating invalid row; errors = the gating
    # unknown and the row without a verdict (gating by default: unknown until it says otherwise)
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (9, 2, 2)
    cases = {c["@name"]: c for c in suite["testcase"]}
    row = cases["certify seed=3 / after step 1 / java 4.2.1"]
    assert row["@classname"] == "kchaos.certify.certification"
    assert "invalid (2 cases)" in row["failure"]["@message"] and "input 0@2 twice" in row["failure"]["$"]
    unknown = cases["certify seed=3 / after step 1 / confluent"]
    assert unknown["error"]["@type"] == "unknown" and "50 required" in unknown["system-out"]
    known = cases["certify seed=3 / after step 1 / franz-go 1.20"]
    assert "failure" not in known and "error" not in known
    assert "known exposure: KAFKA-17754 on the classic protocol" in known["system-out"]
    assert "seen tv2" in known["system-out"]
    baseline = cases["certify seed=3 / before step 1 / java 4.2.1"]
    assert "not gating" in baseline["system-out"] and "committed_by_kind kill 12" in baseline["system-out"]
    assert "committed transactions: 40" in baseline["system-out"]
    assert "failure" not in cases["certify seed=3 / before step 1 / confluent"]  # not gating: passes, says invalid
    assert ": invalid (not gating" in cases["certify seed=3 / before step 1 / confluent"]["system-out"]
    assert ": not-exercised" in cases["certify seed=3 / during step 1 / java 4.2.1"]["system-out"]
    assert cases["certify seed=3 / ? / ?"]["error"]["@type"] == "unknown" and "default seed=1" in cases


def test_a_negative_controls_invalid_rows_are_the_catch_and_an_unreadable_certification_no_rows(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "certification.json").write_text(json.dumps({"overall": "fail", "rows": ROWS[1:2]}))
    control = JudgedRun("c seed=1", "c", "invalid", 1.0, Outcome(str(run), "invalid", certification="fail"))
    torn = tmp_path / "torn"
    torn.mkdir()
    (torn / "certification.json").write_text("{")
    broken = JudgedRun("t seed=1", "t", "valid", 1.0, Outcome(str(torn), "valid"))
    suite = SCHEMA.to_dict(str(write_junit([control, broken], tmp_path / "j.xml", "s")))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (3, 0, 0)


# --- merge, on hand-made shard folders ---

def _shard(root: Path, night_id: str, shard: str | None, runs: list[dict], done: list[tuple[int, str]],
           fp: str = "f00d", resolved: int | None = None, complete: bool = True) -> Path:
    """A shard's night directory as `kchaos ci nightly --shard` writes it: plan.json, summary.json
    and a run directory per finished run (results.json with its verdict)."""
    name = f"20261201T021700Z-m" + (f"-shard-{shard.replace('/', '-of-')}" if shard else "")
    night = root / name
    night.mkdir(parents=True)
    record = {"night_id": night_id, "matrix": "m", "shard": shard, "shards": int(shard.split("/")[1]) if shard else 1,
              "fingerprint": fp, "resolved_runs": resolved, "started": "20261201T021700Z"}
    (night / "plan.json").write_text(json.dumps({**record, "runs": runs}))
    judged = []
    for key, verdict in done:
        run = next(r for r in runs if r["key"] == key)
        run_dir = night / f"20261201T0218{key:02d}Z-{run['label']}-seed{run['seed']}"
        run_dir.mkdir()
        (run_dir / "campaign.json").write_text("{}")
        (run_dir / "status.json").write_text(json.dumps({"phase": "done", "complete": True, "verdict": verdict}))
        anomalies = {"duplicate": [{"explanation": "input 1@0 twice"}]} if verdict == "invalid" else {}
        (run_dir / "results.json").write_text(json.dumps({"verdict": verdict, "anomalies": anomalies, "run": {
            "seed": run["seed"]}, "anomaly_types": sorted(anomalies)}))
        (run_dir / "expect.json").write_text(json.dumps({"verdict": run["expect"], "shard": shard}))
        judged.append({"key": key, "shard": shard, "name": run["name"], "label": run["label"], "seed": run["seed"],
                       "verdict": verdict, "expected": run["expect"], "errors": [], "seconds": 30.0,
                       "run_dir": f"/elsewhere/{night.name}/{run_dir.name}"})  # as the shard's own machine named it
    (night / "summary.json").write_text(json.dumps({"night": record, "complete": complete, "runs": judged}))
    return night


def _planned(key: int, label: str, expect: str = "valid") -> dict:
    return {"key": key, "name": f"{label} seed={key}", "label": label, "seed": key, "expect": expect}


RUNS = [_planned(0, "default"), _planned(1, "control", "invalid"), _planned(2, "default"), _planned(3, "hunt")]


def test_shards_merge_into_one_night_with_one_junit_summary_table_and_exit_code(tmp_path, capsys):
    a = _shard(tmp_path / "a", "n1", "1/2", [RUNS[0], RUNS[3]], [(0, "valid"), (3, "valid")], resolved=4)
    b = _shard(tmp_path / "b", "n1", "2/2", [RUNS[1], RUNS[2]], [(1, "invalid"), (2, "valid")], resolved=4)
    out = tmp_path / "out"
    assert main(["ci", "merge", str(tmp_path / "a"), str(b), "--out", str(out)]) == 0
    night = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert night.parent == out and night.name == "20261201T021700Z-m"
    summary = json.loads((night / "summary.json").read_text())
    assert [(r["key"], r["shard"], r["verdict"]) for r in summary["runs"]] == [
        (0, "1/2", "valid"), (1, "2/2", "invalid"), (2, "2/2", "valid"), (3, "1/2", "valid")]
    assert summary["exit_code"] == 0 and summary["complete"] and all(Path(r["run_dir"]).parent == night
                                                                     for r in summary["runs"])
    SCHEMA.validate(str(night / "junit.xml"))
    suite = SCHEMA.to_dict(str(night / "junit.xml"))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (4, 0, 0)
    assert (night / "releases.md").read_text().count("| `20261201T0218") == 4
    assert not list(a.glob("*/campaign.json"))  # the runs moved
    assert json.loads((a / "merged.json").read_text())["merged_into"] == str(night)
    index = (out / "index.html").read_text()
    assert index.count("20261201T021700Z-m") >= 4 and "shard-1-of-2" not in index  # one night, every run
    assert main(["ci", "merge", str(a), str(b), "--out", str(out)]) == 0  # again: the same night, finished
    assert len(list(out.glob("*/plan.json"))) == 1


def test_the_merged_exit_code_follows_the_unsharded_rules_and_a_run_never_run_is_an_error(tmp_path, capsys):
    _shard(tmp_path / "a", "n1", "1/2", [RUNS[0], RUNS[3]], [(0, "unknown")], complete=False)
    _shard(tmp_path / "b", "n1", "2/2", [RUNS[1], RUNS[2]], [(1, "invalid"), (2, "valid")])
    assert main(["ci", "merge", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "o")]) == 3
    night = Path(capsys.readouterr().out.strip().splitlines()[-1])
    runs = json.loads((night / "summary.json").read_text())["runs"]
    assert [r["verdict"] for r in runs] == ["unknown", "invalid", "valid", "harness-error"]
    assert "not run in shard 1/2" in runs[3]["errors"][0]
    suite = SCHEMA.to_dict(str(night / "junit.xml"))["testsuite"][0]
    assert (suite["@tests"], suite["@failures"], suite["@errors"]) == (4, 0, 2)
    _shard(tmp_path / "c", "n2", "1/2", [RUNS[0], RUNS[3]], [(0, "valid"), (3, "invalid")])
    _shard(tmp_path / "d", "n2", "2/2", [RUNS[1], RUNS[2]], [(1, "valid"), (2, "valid")])
    assert main(["ci", "merge", str(tmp_path / "c"), str(tmp_path / "d"), "--out", str(tmp_path / "o")]) == 1


@pytest.mark.parametrize("shards, needle", [
    ([("n1", "1/2", "f"), ("n2", "2/2", "f")], "shards of different nights (n1: {0}; n2: {1})"),
    ([("n1", "1/2", "f"), ("n1", "2/3", "f")], "shards of different splits"),
    ([("n1", "1/2", "f"), ("n1", "2/2", "g")], "resolved different runs"),
    ([("n1", "1/2", "f"), ("n1", "1/2", "f")], "overlapping shards: shard 1/2 given 2 times ({0}, {1})"),
    ([("n1", "1/3", "f"), ("n1", "3/3", "f")], "shard 2/3 missing (given: 1/3, 3/3)"),
    ([("n1", "1/4", "f"), ("n1", "4/4", "f")], "shards 2/4, 3/4 missing"),
])
def test_merge_refuses_shards_of_other_nights_overlapping_or_missing_in_one_line(tmp_path, capsys, shards, needle):
    dirs = [_shard(tmp_path / f"s{i}", night_id, shard, [RUNS[i]], [(i, "valid")], fp)
            for i, (night_id, shard, fp) in enumerate(shards)]
    assert main(["ci", "merge", *map(str, dirs), "--out", str(tmp_path / "out")]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle.format(*dirs) in err[0], err
    assert not (tmp_path / "out").exists() and all(list(d.glob("*/campaign.json")) for d in dirs)  # nothing moved


def test_merge_refuses_a_run_planned_on_two_shards_and_a_folder_without_a_night(tmp_path):
    a = _shard(tmp_path / "a", "n1", "1/2", [RUNS[0], RUNS[1]], [])
    b = _shard(tmp_path / "b", "n1", "2/2", [RUNS[1]], [])
    with pytest.raises(ConfigError, match="run 'control seed=1' is in .* and in"):
        merge_nights([a, b], tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="holds no shard"):
        merge_nights([tmp_path / "empty"], tmp_path / "out")
    with pytest.raises(ConfigError, match="is not a directory"):
        merge_nights([tmp_path / "nope"], tmp_path / "out")


def test_an_output_root_of_several_shards_is_taken_whole(tmp_path, capsys):
    """The shards of one night run into one --out root (locally, one after another): the root
    merges, and its index then holds the merged night once."""
    root = tmp_path / "runs"
    _shard(root / "x", "n1", "1/2", [RUNS[0]], [(0, "valid")])
    _shard(root / "y", "n1", "2/2", [RUNS[1]], [(1, "invalid")])
    for d in ("x", "y"):  # both night directories straight under the root
        (root / d / next((root / d).iterdir()).name).rename(root / f"{d}-night")
    assert main(["ci", "merge", str(root), "--out", str(root)]) == 0
    night = Path(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(json.loads((night / "summary.json").read_text())["runs"]) == 2
    assert {p.parent.parent for p in root.glob("*/*/campaign.json")} == {night}
