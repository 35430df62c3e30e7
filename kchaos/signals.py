"""Signals: turn SIGTERM and SIGHUP into exceptions so that every ``finally``/``with`` tears
down (Ctrl-C already raises KeyboardInterrupt), and a graceful window for runs.

Without :func:`install` a ``kill <harness>`` would skip cleanup and leak JVMs. Inside a
:class:`GracefulStop` window the first SIGINT, SIGTERM or SIGHUP only asks the run to wind down
(stop injecting, heal, drain, read, verify what ran); a second one aborts at once, as outside it.
"""

from __future__ import annotations

import signal
import threading
import time
from types import FrameType
from typing import Any, Callable

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The harness received SIGTERM or SIGHUP (or a second signal in a graceful window)."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"received {signal.Signals(signum).name}")


def install() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise)


class GracefulStop:
    """A window in which the first signal is a request, recorded in :attr:`requested`
    (signal name, wall time, and what ``describe()`` says then, e.g. the run's phase), and the
    second one raises :class:`Terminated`. Outside the main thread signals cannot be caught, so
    there it does nothing and signals keep their usual meaning."""

    def __init__(self, on_request: Callable[[str], None] | None = None,
                 describe: Callable[[], dict[str, Any]] | None = None):
        self.on_request = on_request
        self.describe = describe
        self.requested: dict[str, Any] | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested is not None:
            raise Terminated(f"received {name} again: aborting")
        self.requested = {"signal": name, "time": time.time(), **(self.describe() if self.describe else {})}
        if self.on_request is not None:
            self.on_request(f"received {name}: stopping faults, healing, draining and verifying what ran "
                            "(send it again to abort at once)")

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
