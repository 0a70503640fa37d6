"""A throwaway PKI for the TLS tests of the real tier, made with the ``openssl`` command.

``make_pki`` writes a CA, a server certificate for the names and addresses the clients dial, a
client certificate (mutual TLS), and the two server certificates a verifying client must refuse:
one of the same CA for a name nobody dials (``wrong_name``: what a hostname check catches) and one
with the right names from another CA (``foreign``: what a CA check catches). Keys are EC P-256
(quick to make); every file is PEM, keys unencrypted and readable by their owner only.

The certificates carry what strict verifiers ask for (Python 3.13's ``VERIFY_X509_STRICT``,
Erlang's ``ssl``): a critical basicConstraints, key identifiers, a keyUsage and an extendedKeyUsage.
"""

from __future__ import annotations

import ipaddress
import os
import pathlib
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from simcluster.realtier.services.procs import ServiceError, run

DAYS = 30


@dataclass(frozen=True)
class KeyPair:
    cert: pathlib.Path
    key: pathlib.Path


@dataclass(frozen=True)
class TLSFiles:
    """What a TLS server is configured with: the CA that verifies its clients, its certificate and key."""

    ca: pathlib.Path
    cert: pathlib.Path
    key: pathlib.Path

    def install(self, directory: pathlib.Path) -> TLSFiles:
        """Copies under fixed names in ``directory`` (a server reloads the same paths)."""
        directory.mkdir(parents=True, exist_ok=True)
        placed = TLSFiles(directory / "ca.crt", directory / "server.crt", directory / "server.key")
        for src, dst in ((self.ca, placed.ca), (self.cert, placed.cert), (self.key, placed.key)):
            tmp = dst.with_suffix(dst.suffix + ".tmp")
            shutil.copyfile(src, tmp)
            tmp.chmod(0o600)
            tmp.replace(dst)
        return placed


def _openssl(*args: str) -> None:
    if shutil.which("openssl") is None:
        raise ServiceError("the openssl command is not installed (Debian package openssl)")
    run(["openssl", *args], env={"OPENSSL_CONF": "/dev/null"}, timeout=60)


def _new_key(path: pathlib.Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path))
    path.chmod(0o600)


def _serial() -> str:
    return "0x" + os.urandom(16).hex()


def _alt_names(dns: Sequence[str], ips: Sequence[str]) -> str:
    names = [f"DNS:{name}" for name in dns]
    names += [f"IP:{ipaddress.ip_address(ip)}" for ip in ips]
    return ",".join(names)


@dataclass(frozen=True)
class CertificateAuthority:
    cert: pathlib.Path
    key: pathlib.Path

    @classmethod
    def create(cls, directory: pathlib.Path, name: str) -> CertificateAuthority:
        directory.mkdir(parents=True, exist_ok=True)
        ca = cls(directory / f"{name}.crt", directory / f"{name}.key")
        _new_key(ca.key)
        conf = directory / f"{name}.cnf"
        conf.write_text(
            "[req]\ndistinguished_name = dn\nprompt = no\n[dn]\n"
            f"CN = {name}\n"
            "[ext]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,cRLSign\n"
            "subjectKeyIdentifier = hash\n"
        )
        _openssl(
            "req", "-x509", "-new", "-sha256", "-days", str(DAYS), "-set_serial", _serial(),
            "-key", str(ca.key), "-config", str(conf), "-extensions", "ext", "-out", str(ca.cert),
        )  # fmt: skip
        return ca

    def issue(
        self,
        directory: pathlib.Path,
        name: str,
        *,
        dns: Sequence[str] = (),
        ips: Sequence[str] = (),
        client: bool = False,
    ) -> KeyPair:
        """A leaf certificate with subject ``CN=name``: a server's for ``dns``/``ips``, or a client's."""
        if not client and not (dns or ips):
            raise ValueError("a server certificate needs a DNS name or an IP address")
        directory.mkdir(parents=True, exist_ok=True)
        pair = KeyPair(directory / f"{name}.crt", directory / f"{name}.key")
        _new_key(pair.key)
        csr = directory / f"{name}.csr"
        conf = directory / f"{name}.cnf"
        ext = [
            "basicConstraints = critical,CA:FALSE",
            "keyUsage = critical,digitalSignature",
            f"extendedKeyUsage = {'clientAuth' if client else 'serverAuth'}",
            "subjectKeyIdentifier = hash",
            "authorityKeyIdentifier = keyid:always",
        ]
        if dns or ips:
            ext.append(f"subjectAltName = {_alt_names(dns, ips)}")
        conf.write_text(
            f"[req]\ndistinguished_name = dn\nprompt = no\n[dn]\nCN = {name}\n[ext]\n" + "\n".join(ext) + "\n"
        )
        _openssl("req", "-new", "-key", str(pair.key), "-config", str(conf), "-out", str(csr))
        _openssl(
            "x509", "-req", "-sha256", "-days", str(DAYS), "-set_serial", _serial(), "-in", str(csr),
            "-CA", str(self.cert), "-CAkey", str(self.key), "-extfile", str(conf), "-extensions", "ext",
            "-out", str(pair.cert),
        )  # fmt: skip
        csr.unlink()
        return pair


@dataclass(frozen=True)
class PKI:
    directory: pathlib.Path
    ca: CertificateAuthority
    server: KeyPair
    """For the names and addresses the clients dial, signed by ``ca``."""
    client: KeyPair
    """A client certificate signed by ``ca`` (subject ``CN=client``)."""
    wrong_name: KeyPair
    """Signed by ``ca`` for ``wrong-name.invalid`` only: a hostname check refuses it."""
    foreign: KeyPair
    """For the right names, signed by ``other_ca``: a CA check refuses it."""
    other_ca: CertificateAuthority
    """A CA no server or client here trusts."""

    def server_files(self, pair: KeyPair | None = None) -> TLSFiles:
        """A server's TLS files: ``ca`` verifies its clients; ``pair`` (default ``server``) is its own."""
        chosen = pair or self.server
        return TLSFiles(self.ca.cert, chosen.cert, chosen.key)


def make_pki(
    directory: pathlib.Path, *, dns: Sequence[str] = ("localhost",), ips: Sequence[str] = ("127.0.0.1",)
) -> PKI:
    ca = CertificateAuthority.create(directory, "ca")
    other = CertificateAuthority.create(directory / "other", "other-ca")
    return PKI(
        directory=directory,
        ca=ca,
        server=ca.issue(directory, "server", dns=dns, ips=ips),
        client=ca.issue(directory, "client", client=True),
        wrong_name=ca.issue(directory, "wrong-name", dns=("wrong-name.invalid",)),
        foreign=other.issue(directory / "other", "server", dns=dns, ips=ips),
        other_ca=other,
    )
