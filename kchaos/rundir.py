"""The run directory: the unit of evidence, and the one record of it.

Its layout (config, seed, schedule, history, cluster and worker logs, topic dumps, results) is
documented in docs/workload.md, "The run directory". The names of its files are spelled here
once; the run's own record (the campaign it ran, its status, its results and its
certification) is read and written through :class:`RunDir` only, so every reader sees the same
thing (tests/unit/test_run_record.py holds the other modules to it). The typed readers above
it (the verifier's ``load_recorded`` and ``load_outcome``) are built on this record.

Files are written atomically (temp file + rename), so a crash never leaves a half-written file
that looks complete.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kchaos.files import REQUIRED, atomic_write, read_json

#: the run's own record: read and written through RunDir only (tests/unit/test_run_record.py)
CAMPAIGN_FILE, STATUS_FILE, RESULTS_FILE, CERTIFICATION_FILE = ("campaign.json", "status.json", "results.json",
                                                                "certification.json")
RECORD_FILES = (CAMPAIGN_FILE, STATUS_FILE, RESULTS_FILE, CERTIFICATION_FILE)
#: the other files several layers name (one spelling each)
FINAL_FILE, METRICS_FILE, REPLAY_FILE = "final.json", "metrics.json", "replay.json"
CLUSTER_FILE, ENVIRONMENT_FILE, EXPECT_FILE = "cluster.json", "environment.json", "expect.json"
SCHEDULE_FILE, SEED_FILE, HISTORY_FILE = "schedule.json", "seed", "history.jsonl"
REPORT_FILE = "report.html"
#: a kchaos-started node's directory in ``cluster/`` and its log directory (the brokers' own
#: segments; a cluster kchaos did not start, or the docker backend, leaves none there)
NODE_DIR, NODE_DATA_DIR = "node-{}", "data"
SPARK_RESULTS_FILE, PYTHON_RESULTS_FILE = "results.spark.json", "results.python.json"
#: what a new check of a run replaces, kept beside it as *.previous.json
REPLACED = (RESULTS_FILE, SPARK_RESULTS_FILE, PYTHON_RESULTS_FILE, CERTIFICATION_FILE)
PREVIOUS_RESULTS_FILE = "results.previous.json"
#: a certification's overall verdict as the run's judgement
CERTIFICATION_JUDGEMENT = {"pass": "valid", "fail": "invalid", "unknown": "unknown"}
#: a run directory's name begins with its UTC start (``20261125T165954Z-default-seed23``)
RUN_ID = re.compile(r"\d{8}T\d{6}Z")


@dataclass(frozen=True)
class RunStatus:
    """``status.json``, typed: the phase a run reached and, once judged, its verdicts and exit code."""

    phase: str | None = None
    #: the run reached its final reads and was judged
    complete: bool = False
    #: the checker's verdict: valid | invalid | unknown
    verdict: str | None = None
    #: the certification's overall verdict (pass | fail | unknown), for a run with planned steps
    certification: str | None = None
    exit_code: int | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunStatus":
        return cls(phase=data.get("phase"), complete=bool(data.get("complete")), verdict=data.get("verdict"),
                   certification=data.get("certification"), exit_code=data.get("exit_code"))

    @property
    def judgement(self) -> str | None:
        """What the run says: the certification's where there is one, else the checker's."""
        return CERTIFICATION_JUDGEMENT[self.certification] if self.certification else self.verdict

    @property
    def found_a_bug(self) -> bool:
        """The checker said invalid, or the certification failed: either is the evidence of a bug."""
        return self.verdict == "invalid" or self.certification == "fail"


def _started(run: Path) -> str:
    """The run id's UTC timestamp; else campaign.json's mtime, as one."""
    if RUN_ID.match(run.name):
        return run.name[:16]
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime((run / CAMPAIGN_FILE).stat().st_mtime))


def find_runs(root: Path) -> list[Path]:
    """Run directories at ``ROOT/<run>`` and ``ROOT/<night>/<run>`` (a campaign.json marks one),
    newest first: by when they started, then by path."""
    runs = {p.parent for pattern in (f"*/{CAMPAIGN_FILE}", f"*/*/{CAMPAIGN_FILE}") for p in Path(root).glob(pattern)}
    return sorted(runs, key=lambda run: (_started(run), str(run)), reverse=True)


class RunDir:
    def __init__(self, path: Path):
        self.path = Path(path).resolve()
        #: the phase last written to status.json by this process
        self.phase: str | None = None

    @classmethod
    def create(cls, out_root: Path, name: str, seed: int) -> "RunDir":
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        path = Path(out_root) / f"{stamp}-{name}-seed{seed}"
        suffix = 1
        while path.exists():
            path = Path(out_root) / f"{stamp}-{name}-seed{seed}-{suffix}"
            suffix += 1
        path.mkdir(parents=True)
        return cls(path)

    @property
    def cluster_dir(self) -> Path:
        return self.path / "cluster"

    def node_data_dirs(self) -> dict[str, Path]:
        """Each kchaos-started node's log directory in the run, by node directory name."""
        return {d.parent.name: d for d in sorted(self.cluster_dir.glob(f"{NODE_DIR.format('*')}/{NODE_DATA_DIR}"))
                if d.is_dir()}

    @property
    def started(self) -> str:
        """When the run started (UTC, ``%Y%m%dT%H%M%SZ``): its id's stamp, else campaign.json's mtime."""
        return _started(self.path)

    def write_json(self, name: str, data: Any) -> Path:
        target = self.path / name
        atomic_write(target, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        return target

    def read_json(self, name: str) -> Any:
        return read_json(self.path / name)

    def read(self, name: str, default: Any = REQUIRED, tolerate: tuple[type[BaseException], ...] = ()) -> Any:
        """Any file of the run, by its name here (kchaos.files.read_json's ``default`` and ``tolerate``)."""
        return read_json(self.path / name, default, tolerate)

    def set_status(self, phase: str, complete: bool = False, **extra: Any) -> None:
        self.phase = phase
        self.write_json(STATUS_FILE, {"phase": phase, "complete": complete, "updated": time.time(), **extra})

    def status(self, tolerate: tuple[type[BaseException], ...] = ()) -> RunStatus:
        """The run's status; an empty one when it has none (or, with ``tolerate``, a torn one)."""
        return RunStatus.from_json(self.read(STATUS_FILE, {}, tolerate) or {})

    def campaign_data(self, default: Any = REQUIRED) -> Any:
        """``campaign.json`` as written (the verifier's ``load_recorded`` types it); ``default`` when
        missing (without one: FileNotFoundError); corrupt: ValueError."""
        return self.read(CAMPAIGN_FILE, default)

    def write_campaign(self, data: dict[str, Any]) -> Path:
        return self.write_json(CAMPAIGN_FILE, data)

    def results_data(self, default: Any = None, tolerate: tuple[type[BaseException], ...] = (),
                     required: bool = False) -> Any:
        """``results.json``: ``default`` when missing, unless ``required`` (then FileNotFoundError)."""
        return self.read(RESULTS_FILE, REQUIRED if required else default, tolerate)

    def write_results(self, data: dict[str, Any], name: str | None = None) -> Path:
        """The results as results.json, or as ``name``: an engine's own (``*_RESULTS_FILE``)."""
        return self.write_json(name or RESULTS_FILE, data)

    def certification_data(self, tolerate: tuple[type[BaseException], ...] = ()) -> dict[str, Any] | None:
        """``certification.json``; None when the run has none."""
        return self.read(CERTIFICATION_FILE, None, tolerate)

    def write_certification(self, data: dict[str, Any]) -> Path:
        return self.write_json(CERTIFICATION_FILE, data)

    def previous_results_data(self) -> dict[str, Any]:
        """The results a new check replaced (results.previous.json); {} when none."""
        return self.read(PREVIOUS_RESULTS_FILE, {}) or {}

    def keep_previous(self) -> list[str]:
        """A re-check never overwrites silently: the files it replaces are kept as *.previous.json."""
        kept = []
        for name in REPLACED:
            path = self.path / name
            if path.exists():
                path.replace(path.with_name(name.replace(".json", ".previous.json")))
                kept.append(name)
        return kept

    def replay_command(self) -> str | None:
        """The command that replays the run (replay.json), if it recorded one."""
        return (self.read(REPLAY_FILE, {}) or {}).get("command")

    def missing_for_replay(self) -> list[str]:
        """What a replay needs that the directory lacks: of its campaign, seed and schedule."""
        return [name for name in (CAMPAIGN_FILE, SEED_FILE, SCHEDULE_FILE) if not (self.path / name).exists()]
