"""The typed Toxiproxy client against the real toxiproxy server (built by `kchaos setup`)."""

import socket
import threading

import pytest

from kchaos.clusters.proxy.toxiproxy import Proxy, Toxic, ToxiproxyClient, ensure_toxiproxy_binary
from kchaos.errors import ClusterError
from kchaos.runtime.ports import allocate_ports
from kchaos.runtime.processes import ManagedProcess
from kchaos.waiting import wait_until


@pytest.fixture
def toxiproxy(tmp_path):
    api, = allocate_ports(1, None)
    argv = [str(ensure_toxiproxy_binary()), "-host", "127.0.0.1", "-port", str(api), "-config", str(tmp_path / "none.json")]
    (tmp_path / "none.json").write_text("[]")
    proc = ManagedProcess("toxiproxy", argv, tmp_path / "t.log", tmp_path / "pids", str(tmp_path))
    proc.start()
    client = ToxiproxyClient(f"http://127.0.0.1:{api}")
    wait_until(client.version, 10, 0.1, "toxiproxy up", retry_on=(OSError,))
    yield client
    proc.kill()


@pytest.fixture
def echo_server():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                data = conn.recv(100)
                conn.sendall(data)

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()


def _roundtrip(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as sock:
        sock.sendall(b"ping")
        return sock.recv(100)


def test_proxy_lifecycle_and_toxics(toxiproxy, echo_server):
    listen, = allocate_ports(1, None)
    created = toxiproxy.populate([Proxy("echo", f"127.0.0.1:{listen}", f"127.0.0.1:{echo_server}")])
    assert [p.name for p in created] == ["echo"]
    assert _roundtrip(listen) == b"ping"

    toxiproxy.set_enabled("echo", False)  # link down: connections are refused
    assert toxiproxy.proxy("echo").enabled is False
    with pytest.raises(OSError):
        _roundtrip(listen)

    toxiproxy.reset()
    assert toxiproxy.proxy("echo").enabled is True
    assert _roundtrip(listen) == b"ping"

    toxic = toxiproxy.add_toxic("echo", Toxic("latency", {"latency": 300, "jitter": 0}, name="slow"))
    assert toxic.type == "latency" and toxiproxy.proxy("echo").toxics[0].attributes["latency"] == 300
    toxiproxy.remove_toxic("echo", "slow")
    assert toxiproxy.proxy("echo").toxics == ()


def test_bad_toxics_are_rejected_before_any_call():
    with pytest.raises(ValueError, match="unknown toxic type"):
        Toxic("lag")
    with pytest.raises(ValueError, match="toxicity"):
        Toxic("latency", toxicity=2)


def test_unreachable_server_is_a_clear_error():
    port, = allocate_ports(1, None)
    with pytest.raises(ClusterError, match="did not answer"):
        ToxiproxyClient(f"http://127.0.0.1:{port}", timeout_s=2).proxies()
