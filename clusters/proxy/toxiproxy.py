"""Toxiproxy: installation, the server process, and a small typed client for its REST API.

Why our own client: the PyPI ``toxiproxy-python`` package was last released in 2019 and
covers an older API; the REST surface we need (proxies, toxics, reset, populate) is small and
stable, so a typed client over ``urllib`` keeps a dependency out and gives clear errors.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kchaos.errors import ClusterError
from kchaos.http import HttpStatusError, json_call
from kchaos.paths import cache_dir
from kchaos.runtime.go_install import go_install
from kchaos.runtime.processes import ManagedProcess
from kchaos.waiting import WaitTimeout, wait_until

TOXIPROXY_VERSION = "2.12.0"
TOXIPROXY_MODULE = "github.com/Shopify/toxiproxy/v2/cmd/server"

ToxicType = Literal["latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data"]
TOXIC_TYPES: tuple[str, ...] = ("latency", "bandwidth", "slow_close", "timeout", "reset_peer", "slicer", "limit_data")
Stream = Literal["upstream", "downstream"]


def ensure_toxiproxy_binary() -> Path:
    """The toxiproxy server binary, built with ``go install`` into the cache on first use."""
    return go_install(TOXIPROXY_MODULE, TOXIPROXY_VERSION, "server",
                      cache_dir() / "bin" / f"toxiproxy-server-{TOXIPROXY_VERSION}", "Toxiproxy")


@dataclass(frozen=True)
class Toxic:
    type: str
    attributes: dict[str, Any] = field(default_factory=dict)
    name: str | None = None
    stream: str = "downstream"
    toxicity: float = 1.0

    def __post_init__(self) -> None:
        if self.type not in TOXIC_TYPES:
            raise ValueError(f"unknown toxic type {self.type!r}; accepted: {', '.join(TOXIC_TYPES)}")
        if self.stream not in ("upstream", "downstream"):
            raise ValueError(f"stream must be upstream or downstream, not {self.stream!r}")
        if not 0.0 <= self.toxicity <= 1.0:
            raise ValueError(f"toxicity must be within [0, 1], not {self.toxicity}")

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"type": self.type, "stream": self.stream, "toxicity": self.toxicity,
                                "attributes": dict(self.attributes)}
        if self.name:
            body["name"] = self.name
        return body

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Toxic":
        return cls(type=data["type"], attributes=dict(data.get("attributes") or {}), name=data.get("name"),
                   stream=data.get("stream", "downstream"), toxicity=float(data.get("toxicity", 1.0)))


@dataclass(frozen=True)
class Proxy:
    name: str
    listen: str
    upstream: str
    enabled: bool = True
    toxics: tuple[Toxic, ...] = ()

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Proxy":
        return cls(name=data["name"], listen=data["listen"], upstream=data["upstream"],
                   enabled=bool(data.get("enabled", True)),
                   toxics=tuple(Toxic.from_json(t) for t in data.get("toxics") or ()))


class ToxiproxyClient:
    """Typed access to one Toxiproxy server's REST API."""

    def __init__(self, base_url: str, timeout_s: float = 10.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            return json_call(self.base_url + path, method, body, self.timeout_s)
        except HttpStatusError as exc:
            raise ClusterError(f"Toxiproxy {method} {path} failed: {exc}") from None
        except OSError as exc:  # urllib's URLError is an OSError
            raise ClusterError(f"Toxiproxy at {self.base_url} did not answer {method} {path}: {exc}",
                               "check that the cluster's toxiproxy process is running") from None

    def version(self) -> str:
        req = urllib.request.Request(self.base_url + "/version")
        with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
            return resp.read().decode().strip()

    def proxies(self) -> dict[str, Proxy]:
        return {name: Proxy.from_json(p) for name, p in (self._call("GET", "/proxies") or {}).items()}

    def proxy(self, name: str) -> Proxy:
        return Proxy.from_json(self._call("GET", f"/proxies/{name}"))

    def populate(self, proxies: list[Proxy]) -> list[Proxy]:
        """Create (or replace) many proxies in one call."""
        body = [{"name": p.name, "listen": p.listen, "upstream": p.upstream, "enabled": p.enabled} for p in proxies]
        result = self._call("POST", "/populate", body)
        return [Proxy.from_json(p) for p in result.get("proxies", [])]

    def create(self, proxy: Proxy) -> Proxy:
        return Proxy.from_json(self._call("POST", "/proxies", {
            "name": proxy.name, "listen": proxy.listen, "upstream": proxy.upstream, "enabled": proxy.enabled}))

    def set_enabled(self, name: str, enabled: bool) -> Proxy:
        """``enabled=False`` closes the listener and every open connection: the link is down."""
        return Proxy.from_json(self._call("POST", f"/proxies/{name}", {"enabled": enabled}))

    def set_upstream(self, name: str, upstream: str) -> Proxy:
        return Proxy.from_json(self._call("POST", f"/proxies/{name}", {"upstream": upstream}))

    def delete(self, name: str) -> None:
        self._call("DELETE", f"/proxies/{name}")

    def add_toxic(self, proxy: str, toxic: Toxic) -> Toxic:
        return Toxic.from_json(self._call("POST", f"/proxies/{proxy}/toxics", toxic.to_json()))

    def remove_toxic(self, proxy: str, toxic_name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic_name}")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._call("POST", "/reset")


def start_toxiproxy(binary: Path, api_port: int, work_dir: Path, pid_dir: Path,
                    proxies: list[Proxy]) -> tuple[ManagedProcess, ToxiproxyClient]:
    """A Toxiproxy server for one cluster (log under ``work_dir/toxiproxy``, pid file in
    ``pid_dir``), answering on ``api_port`` with ``proxies`` created. The work dir is its marker
    (passed as its unused config path, so that reaping recognises it)."""
    directory = work_dir / "toxiproxy"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "proxies.json").write_text("[]")
    argv = [str(binary), "-host", "127.0.0.1", "-port", str(api_port), "-config", str(directory / "proxies.json")]
    process = ManagedProcess("toxiproxy", argv, directory / "toxiproxy.log", pid_dir, marker=str(work_dir))
    process.start()
    client = ToxiproxyClient(f"http://127.0.0.1:{api_port}")
    try:
        wait_until(client.version, 20, 0.1, "toxiproxy did not answer", retry_on=(OSError,))
    except WaitTimeout as exc:
        log = directory / "toxiproxy.log"
        raise ClusterError(str(exc), detail=log.read_text(errors="replace")[-3000:] if log.exists() else "") from None
    client.populate(proxies)
    return process, client
