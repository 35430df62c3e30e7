"""The run directory: the unit of evidence.

Its layout (config, seed, schedule, history, cluster and worker logs, topic dumps, results) is
documented in docs/workload.md, "The run directory".

Files are written atomically (temp file + rename), so a crash never leaves a half-written file
that looks complete.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from kchaos.files import atomic_write


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

    def write_json(self, name: str, data: Any) -> Path:
        target = self.path / name
        atomic_write(target, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")
        return target

    def read_json(self, name: str) -> Any:
        return json.loads((self.path / name).read_text())

    def set_status(self, phase: str, complete: bool = False, **extra: Any) -> None:
        self.phase = phase
        self.write_json("status.json", {"phase": phase, "complete": complete, "updated": time.time(), **extra})
