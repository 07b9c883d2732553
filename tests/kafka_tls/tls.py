"""Apache Kafka whose only client listener speaks TLS (and SASL PLAIN over it, if asked),
for the Kafka TLS tests.

The certificates come from a throwaway CA (trustme): the broker's names 127.0.0.1 and
localhost, its key and chain in a PEM keystore, the CA in a PEM truststore (the broker is
its own client on the inter-broker listener, which is the same one).
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import psutil
import trustme
from cryptography.hazmat.primitives import serialization

from runtime.kafka import KafkaProperties, KafkaSettings
from tooling.broker import KafkaBroker

__all__ = ["TlsBroker", "client_groups"]

# the JAAS module of SASL PLAIN, whose `user_<name>` options are the broker's users
_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


class TlsBroker:
    """One Kafka broker on TLS (SSL), or on SASL_SSL with PLAIN when `sasl`, owned by this
    handle; its certificates and log go in `directory`."""

    def __init__(self, directory: Path, sasl: bool = False) -> None:
        self.directory = directory
        self.ca = directory / "ca.pem"
        self._keystore = directory / "server.pem"  # the key (PKCS#8) and certificate chain
        self.protocol = "SASL_SSL" if sasl else "SSL"
        self.user = "statefed"
        self.password = secrets.token_hex(8) if sasl else ""
        self.broker = KafkaBroker(
            log_path=directory / "broker.log",
            protocol=self.protocol,
            settings=self._broker_settings(),
            client=KafkaProperties.from_env(self.client_env()).mapping,
        )

    @property
    def bootstrap(self) -> str:
        """The TLS address: the broker's one client listener."""
        return self.broker.bootstrap

    @property
    def port(self) -> int:
        return self.broker.port

    def client_env(self, password: str | None = None) -> dict[str, str]:
        """The variables that make a part's Kafka clients reach this broker (with
        `password` instead of the user's own, to be refused)."""
        env = {
            "STATEFED_KAFKA_SECURITY_PROTOCOL": self.protocol,
            "STATEFED_KAFKA_SSL_CA_LOCATION": str(self.ca),
        }
        if self.password:
            env |= {
                "STATEFED_KAFKA_SASL_MECHANISM": "PLAIN",
                "STATEFED_KAFKA_SASL_USERNAME": self.user,
                "STATEFED_KAFKA_SASL_PASSWORD": self.password if password is None else password,
            }
        return env

    def settings(self, password: str | None = None) -> KafkaSettings:
        return KafkaSettings(self.bootstrap, KafkaProperties.from_env(self.client_env(password)))

    def _broker_settings(self) -> dict[str, str]:
        tls = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(self._keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca),
        }
        if not self.password:
            return tls
        # the broker logs in as the same user on its inter-broker listener
        jaas = (
            f'{_PLAIN} required username="{self.user}" password="{self.password}" '
            f'user_{self.user}="{self.password}";'
        )
        return tls | {
            "sasl.enabled.mechanisms": "PLAIN",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_ssl.plain.sasl.jaas.config": jaas,
        }

    def start(self, timeout_s: float = 60.0) -> None:
        """Write the certificates, start the broker and wait until it answers over TLS."""
        self._write_certificates()
        self.broker.start(timeout_s)

    def _write_certificates(self) -> None:
        ca = trustme.CA()
        ca.cert_pem.write_to_path(str(self.ca))
        server = ca.issue_cert("127.0.0.1", "localhost")
        # Kafka's PEM keystore reads PKCS#8 keys only; trustme writes OpenSSL's own format
        key = serialization.load_pem_private_key(server.private_key_pem.bytes(), None)
        pkcs8 = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        chain = b"".join(blob.bytes() for blob in server.cert_chain_pems)
        self._keystore.write_bytes(pkcs8 + chain)

    def stop(self) -> None:
        self.broker.stop()


def client_groups(port: int) -> set[int]:
    """Process groups of the processes holding an established TCP connection to
    127.0.0.1:`port` (a part's group is its pid: each runs in its own session)."""
    groups = set()
    for connection in psutil.net_connections(kind="tcp"):
        remote = connection.raddr
        if not remote or remote.port != port or connection.status != psutil.CONN_ESTABLISHED:
            continue
        if remote.ip != "127.0.0.1" or connection.pid is None:
            continue
        try:
            groups.add(os.getpgid(connection.pid))
        except ProcessLookupError:  # closed and gone since the listing
            continue
    return groups
