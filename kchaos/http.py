"""A JSON-over-HTTP call for the small control APIs kchaos drives (Toxiproxy, the message proxy)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class HttpStatusError(Exception):
    """The server answered with an error status; ``body`` is its text."""

    def __init__(self, code: int, body: str):
        super().__init__(f"HTTP {code} {body}")
        self.code, self.body = code, body


def json_call(url: str, method: str, body: Any = None, timeout_s: float = 10.0) -> Any:
    """Send ``body`` as JSON, return the parsed answer (None when empty). Raises
    :class:`HttpStatusError` for an error status and ``OSError`` when nothing answers."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise HttpStatusError(exc.code, exc.read().decode(errors="replace")) from None
    return json.loads(raw) if raw else None
