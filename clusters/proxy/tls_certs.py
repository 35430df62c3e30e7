"""Certificates kchaos makes with ``openssl``: a throw-away CA and certificates it signs. Used for
the TLS-terminating front (a certificate the clients trust for the front's own address, when the
user gives none) and by the tests' TLS clusters. RSA keys in PKCS#8 PEM, unencrypted, mode 0600;
the CA's key is deleted once its certificates are signed, so nothing else can be signed by it."""

from __future__ import annotations

import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kchaos.errors import SetupError

VALID_DAYS = 7


@dataclass(frozen=True)
class Issued:
    certificate: Path
    key: Path


def _openssl(*args: str) -> None:
    if not shutil.which("openssl"):
        raise SetupError("making TLS certificates needs openssl", "install Debian's openssl package")
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SetupError(f"openssl {args[0]} failed", detail=proc.stderr[-2000:])


def subject_alt_names(hosts: list[str]) -> str:
    """``IP:`` for addresses, ``DNS:`` for names (a client checks the one it connected to)."""
    out = []
    for host in hosts:
        try:
            ipaddress.ip_address(host)
            out.append(f"IP:{host}")
        except ValueError:
            out.append(f"DNS:{host}")
    return ",".join(out)


def _private_file(path: Path) -> None:
    os.chmod(path, 0o600)


class ThrowawayCA:
    """A CA in ``directory``: ``ca.pem`` (its certificate, what clients trust) and, until
    :meth:`close`, its key."""

    def __init__(self, directory: Path, name: str = "kchaos test CA"):
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.certificate = directory / "ca.pem"
        self._key = directory / "ca.key"
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(self._key), "-out",
                 str(self.certificate), "-days", str(VALID_DAYS), "-subj", f"/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")
        _private_file(self._key)

    def issue(self, name: str, hosts: list[str]) -> Issued:
        """A server (and client) certificate for ``hosts``, signed by this CA."""
        if not self._key.exists():
            raise SetupError(f"the CA in {self.directory} was closed: it signs nothing more")
        key, csr, cert = (self.directory / f"{name}.{ext}" for ext in ("key", "csr", "pem"))
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}")
        _private_file(key)
        ext = self.directory / f"{name}.ext"
        ext.write_text(f"subjectAltName={subject_alt_names(hosts)}\nbasicConstraints=CA:FALSE\n"
                       "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n")
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(self.certificate), "-CAkey", str(self._key),
                 "-CAcreateserial", "-out", str(cert), "-days", str(VALID_DAYS), "-extfile", str(ext))
        csr.unlink(missing_ok=True)
        ext.unlink(missing_ok=True)
        return Issued(cert, key)

    def close(self) -> None:
        """Delete the CA's key (its certificates stay valid; it signs nothing more)."""
        self._key.unlink(missing_ok=True)
        (self.directory / "ca.srl").unlink(missing_ok=True)
