"""A nightly matrix as runs, and those runs split over shards (``kchaos ci nightly --shard I/N``).

The *resolution* of a matrix is every run of every entry variant (release x transaction.version),
in the matrix' order: the fixed seeds, then the fresh ones. Fresh seeds are drawn from the
night's id (``--night-id``, default the UTC date), the matrix' name and the variant's label, so
every shard of a night, on any machine, resolves the same runs with the same seeds; another
night id draws other fresh seeds. Each run keeps its position in the whole resolution as its
``key``, so a selection (``--entry``, ``--label``) changes neither its key nor its seed.

The split is greedy, longest first: the runs sorted by their estimated minutes (``kchaos plan``'s
estimate, ties by key) go one by one to the shard with the least estimated time so far (ties:
the shard with fewer runs, then the lowest). It depends on the runs and N only, never on the shard asking, so the N
shards of a night hold every run exactly once. ``fingerprint`` names the runs a night split: a
merge refuses shards whose fingerprints differ (another matrix, --fresh-seeds or selection).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from kchaos.ci.needs import root_needs
from kchaos.errors import ConfigError
from kchaos.verifier.campaign import Campaign

#: a night's id: what names the night in its shards' records and draws its fresh seeds
NIGHT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: the estimate of one run: (typical seconds, at most seconds); kchaos plan's, given by the CLI
Cost = Callable[[Campaign, int], tuple[float, float]]


def default_night_id() -> str:
    """The UTC date: the shards of one night, started the same UTC day, agree without being told."""
    return time.strftime("%Y-%m-%d", time.gmtime())


def check_night_id(night_id: str) -> str:
    if not NIGHT_ID.match(night_id or ""):
        raise ConfigError(f"--night-id {night_id!r}: letters, digits, '.', '_' and '-' only (at most 64, "
                          "beginning with a letter or digit)", "pass e.g. --night-id 2026-12-01 or the CI run's id")
    return night_id


@dataclass(frozen=True)
class ShardSpec:
    index: int  # 1-based
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> "ShardSpec":
        match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
        if not match:
            raise ConfigError(f"--shard {text!r}: not I/N", "pass e.g. --shard 1/4 (shard 1 of 4)")
        index, count = int(match[1]), int(match[2])
        if count < 1 or not 1 <= index <= count:
            raise ConfigError(f"--shard {text}: shard {index} of {count} does not exist",
                              f"pass an I from 1 to N and an N of 1 or more, e.g. --shard 1/{max(count, 1)}")
        return cls(index, count)


@dataclass
class PlannedRun:
    """One run of a night: its place in the whole resolution (``key``), what it runs, and its
    estimate."""

    key: int
    label: str
    sets: list[str]
    campaign_path: Path
    campaign: Campaign = field(repr=False)
    seed: int
    fresh: bool
    expect: str
    entry: str                      # the entry's name: its label, else its campaign's name
    estimate_s: float = 0.0
    at_most_s: float = 0.0
    #: why it needs root here (ci/needs.py, from its campaign); empty: it does not
    needs_root: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        """The JUnit test case's name: ``<label> seed=<seed> [overrides]``."""
        return f"{self.label} seed={self.seed}" + (f" [{' '.join(self.sets)}]" if self.sets else "")

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "name": self.name, "label": self.label, "entry": self.entry,
                "campaign": str(self.campaign_path), "seed": self.seed, "fresh": self.fresh, "set": list(self.sets),
                "expect": self.expect, "estimate_s": round(self.estimate_s), "at_most_s": round(self.at_most_s),
                "needs_root": list(self.needs_root)}


def fresh_seeds(night_id: str, matrix_name: str, label: str, occurrence: int, count: int) -> list[int]:
    """``count`` seeds for one entry variant, drawn from the night's id (the same on every shard)."""
    rng = random.Random(f"kchaos-nightly/{night_id}/{matrix_name}/{label}/{occurrence}")  # str: sha512-seeded, stable
    return [rng.randrange(2**31) for _ in range(count)]


def resolve(matrix_name: str, variants: list[tuple[Any, str, list[str], Path, Campaign]], night_id: str,
            extra_fresh: int = 0, cost: Cost | None = None) -> list[PlannedRun]:
    """Every run of every entry variant (``load_matrix``'s resolved list), in the matrix' order."""
    if extra_fresh < 0:
        raise ConfigError(f"--fresh-seeds {extra_fresh} is negative", "pass 0 or more extra fresh seeds per entry")
    runs: list[PlannedRun] = []
    seen: dict[str, int] = {}
    for entry, label, sets, path, campaign in variants:
        occurrence = seen[label] = seen.get(label, -1) + 1
        fresh = fresh_seeds(night_id, matrix_name, label, occurrence, entry.fresh_seeds + extra_fresh)
        for seed, is_fresh in [*((s, False) for s in entry.seeds), *((s, True) for s in fresh)]:
            run = PlannedRun(len(runs), label, list(sets), path, campaign, seed, is_fresh, entry.expect,
                             entry.label or campaign.name, needs_root=root_needs(campaign))
            if cost is not None:
                run.estimate_s, run.at_most_s = cost(campaign, seed)
            runs.append(run)
    return runs


