"""Live progress of a run on the terminal: phase, elapsed/remaining, throughput, active fault,
worker restarts. On a TTY one status line is redrawn in place; elsewhere (CI logs) it degrades
to a plain timestamped line every ``interval_s``."""

from __future__ import annotations

import sys
import time
from typing import IO


class Progress:
    def __init__(self, interval_s: float, stream: IO[str] | None = None):
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.interval_s = 1.0 if self.tty else interval_s
        self._next = 0.0
        self._last: tuple[float, int] | None = None
        self._drawn = False

    def due(self) -> bool:
        return time.monotonic() >= self._next

    def throughput(self, processed: int | None) -> float | None:
        now = time.monotonic()
        rate = None
        if processed is not None:
            if self._last is not None and now > self._last[0]:
                rate = max(0.0, (processed - self._last[1]) / (now - self._last[0]))
            self._last = (now, processed)
        return rate

    def show(self, text: str) -> None:
        self._next = time.monotonic() + self.interval_s
        if self.tty:
            self.stream.write("\r\033[K" + text[:200])
            self._drawn = True
        else:
            self.stream.write(f"[kchaos {time.strftime('%H:%M:%S')}] {text}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False
