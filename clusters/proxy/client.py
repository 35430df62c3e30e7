"""Typed access to a running message proxy's control API, for the backends that start one."""

from __future__ import annotations

import json
from typing import Any

from kchaos.errors import ClusterError
from kchaos.http import HttpStatusError, json_call
from kchaos.runtime.ports import HOST


class MessageProxyClient:
    """Typed access to a running message proxy's control API."""

    def __init__(self, port: int, timeout_s: float = 30.0):
        self.base_url = f"http://{HOST}:{port}"
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return json_call(self.base_url + path, method, body, self.timeout_s)
        except HttpStatusError as exc:
            try:
                detail = json.loads(exc.body).get("error", exc.body)
            except ValueError:
                detail = exc.body
            raise ClusterError(f"message proxy refused {method} {path}: {detail}") from None
        except OSError as exc:
            raise ClusterError(f"the message proxy at {self.base_url} did not answer {method} {path}: {exc}",
                               "check that the cluster's message proxy process is running") from None

    def version(self) -> dict[str, Any]:
        return self._call("GET", "/version")

    def add_rule(self, rule: dict[str, Any]) -> dict[str, Any]:
        return self._call("POST", "/rules", rule)

    def remove_rule(self, rule_id: str) -> list[dict[str, Any]]:
        """Remove a rule, releasing what it holds; returns every request it affected."""
        return self._call("DELETE", f"/rules/{rule_id}")["events"]

    def rules(self) -> list[dict[str, Any]]:
        return self._call("GET", "/rules")

    def rule_events(self, rule_id: str) -> list[dict[str, Any]]:
        """What a rule has affected so far (it stays in place)."""
        return self._call("GET", f"/rules/{rule_id}/events")

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/stats")

    def reset(self) -> list[dict[str, Any]]:
        return self._call("POST", "/reset")["events"]

    def front(self) -> dict[str, Any]:
        """Front mode: each broker's listener, real address and advertised port; rewrites per API."""
        return self._call("GET", "/front")

    def advertise(self, node_id: int, port: int) -> dict[str, Any]:
        """Front mode: tell clients broker ``node_id`` is at ``port`` (Toxiproxy's, in front of its listener)."""
        return self._call("POST", "/front/advertise", {"node": node_id, "port": port})
