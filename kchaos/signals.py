"""Turn SIGTERM and SIGHUP into exceptions so that every ``finally``/``with`` tears down.

Without this a ``kill <harness>`` would skip cleanup and leak JVMs (Ctrl-C already raises
KeyboardInterrupt).
"""

from __future__ import annotations

import signal
from types import FrameType


class Terminated(KeyboardInterrupt):
    """The harness received SIGTERM or SIGHUP."""


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"received {signal.Signals(signum).name}")


def install() -> None:
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _raise)
