"""``kchaos ci merge DIR... --out OUT``: the shards of one night (``kchaos ci nightly --shard I/N``)
as one night: one JUnit file, one summary.json, one release table, one night in OUT's index, one
exit code, by the unsharded night's rules (harness/runs.py's ``exit_code``).

Each DIR is a shard's night directory (it holds ``plan.json``) or an output root holding such
directories (each one under it not merged yet is taken). Refused before anything moves, with one
line naming the shards concerned: shards of different nights (another night id or matrix),
of different splits (another N), or of different runs (another matrix file, --fresh-seeds or
selection); a shard given twice, or a run in two shards (overlap); a shard missing.

The run directories move into ``OUT/<the first shard's start>-<matrix>/`` (a rename: a run's
sparse broker files stay sparse), so OUT's index holds the night once; each shard's own folder
keeps its plan.json, junit.xml and summary.json, and gains ``merged.json`` naming where its runs
went. A planned run that a shard never finished (a job killed by its timeout) is a harness
error of the merged night, never a silent gap. Merging the same shards again into the same OUT
is allowed (an interrupted merge finishes). A run its shard skipped (it needs root, the shard was
not root) stays skipped, with its reason, and out of the exit code. ``--slim-expected`` slims the
runs whose verdict was expected after the merge (ci/nightly.py ``slim_expected``).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kchaos.ci.nightly import JUNIT_FILE, PLAN_FILE, RELEASES_FILE, SUMMARY_FILE, close_night, signature_record
from kchaos.ci.release_table import release_row, write_release_table
from kchaos.errors import ConfigError, KchaosError
from kchaos.files import atomic_write, read_json
from kchaos.log import say
from kchaos.reports.index import render_index
from kchaos.reports.junit import JudgedRun, write_junit
from kchaos.rundir import CAMPAIGN_FILE
from kchaos.verifier.outcome import load_outcome

MERGED_FILE = "merged.json"


@dataclass
class ShardNight:
    path: Path
    plan: dict[str, Any]
    summary: dict[str, Any] | None
    merged: dict[str, Any] = field(default_factory=dict)

    @property
    def shard(self) -> tuple[int, int]:
        text = self.plan.get("shard")
        if not text:
            return 1, 1  # an unsharded night is its own only shard
        index, count = text.split("/")
        return int(index), int(count)

    @property
    def label(self) -> str:
        return f"{self.path} (shard {self.shard[0]}/{self.shard[1]})"


def _read_night(path: Path) -> ShardNight:
    try:
        plan = read_json(path / PLAN_FILE)
        summary = read_json(path / SUMMARY_FILE, None)
        merged = read_json(path / MERGED_FILE, {}) or {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: its night's records cannot be read: {exc}",
                          "pass the shard's output folder as the nightly wrote it") from None
    if not isinstance(plan, dict) or "night_id" not in plan:
        raise ConfigError(f"{path}/{PLAN_FILE} names no night (written before shards existed, or not by kchaos ci "
                          "nightly)", "merge shards of `kchaos ci nightly --shard I/N` of this kchaos")
    if plan.get("merged_from"):
        raise ConfigError(f"{path} is a merged night already, not a shard", "pass the shards' own output folders")
    return ShardNight(path, plan, summary if isinstance(summary, dict) else None, merged)


def _is_merged_night(path: Path) -> bool:
    plan = read_json(path / PLAN_FILE, {}, (ValueError,))
    return isinstance(plan, dict) and bool(plan.get("merged_from"))


def find_shards(dirs: list[Path]) -> list[ShardNight]:
    nights: list[ShardNight] = []
    for d in map(Path, dirs):
        if not d.is_dir():
            raise ConfigError(f"{d} is not a directory",
                              "pass each shard's output folder (its --out) or night directory")
        if (d / PLAN_FILE).exists():
            nights.append(_read_night(d.resolve()))
            continue
        found = [_read_night(p.parent.resolve()) for p in sorted(d.glob(f"*/{PLAN_FILE}"))
                 if not (p.parent / MERGED_FILE).exists() and not _is_merged_night(p.parent)]
        if not found:
            raise ConfigError(f"{d} holds no shard of kchaos ci nightly not merged yet (no {PLAN_FILE} in it or in a "
                              "folder under it)", "pass the folder `kchaos ci nightly --shard I/N --out DIR` wrote")
        nights += found
    return nights


def check_shards(shards: list[ShardNight]) -> None:
    """One night, one split, one set of runs, every shard once: else a ConfigError naming which."""
    if not shards:
        raise ConfigError("no shard to merge", "pass the shards' output folders")
    first = shards[0]

    def which(key: str) -> str:
        groups: dict[str, list[str]] = {}
        for s in shards:
            groups.setdefault(str(s.plan.get(key)), []).append(str(s.path))
        return "; ".join(f"{value}: {', '.join(paths)}" for value, paths in groups.items())

    for key, what in (("matrix", "matrices"), ("night_id", "nights")):
        if len({s.plan.get(key) for s in shards}) > 1:
            raise ConfigError(f"shards of different {what} ({which(key)})",
                              "merge the shards of one night: the same --night-id and matrix")
    if len({s.shard[1] for s in shards}) > 1:
        raise ConfigError("shards of different splits (" + "; ".join(s.label for s in shards) + ")",
                          "merge the N shards of one --shard I/N split")
    if len({s.plan.get("fingerprint") for s in shards}) > 1:
        raise ConfigError(f"the shards of night {first.plan['night_id']} resolved different runs (fingerprint "
                          f"{which('fingerprint')})", "run every shard with the same matrix file, --fresh-seeds, "
                                                      "--entry and --label")
    count = first.shard[1]
    by_index: dict[int, list[ShardNight]] = {}
    for s in shards:
        by_index.setdefault(s.shard[0], []).append(s)
    twice = {i: members for i, members in by_index.items() if len(members) > 1}
    if twice:
        raise ConfigError("overlapping shards: " + "; ".join(f"shard {i}/{count} given {len(m)} times ("
                                                             + ", ".join(str(s.path) for s in m) + ")"
                                                             for i, m in sorted(twice.items())),
                          "pass each shard's folder once")
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise ConfigError(f"shard{'s' if len(missing) > 1 else ''} {', '.join(f'{i}/{count}' for i in missing)} "
                          f"missing (given: {', '.join(f'{i}/{count}' for i in sorted(by_index))})",
                          "pass every shard's folder of the night")
    owner: dict[int, ShardNight] = {}
    for s in shards:
        for run in s.plan.get("runs") or []:
            if run["key"] in owner:
                raise ConfigError(f"overlapping shards: run {run['name']!r} is in {owner[run['key']].label} and in "
                                  f"{s.label}", "run every shard with the same kchaos (its split)")
            owner[run["key"]] = s
    expected = first.plan.get("resolved_runs")
    if expected is not None and len(owner) != expected:
        raise ConfigError(f"the shards of night {first.plan['night_id']} plan {len(owner)} runs of its {expected}",
                          "run every shard with the same kchaos (its split)")


def _started(shards: list[ShardNight]) -> str:
    """The night's start: its first shard's (a night directory's name begins with it)."""
    return min(str(s.plan.get("started") or s.path.name[:16]) for s in shards)


def _merged_night_dir(out_root: Path, shards: list[ShardNight]) -> Path:
    first = shards[0].plan
    base = out_root / f"{_started(shards)}-{first['matrix']}"
    target, n = base, 1
    while target.exists():
        plan = read_json(target / PLAN_FILE, {}, (ValueError,)) or {}
        if plan.get("merged_from") and plan.get("night_id") == first["night_id"] \
                and plan.get("fingerprint") == first.get("fingerprint"):
            return target  # the same night merged before: finish it
        n += 1
        target = base.with_name(f"{base.name}-{n}")
    return target


def _move_runs(shard: ShardNight, target: Path) -> dict[str, str]:
    """Every run directory of the shard into ``target``: {its name in the shard: its name there}."""
    moved: dict[str, str] = dict(shard.merged.get("moved") or {})
    for run in sorted(p.parent for p in shard.path.glob(f"*/{CAMPAIGN_FILE}")):
        dest, n = target / run.name, 1
        while dest.exists():  # the same name from another shard (started in the same second)
            dest = target / (f"{run.name}-shard{shard.shard[0]}" + (f"-{n}" if n > 1 else ""))
            n += 1
        shutil.move(str(run), str(dest))
        moved[run.name] = dest.name
        atomic_write(shard.path / MERGED_FILE, json.dumps({"merged_into": str(target), "moved": moved}, indent=2))
    if not (shard.path / MERGED_FILE).exists():
        atomic_write(shard.path / MERGED_FILE, json.dumps({"merged_into": str(target), "moved": moved}, indent=2))
    return moved


def _judged(run: dict[str, Any], record: dict[str, Any] | None, shard: ShardNight, target: Path,
            moved: dict[str, str]) -> JudgedRun:
    where = f"shard {shard.shard[0]}/{shard.shard[1]}"
    if record is None:
        why = ("its shard's night did not finish (no record of this run: killed, say, by the job's timeout)"
               if not (shard.summary or {}).get("complete") else "its shard's night stopped before it (interrupted)")
        return JudgedRun(run["name"], run["label"], run["expect"], 0.0, None, [f"not run in {where}: {why}"])
    judged = JudgedRun(record["name"], record.get("label") or run["label"], record.get("expected") or run["expect"],
                       float(record.get("seconds") or 0.0))
    if record.get("skipped"):  # not run on its shard (it needs root there): skipped here too, with the reason
        judged.skipped = str(record["skipped"])
        return judged
    if not record.get("run_dir"):
        judged.harness_errors = list(record.get("errors") or ["the run failed before a verdict"])
        return judged
    name = Path(record["run_dir"]).name
    run_dir = target / moved.get(name, name)
    try:
        judged.outcome = load_outcome(run_dir)
    except KchaosError as exc:
        judged.harness_errors = [f"{where}: {exc.one_line()}"]
    return judged


def merge_nights(dirs: list[Path], out_root: Path, slim: bool = False) -> int:
    """``slim``: after the merge, the runs whose verdict was expected slimmed to their evidence."""
    shards = find_shards(dirs)
    check_shards(shards)
    shards.sort(key=lambda s: s.shard[0])
    first = shards[0].plan
    out_root = Path(out_root).resolve()
    if out_root.exists() and not out_root.is_dir():
        raise ConfigError(f"--out {out_root} is a file, not a directory", "pass a directory for the merged night")
    target = _merged_night_dir(out_root, shards)
    for s in shards:  # refused before anything moves
        earlier = s.merged.get("merged_into")
        if earlier and Path(earlier) != target.resolve():
            raise ConfigError(f"{s.path}'s runs were moved into {earlier} by an earlier merge",
                              f"merge again with --out {Path(earlier).parent}")
    planned = sorted(((run, s) for s in shards for run in s.plan.get("runs") or []), key=lambda rs: rs[0]["key"])
    record = {**{k: v for k, v in first.items() if k != "runs"}, "shard": None, "started": _started(shards),
              "merged_from": [{"shard": f"{s.shard[0]}/{s.shard[1]}", "dir": str(s.path),
                               "complete": bool((s.summary or {}).get("complete"))} for s in shards]}
    target.mkdir(parents=True, exist_ok=True)  # named a merged night before any run moves: a merge again finds it
    atomic_write(target / PLAN_FILE, json.dumps({**record, "runs": [{**run, "shard": f"{s.shard[0]}/{s.shard[1]}"}
                                                                     for run, s in planned]}, indent=2))
    moves = {s.path: _move_runs(s, target) for s in shards}
    records = {(s.path, r["key"]): r for s in shards for r in (s.summary or {}).get("runs") or []}
    outcomes, judged, rows = [], [], []
    for run, shard in planned:
        o = _judged(run, records.get((shard.path, run["key"])), shard, target, moves[shard.path])
        outcomes.append(o)
        judged.append({"key": run["key"], "shard": f"{shard.shard[0]}/{shard.shard[1]}", "name": o.name,
                       "label": o.campaign, "seed": run["seed"], "fresh": run.get("fresh", False),
                       "verdict": o.verdict, "expected": o.expected, "run_dir": o.run_dir, "errors": o.errors,
                       "guarantees": o.guarantees, "seconds": round(o.seconds, 3),
                       "exposure": o.outcome.exposure if o.outcome is not None else None, "skipped": o.skipped,
                       **signature_record(o)})
        if o.run_dir:
            rows.append(release_row(Path(o.run_dir), o.name, o.verdict))
    write_junit(outcomes, target / JUNIT_FILE, f"kchaos.{first['matrix']}")
    write_release_table(rows, target / RELEASES_FILE, f"{first['matrix']}: releases")
    code = close_night(target, record, judged, rows, outcomes, slim,
                       complete=all(m["complete"] for m in record["merged_from"]),
                       interrupted=any((s.summary or {}).get("interrupted") for s in shards))
    skipped = sum(1 for o in outcomes if o.skipped is not None)
    not_run = sum(1 for o in outcomes if o.outcome is None and any(e.startswith("not run") for e in o.errors))
    say(f"merged {len(shards)} shards of night {first['night_id']} ({first['matrix']}): {len(outcomes)} runs"
        + (f", {not_run} not run" if not_run else "")
        + (f", {skipped} skipped (need root; not in the exit code)" if skipped else "") + f"; junit: {target / JUNIT_FILE}; index: "
        f"{render_index(out_root)}; exit {code}")
    print(target, flush=True)  # the last line on stdout: the merged night's directory
    return code
