"""Atomic writes: a reader sees the old file or the whole new one, never half of it; and the one
reader of a JSON file.

Every file of a run directory, a pid file and a cluster's state file is written this way, so a
crash or a signal in the middle of a write never leaves a truncated file that looks complete.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

#: read_json's default for "no default": a missing file raises
REQUIRED: Any = object()


@contextmanager
def atomic_target(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path`` for any writer (Parquet, XML, a file handle);
    rename it onto ``path`` when the block ends without an exception, remove it otherwise."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def atomic_write(path: Path, text: str) -> None:
    with atomic_target(path) as tmp:
        tmp.write_text(text)


def read_json(path: Path, default: Any = REQUIRED, tolerate: tuple[type[BaseException], ...] = ()) -> Any:
    """A JSON file, parsed. ``default`` when it does not exist (without one: FileNotFoundError),
    and when reading or parsing raises one of ``tolerate`` (a lister of many runs passes
    ``(ValueError,)``: one torn file must not hide the others)."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        if default is REQUIRED:
            raise
        return default
    except tolerate:
        if default is REQUIRED:
            raise
        return default
