"""Signals: turn SIGTERM and SIGHUP into exceptions so that every ``finally``/``with`` tears
down (Ctrl-C already raises KeyboardInterrupt), and a graceful window for runs.

Without :func:`install` a ``kill <harness>`` would skip cleanup and leak JVMs. Inside a
:class:`GracefulStop` window the first SIGINT, SIGTERM or SIGHUP only asks the run to wind down
(stop injecting, heal, drain, read, verify what ran); a second one aborts at once, as outside it.
A :func:`time_limit` is the same: SIGALRM at the limit asks the run to wind down, a second one
``GRACE_S`` later aborts it.
"""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from types import FrameType
from typing import Any, Callable, Iterator

_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGALRM)
#: after a time limit asks a run to wind down: how long it may take before it is aborted
GRACE_S = 300.0


class Terminated(KeyboardInterrupt):
    """The harness received SIGTERM or SIGHUP (or a second signal in a graceful window)."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"received {signal.Signals(signum).name}")


def install() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGALRM):
        signal.signal(sig, _raise)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """SIGALRM after ``seconds`` (a graceful window turns it into a request to wind down, and
    arms a second one ``GRACE_S`` later); none when ``seconds`` is None or off the main thread."""
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


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
        if signum == signal.SIGALRM:  # a time limit: the wind-down has GRACE_S, then it is aborted
            self.requested["reason"] = "time limit"
            signal.setitimer(signal.ITIMER_REAL, GRACE_S)
        if self.on_request is not None:
            what = "the time limit passed" if signum == signal.SIGALRM else f"received {name}"
            then = (f"aborting in {GRACE_S:.0f}s if not done" if signum == signal.SIGALRM
                    else "send it again to abort at once")
            self.on_request(f"{what}: stopping faults, healing, draining and verifying what ran ({then})")

    def __enter__(self) -> "GracefulStop":
        if threading.current_thread() is threading.main_thread():
            for sig in _SIGNALS:
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()
