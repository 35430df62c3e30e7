"""Ports on this machine: the one address kchaos binds (``HOST``), one free port, and a set of them
chosen at once (a cluster's ``PortPlan``, docker's published ports, the front, Spark's master)."""

from __future__ import annotations

import socket

from kchaos.errors import ConfigError

HOST = "127.0.0.1"


def allocate_ports(count: int, base_port: int | None) -> list[int]:
    """``count`` distinct free TCP ports on 127.0.0.1.

    With ``base_port`` the ports are ``base_port .. base_port+count-1`` and each must be free;
    otherwise the kernel picks them (all bound at once, so they are distinct).
    """
    if base_port is not None:
        ports = list(range(base_port, base_port + count))
        for port in ports:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((HOST, port))
                except OSError:
                    raise ConfigError(
                        f"port {port} is already in use (cluster.base_port={base_port} needs {count} free ports "
                        f"from {base_port} to {base_port + count - 1})",
                        "choose another cluster.base_port, or leave it unset to pick free ports",
                    ) from None
        return ports
    socks = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((HOST, 0))
            socks.append(sock)
        return [s.getsockname()[1] for s in socks]
    finally:
        for sock in socks:
            sock.close()


def free_port() -> int:
    """One free TCP port on ``HOST``, as the kernel picks it (free when asked: bind it soon)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]
