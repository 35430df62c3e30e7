"""kchaos' throw-away CA (clusters/proxy/tls_certs.py) and the front's TLS contexts: a certificate it
issues is accepted for the addresses it names and refused for others; the CA signs nothing once
closed. openssl and Python's ssl module only, on loopback."""

from __future__ import annotations

import socket
import ssl
import stat
import threading

import pytest

from kchaos.clusters.proxy.front import FrontTLS
from kchaos.clusters.proxy.tls_certs import ThrowawayCA, subject_alt_names
from kchaos.errors import SetupError


def test_names_become_dns_and_addresses_ip_entries():
    assert subject_alt_names(["127.0.0.1", "localhost", "::1"]) == "IP:127.0.0.1,DNS:localhost,IP:::1"


def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, server_hostname: str) -> str:
    """One TLS handshake over a loopback socket pair; the client's error, or 'ok'."""
    a, b = socket.socketpair()
    failures: list[Exception] = []

    def serve() -> None:
        try:
            with server_ctx.wrap_socket(a, server_side=True) as tls:
                tls.recv(1)
        except (ssl.SSLError, OSError) as exc:
            failures.append(exc)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_ctx.wrap_socket(b, server_hostname=server_hostname) as tls:
            tls.sendall(b"x")
        return "ok"
    except ssl.SSLCertVerificationError as exc:
        return exc.verify_message
    finally:
        b.close()
        thread.join(5)
        a.close()


def test_the_front_certificate_is_trusted_for_its_address_only(tmp_path):
    authority = ThrowawayCA(tmp_path / "ca")
    issued = authority.issue("front", ["127.0.0.1", "localhost"])
    authority.close()
    assert stat.S_IMODE(issued.key.stat().st_mode) == 0o600
    assert not (tmp_path / "ca" / "ca.key").exists()  # it signs nothing more
    with pytest.raises(SetupError, match="signs nothing more"):
        authority.issue("other", ["127.0.0.1"])
    front = FrontTLS(str(issued.certificate), str(issued.key))
    client = ssl.create_default_context(cafile=str(authority.certificate))
    assert _handshake(front.listen, client, "127.0.0.1") == "ok"
    assert _handshake(front.listen, client, "localhost") == "ok"
    assert "mismatch" in _handshake(front.listen, client, "10.9.9.9").lower()
    stranger = ssl.create_default_context(cafile=str(ThrowawayCA(tmp_path / "other").certificate))
    assert "unable to get local issuer" in _handshake(front.listen, stranger, "127.0.0.1")


def test_the_fronts_upstream_context_checks_names_unless_the_clients_do_not(tmp_path):
    authority = ThrowawayCA(tmp_path / "ca")
    issued = authority.issue("front", ["127.0.0.1"])
    checking = FrontTLS(str(issued.certificate), str(issued.key), upstream_ca=str(authority.certificate))
    assert checking.upstream.check_hostname and checking.upstream.verify_mode == ssl.CERT_REQUIRED
    lenient = FrontTLS(str(issued.certificate), str(issued.key), upstream_ca=str(authority.certificate),
                       check_hostname=False)
    assert not lenient.upstream.check_hostname and lenient.upstream.verify_mode == ssl.CERT_REQUIRED