def select(runs: list[PlannedRun], entries: Iterable[str] = (), labels: Iterable[str] = ()) -> list[PlannedRun]:
    """The runs an ad hoc subset names: ``entries`` by entry name (its label, else its campaign's
    name: every variant) or by a variant's label (``hunt-kip890-java 4.0.0 tv1``); ``labels`` as
    shell patterns over variants' labels (``default-*``). Several select their union; none, all."""
    entries, labels = list(entries), list(labels)
    if not entries and not labels:
        return runs
    known_entries = sorted({r.entry for r in runs})
    known_labels = sorted({r.label for r in runs})
    for name in entries:
        if name not in known_entries and name not in known_labels:
            raise ConfigError(f"--entry {name!r}: no entry or variant of the matrix has that name",
                              "one of: " + ", ".join(known_entries[:20]) + (", ..." if len(known_entries) > 20 else ""))
    for pattern in labels:
        if not any(fnmatch.fnmatchcase(label, pattern) for label in known_labels):
            raise ConfigError(f"--label {pattern!r}: matches no variant's label",
                              "a shell pattern over the labels, e.g. --label 'default*'; labels: "
                              + ", ".join(known_labels[:20]) + (", ..." if len(known_labels) > 20 else ""))
    return [r for r in runs if r.entry in entries or r.label in entries
            or any(fnmatch.fnmatchcase(r.label, p) for p in labels)]


def split(runs: list[PlannedRun], count: int) -> list[list[PlannedRun]]:
    """``count`` shards of ``runs``: greedy longest first onto the least loaded shard; each shard's
    runs in the matrix' order (by key)."""
    if count < 1:
        raise ConfigError(f"{count} shards: at least one", "pass --shard I/N with N of 1 or more")
    shards: list[list[PlannedRun]] = [[] for _ in range(count)]
    load = [0.0] * count
    for run in sorted(runs, key=lambda r: (-r.estimate_s, -r.at_most_s, r.key)):
        target = min(range(count), key=lambda i: (load[i], len(shards[i]), i))
        shards[target].append(run)
        load[target] += run.estimate_s
    return [sorted(s, key=lambda r: r.key) for s in shards]


def fingerprint(runs: list[PlannedRun]) -> str:
    """What a night split, in 16 hex digits: equal on every shard of one night."""
    text = json.dumps([[r.key, r.name, r.seed, r.expect, str(r.campaign_path.name)] for r in runs])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_totals(shard: list[PlannedRun]) -> dict[str, Any]:
    return {"runs": len(shard), "estimate_min": round(sum(r.estimate_s for r in shard) / 60),
            "at_most_min": round(sum(r.at_most_s for r in shard) / 60),
            "needs_root": any(r.needs_root for r in shard), "root_runs": sum(1 for r in shard if r.needs_root)}


def plan_night(matrix_name: str, runs: list[PlannedRun], count: int, night_id: str,
               only: int | None = None) -> dict[str, Any]:
    """``--plan``: the split of ``runs`` over ``count`` shards with each shard's runs and minutes
    (typical and at most); ``only`` (1-based) keeps that shard's runs alone."""
    shards = split(runs, count)
    return {"matrix": matrix_name, "night_id": night_id, "runs": len(runs), "shards": count,
            "fingerprint": fingerprint(runs),
            "total": {"estimate_min": round(sum(r.estimate_s for r in runs) / 60),
                      "at_most_min": round(sum(r.at_most_s for r in runs) / 60)},
            "split": [{"shard": f"{i + 1}/{count}", **shard_totals(s), "plan": [r.to_json() for r in s]}
                      for i, s in enumerate(shards) if only is None or only == i + 1]}


def _runs(n: int) -> str:
    return f"{n} run" + ("" if n == 1 else "s")


def render_plan_night(p: dict[str, Any], root: bool = True) -> str:
    """``root``: whether the process is root (a run that needs root is marked as skipped otherwise)."""
    lines = [f"nightly {p['matrix']}, night {p['night_id']}: {_runs(p['runs'])}, about {p['total']['estimate_min']} "
             f"min (at most {p['total']['at_most_min']} min) by kchaos plan's estimates, on {p['shards']} shard"
             + ("s" if p["shards"] != 1 else "")]
    for shard in p["split"]:
        lines += ["", f"shard {shard['shard']}: {_runs(shard['runs'])}, about {shard['estimate_min']} min "
                      f"(at most {shard['at_most_min']} min)"]
        lines += [f"  ~{r['estimate_s'] / 60:4.1f} min (at most {r['at_most_s'] / 60:4.1f})  {r['name']}"
                  + (" (fresh seed)" if r["fresh"] else "")
                  + (f"\n      needs root: {'; '.join(r['needs_root'])}"
                     + ("" if root else " (not root here: it would be skipped)") if r.get("needs_root") else "")
                  for r in shard["plan"]]
    longest = max(p["split"], key=lambda s: s["estimate_min"], default=None)
    if longest is not None and len(p["split"]) > 1:
        lines += ["", f"longest shard: {longest['shard']}, about {longest['estimate_min']} min; at most "
                      f"{max(s['at_most_min'] for s in p['split'])} min"]
    return "\n".join(lines)
