"""Live progress of a run: phase, elapsed/remaining, throughput, active fault, worker restarts.
On a terminal reading text lines one status line is redrawn in place (and each line still goes
to the run's kchaos.log); elsewhere (CI, ``--log-format json``) it is a log line every
``interval_s``."""

from __future__ import annotations

import sys
import time

from kchaos.log import LOGGER, console_is_text_tty


class Progress:
    def __init__(self, interval_s: float):
        self.tty = console_is_text_tty()
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

    def processed_text(self, processed: int | None) -> str:
        """How far the group has consumed the input log, and the rate, each with its unit: input
        offsets (the group's committed offsets summed; the seeder's transaction markers and aborted
        inputs take offsets too, so it runs ahead of the inputs seeded); while the group's offsets
        cannot be read (its coordinator is down) the last figure read and how old it is."""
        if processed is not None:
            rate = self.throughput(processed)
            return (f"consumed {processed} input offsets "
                    f"({'rate: first sample' if rate is None else f'{rate:.0f} offsets/s'})")
        if self._last is None:
            return "consumed: the group's offsets not readable yet"
        return (f"consumed {self._last[1]} input offsets {time.monotonic() - self._last[0]:.0f}s ago "
                f"(the group's offsets not readable since)")

    def show(self, text: str) -> None:
        self._next = time.monotonic() + self.interval_s
        if self.tty:
            sys.stderr.write("\r\033[K" + text[:200])
            sys.stderr.flush()
            self._drawn = True
            LOGGER.debug(text)  # the run's kchaos.log keeps every line
        else:
            LOGGER.info(text)

    def close(self) -> None:
        if self.tty and self._drawn:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self._drawn = False
