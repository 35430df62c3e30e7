"""One loop for everything planned on the run's clock: the fault schedule (faults/nemesis.py)
and the planned steps (faults/steps.py) each run their items in a thread of their own, in order,
each no earlier than its time after the start (later while the previous item still runs), and
stop between items. The cluster lock is shared by both: a fault holds it for its inject-hold-heal,
a step for each change it makes to the cluster, so the two never touch the cluster at once."""

from __future__ import annotations

import threading
import time
from typing import Callable, Generic, Sequence, TypeVar

T = TypeVar("T")


class ScheduledRunner(Generic[T]):
    """Runs ``execute(index, item)`` for each item at ``at_s(item)`` seconds after :meth:`start`."""

    def __init__(self, name: str, items: Sequence[T], at_s: Callable[[T], float],
                 cluster_lock: threading.Lock | None = None):
        self.items = list(items)
        self._at_s = at_s
        #: shared by the nemesis and the steps of one run
        self.cluster_lock = cluster_lock if cluster_lock is not None else threading.Lock()
        self.stopping = threading.Event()
        self.started_at: float | None = None
        #: how far the items after the current one slide (a paced fault waited for the work)
        self.shift_s = 0.0
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.started_at = time.monotonic()
        self._thread.start()

    def execute(self, index: int, item: T) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        assert self.started_at is not None
        for index, item in enumerate(self.items):
            # woken every second: the shift may change meanwhile (a step began, faults/nemesis.py)
            while (delay := self.started_at + self._at_s(item) + self.shift_s - time.monotonic()) > 0:
                if self.stopping.wait(min(delay, 1.0)):
                    return
            if self.stopping.is_set():
                return
            self.execute(index, item)

    def halt(self, join_s: float) -> None:
        """No further item starts; the one under way is given ``join_s`` to finish."""
        self.stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=join_s)

    def wait(self, seconds: float) -> bool:
        """Sleep within an item; True when the runner is being stopped."""
        return self.stopping.wait(seconds)
