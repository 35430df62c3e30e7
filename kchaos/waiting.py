"""Poll for a condition instead of sleeping (as ducktape's ``wait_until``)."""

from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


class WaitTimeout(TimeoutError):
    def __init__(self, message: str, last_error: BaseException | None = None):
        self.last_error = last_error
        suffix = f" (last error: {last_error})" if last_error else ""
        super().__init__(message + suffix)


def wait_until(
    condition: Callable[[], T],
    timeout_s: float,
    backoff_s: float = 0.25,
    err_msg: str = "condition not met",
    retry_on: tuple[type[BaseException], ...] = (),
    give_up_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Call ``condition`` until it returns something truthy; return that value.

    Exceptions listed in ``retry_on`` count as "not yet" and are kept for the timeout message;
    those in ``give_up_on`` (checked first) end the wait at once.
    """
    deadline = time.monotonic() + timeout_s
    last_error: BaseException | None = None
    while True:
        try:
            value = condition()
            if value:
                return value
        except give_up_on:
            raise
        except retry_on as exc:  # type: ignore[misc]
            last_error = exc
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"{err_msg} within {timeout_s:.0f}s", last_error)
        time.sleep(backoff_s)


def gone_within(present: Callable[[], bool], timeout_s: float, backoff_s: float = 0.1) -> bool:
    """Wait until ``present()`` is false (a process exited, a worker was replaced); whether it
    went within ``timeout_s``. For waits whose timeout is an outcome, not an error."""
    try:
        wait_until(lambda: not present(), timeout_s, backoff_s)
        return True
    except WaitTimeout:
        return False
