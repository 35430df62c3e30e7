"""The message proxy's process: ``python -m kchaos.clusters.proxy --control PORT --events FILE
--route ...`` (the local backend starts it; the external backend starts it in front mode)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from kchaos.clusters.proxy.exchange import Route
from kchaos.clusters.proxy.front import KEY_PASSWORD_ENV, FrontTLS
from kchaos.clusters.proxy.server import serve
from kchaos.runtime.ports import HOST


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kchaos.clusters.proxy")
    parser.add_argument("--route", action="append", default=[],
                        help="BROKER=LISTEN:UPSTREAM, or SRC>DST=LISTEN:UPSTREAM between brokers (ports on 127.0.0.1)")
    parser.add_argument("--control", type=int, required=True, help="port of the HTTP control API")
    parser.add_argument("--events", type=Path, required=True, help="JSON-lines file of affected requests")
    parser.add_argument("--front-bootstrap", help="front mode: LISTEN=HOST:PORT[,HOST:PORT...], the cluster's "
                        "bootstrap servers behind this proxy's bootstrap port; broker addresses in answers are rewritten")
    parser.add_argument("--advertised-host", default=HOST, help="front mode: the host clients are told")
    parser.add_argument("--source-address", help="front mode: the local address connections to the brokers come from")
    parser.add_argument("--tls-cert", help="front mode, TLS: the certificate (PEM) the front shows its clients")
    parser.add_argument("--tls-key", help="front mode, TLS: its key (PEM)")
    parser.add_argument("--upstream-ca", help="front mode, TLS: the CA (PEM) the brokers' certificates are checked with "
                        "(default: the system's)")
    parser.add_argument("--upstream-cert", help="front mode, TLS: a client certificate (PEM) shown to the brokers")
    parser.add_argument("--upstream-key", help=f"its key (PEM; a password from ${KEY_PASSWORD_ENV})")
    parser.add_argument("--no-hostname-check", action="store_true", help="front mode, TLS: do not check the brokers' "
                        "host names (the clients' ssl.endpoint.identification.algorithm = none)")
    args = parser.parse_args(argv)
    if (args.tls_cert is None) != (args.tls_key is None) or (args.tls_cert and not args.front_bootstrap):
        parser.error("--tls-cert and --tls-key go together, in front mode")
    tls = (FrontTLS(args.tls_cert, args.tls_key, args.upstream_ca, args.upstream_cert, args.upstream_key,
                    not args.no_hostname_check) if args.tls_cert else None)
    asyncio.run(serve([Route.parse(r) for r in args.route], args.control, args.events, args.front_bootstrap,
                      args.advertised_host, args.source_address, tls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
