"""TLS settings shared by the gateway and the nodes: a server's certificate and key (both or
neither, files that exist), and the client context that verifies peers against a CA.

Configuration errors name the variable (`runtime.config.ConfigError`); the certificates
themselves are loaded by uvicorn (server) and `ssl` (client), which report what is wrong
with their content.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from runtime.config import ConfigError

__all__ = ["check_ca", "check_pair", "client_context"]


def check_pair(
    cert: Path | None,
    key: Path | None,
    variables: tuple[str, str],
    error: type[ConfigError] = ConfigError,
) -> None:
    """Refuse a certificate without its key (or the reverse) and files that do not exist;
    `variables` names the certificate's variable, then the key's."""
    cert_variable, key_variable = variables
    if (cert is None) != (key is None):
        given, missing = (cert_variable, key_variable) if key is None else variables[::-1]
        raise error(missing, f"must be set too when {given} is: TLS takes both or neither")
    for path, variable in ((cert, cert_variable), (key, key_variable)):
        if path is not None and not path.is_file():
            raise error(variable, f"no such file: {str(path)!r}")


def check_ca(ca: Path | None, variable: str, error: type[ConfigError] = ConfigError) -> None:
    """Refuse a CA file that does not exist."""
    if ca is not None and not ca.is_file():
        raise error(variable, f"no such file: {str(ca)!r}")


def client_context(ca: Path | None) -> ssl.SSLContext:
    """A client context verifying servers against `ca` (a PEM file), or against the
    system's trust store when None; host names are checked."""
    return ssl.create_default_context(cafile=None if ca is None else str(ca))
