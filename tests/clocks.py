"""A module's own name for ``time``, replaced in a unit test, instead of functions of the ``time``
module itself: the unit tests share an xdist worker with cluster fixtures whose threads sleep and
read the clock, and a process-wide patch let those threads move a test's hand-made clock (CI, stop
79: a liveness wait saw 39,239 s pass in one call)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any, Callable


def module_time(**overrides: Callable[..., Any]) -> SimpleNamespace:
    """The ``time`` module's functions with ``overrides`` in their place, for
    ``monkeypatch.setattr(module, "time", module_time(monotonic=...))``."""
    names = {name: getattr(time, name) for name in dir(time) if not name.startswith("_")}
    return SimpleNamespace(**{**names, **overrides})
