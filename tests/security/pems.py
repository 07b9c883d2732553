"""PEM files of a throwaway CA (trustme) and a certificate it signed for 127.0.0.1, for
tests that serve HTTPS from real processes on loopback."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import trustme

__all__ = ["Pems", "write_pems"]


@dataclass(frozen=True)
class Pems:
    ca: Path
    cert: Path
    key: Path


def write_pems(folder: Path) -> Pems:
    """A new CA and a certificate it signed for 127.0.0.1, written into `folder`."""
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    paths = Pems(folder / "ca.pem", folder / "server.pem", folder / "server.key")
    ca.cert_pem.write_to_path(str(paths.ca))
    issued.cert_chain_pems[0].write_to_path(str(paths.cert))
    issued.private_key_pem.write_to_path(str(paths.key))
    return paths
