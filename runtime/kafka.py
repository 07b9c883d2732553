"""Kafka client settings: the one place every statefed Kafka client gets its librdkafka
configuration from, so TLS and SASL reach all of them.

A client's configuration is, in order, each later layer winning:

1. the client's own defaults (linger, fetch wait, client id, ...);
2. the user's properties: a client properties file, `STATEFED_KAFKA_CONFIG=path`, in the
   format Kafka's tools take with `--command-config`, then `STATEFED_KAFKA_*` variables
   (`STATEFED_KAFKA_SECURITY_PROTOCOL` is `security.protocol`; lowercase, `_` -> `.`),
   which win over the file; `STATEFED_KAFKA_<KEY>_FILE` reads the value from a file
   (`STATEFED_KAFKA_SASL_PASSWORD_FILE` for `sasl.password`, next to
   `STATEFED_KAFKA_SASL_USERNAME` and `STATEFED_KAFKA_SASL_MECHANISM`);
3. the settings the client needs to be correct (`FIXED_KEYS`: `bootstrap.servers` from
   `STATEFED_BOOTSTRAP`, group, partitioner, commits); the user cannot set those, and is
   told so when the settings are read.

The properties file: one `key=value` (or `key: value`) a line, `#` and `!` start comment
lines, blank lines are skipped, a line ending in `\\` continues on the next. Keys of
Java clients that librdkafka does not know (`sasl.jaas.config`, truststores) are refused
with the librdkafka keys to use instead. Values of secret keys are never shown: `repr`,
logs and error messages go through `redacted`. `connection_hint` turns a client's
failure into the settings to check. `KafkaSettings.connector_options` translates the
settings for Spark's official Kafka connector, whose Java client spells some differently.
Every client's log lines go through `ClientLog`, into the part's log format, repeats held.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from runtime.config import ConfigError

__all__ = [
    "CLIENT_LOG",
    "FIXED_KEYS",
    "KAFKA_CLIENT_LOGGER",
    "ClientLog",
    "ErrorTrap",
    "KafkaClientConfig",
    "KafkaConnectionError",
    "KafkaProperties",
    "KafkaSettings",
    "connection_hint",
    "parse_properties",
    "redacted",
]

KAFKA_CLIENT_LOGGER = __name__  # where the clients' log lines go (`ErrorTrap.log`)
log = logging.getLogger(KAFKA_CLIENT_LOGGER)

CONFIG_VARIABLE = "STATEFED_KAFKA_CONFIG"
BOOTSTRAP_VARIABLE = "STATEFED_BOOTSTRAP"
_PREFIX = "STATEFED_KAFKA_"
_FILE_SUFFIX = "_FILE"
_HIDDEN = "***"
# librdkafka property names whose values are secrets: passwords (sasl.password,
# ssl.key.password, ssl.keystore.password) and passphrases
# (sasl.oauthbearer.assertion.private.key.passphrase), client secrets, OAUTHBEARER's
# unsecured-JWT config, and PEMs (ssl.key.pem, ...assertion.private.key.pem)
_SECRET = re.compile(
    r"password|passphrase|secret|jaas|token|oauthbearer\.config|\.pem$", re.IGNORECASE
)
# a client's instance number in its log lines (`rdkafka#consumer-3`)
_INSTANCE = re.compile(r"#(consumer|producer)-\d+")
_KINDS_KEPT = 256  # kinds of log line remembered before those not seen for a while go

# set per client by statefed (docs/operations.md, "Kafka client settings"); a user value
# would break it
FIXED_KEYS: Mapping[str, str] = {
    "bootstrap.servers": "set STATEFED_BOOTSTRAP instead",
    "group.id": "the node group is STATEFED_GROUP_ID; other clients never join a group",
    "partitioner": "murmur2_random puts a key where schema.partition_for says",
    "enable.idempotence": "producers are idempotent: retries keep each partition's order",
    "partition.assignment.strategy": "cooperative-sticky revokes only the partitions that move",
    "session.timeout.ms": "the node group's is 6000 ms",
    "enable.auto.commit": "offsets live in the node's stores and Spark's checkpoint",
    "enable.auto.offset.store": "offsets live in the node's stores and Spark's checkpoint",
    "auto.offset.reset": "a restore reads from the earliest offset",
    "enable.partition.eof": "restores and end-offset probes rely on end-of-partition events",
}

# Java client keys and the librdkafka keys that do their job
_JAVA_ONLY: Mapping[str, str] = {
    "sasl.jaas.config": "sasl.username and sasl.password (PLAIN, SCRAM-SHA-256/512)",
    "ssl.truststore.location": "ssl.ca.location (a PEM file of the CA)",
    "ssl.truststore.password": "ssl.ca.location (a PEM file needs no password)",
    "ssl.truststore.type": "ssl.ca.location (a PEM file)",
    "ssl.truststore.certificates": "ssl.ca.location (a PEM file)",
    "ssl.keystore.type": "ssl.certificate.location and ssl.key.location (PEM files)",
    "ssl.keystore.key": "ssl.key.location (a PEM file)",
    "ssl.keystore.certificate.chain": "ssl.certificate.location (a PEM file)",
    "sasl.login.callback.handler.class": "sasl.oauthbearer.* (OIDC); AWS IAM is not supported",
    "sasl.client.callback.handler.class": "sasl.oauthbearer.* (OIDC); AWS IAM is not supported",
}
# librdkafka keys Spark's official connector (a Java client) spells differently
_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
_SECURITY_KEYS = ("security.protocol", "ssl.ca.location", "sasl.mechanism", "sasl.mechanisms")


class KafkaConnectionError(RuntimeError):
    """A client could not reach Kafka or was refused; the message names what to check."""


Schedule = Callable[[float, Callable[[], None]], None]


def _daemon_timer(delay_s: float, call: Callable[[], None]) -> None:
    """`call` on a thread of its own after `delay_s` (a daemon: it never holds up an exit)."""
    timer = threading.Timer(delay_s, call)
    timer.daemon = True
    timer.start()


@dataclass
class _Seen:
    """A kind of line: when one was last shown, how many were held since, the last held."""

    at: float
    held: int = 0
    level: int = logging.INFO
    last: str = ""


class ClientLog:
    """librdkafka's log lines as records of the `runtime.kafka` logger, so they reach the
    part's log format (text or JSON) rather than stderr, with repeats held back: while a
    broker is down each client logs a failed connection every few hundred milliseconds.
    A line of the same kind (level, facility, client and broker thread) as one shown less
    than `every_s` ago is counted, not shown; the next one shown says how many were held.
    When none comes, the last line held is shown once `every_s` have passed since the
    one shown, with the count (`schedule` runs that check: a timer thread), so a burst
    that ends is summed up too.

    It is the `logger` of every client `KafkaSettings.client` configures. A client hands
    its lines over when it is polled (`poll`, `consume`, `flush`); lines of a client
    closed before that are dropped with it."""

    def __init__(
        self,
        logger: logging.Logger = log,
        every_s: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        schedule: Schedule = _daemon_timer,
    ) -> None:
        self._logger = logger
        self._every_s = every_s
        self._clock = clock
        self._schedule = schedule
        self._lock = threading.Lock()  # clients are polled from several threads
        self._shown: dict[tuple[object, ...], _Seen] = {}

    @property
    def kinds(self) -> int:
        """How many kinds of line are remembered (bounded: old ones are forgotten)."""
        return len(self._shown)

    def log(self, level: int, message: str, *args: object) -> None:
        """The `logging.Logger.log` librdkafka's lines arrive through (its `message` is
        `"%s [%s] %s"`: facility, client name, text)."""
        if not self._logger.isEnabledFor(level):
            return
        text = message % args if args else message
        held = self._held_before(_kind(level, text), level, text)
        if held is None:
            return
        if held:
            text += f" ({held} more like it in the last {self._every_s:.0f} s not shown)"
        self._logger.log(level, "%s", text)

    def _held_before(self, kind: tuple[object, ...], level: int, text: str) -> int | None:
        """How many lines of `kind` were held since it was last shown; None: hold this one."""
        now = self._clock()
        with self._lock:
            seen = self._shown.get(kind)
            if seen is not None and now - seen.at < self._every_s:
                seen.held, seen.level, seen.last = seen.held + 1, level, text
                if seen.held == 1:  # the first held since it was shown: sum them up later
                    since = seen.at
                    self._schedule(since + self._every_s - now, lambda: self._sum_up(kind, since))
                return None
            if len(self._shown) >= _KINDS_KEPT:
                self._forget_before(now - self._every_s)
            self._shown[kind] = _Seen(now)
            return 0 if seen is None else seen.held

    def _sum_up(self, kind: tuple[object, ...], since: float) -> None:
        """Show the last line of `kind` held since one was shown at `since`, with the
        count, unless a line of `kind` was shown after that one."""
        with self._lock:
            seen = self._shown.get(kind)
            if seen is None or seen.at != since or not seen.held:
                return
            self._shown[kind] = _Seen(self._clock())
        self._logger.log(
            seen.level,
            "%s (the last of %d like it held back in the last %.0f s)",
            seen.last,
            seen.held,
            self._every_s,
        )

    def _forget_before(self, oldest: float) -> None:
        # clients come and go (readers open a new one after each failure): drop old kinds,
        # but not those with lines held, which `_sum_up` still has to show
        self._shown = {k: s for k, s in self._shown.items() if s.at >= oldest or s.held}


def _kind(level: int, text: str) -> tuple[object, ...]:
    """What makes two lines alike: level, facility, client and broker thread, the text up
    to the first `]:` (`FAIL [rdkafka#consumer-1] [thrd:host:9092/bootstrap]: ...`), less
    the client's instance number (a reader that retries opens a new client each time)."""
    head, _, _ = text.partition("]:")
    return (level, _INSTANCE.sub(r"#\1", head))


CLIENT_LOG = ClientLog()  # the process's one: a kind repeats across threads and clients


class ErrorTrap:
    """A client's `error_cb` and `logger` that keeps what tells most about a failure: a TLS
    or authentication error over the transport errors that follow it. librdkafka reports a
    failed TLS handshake only as a log line, so log lines are looked at too (and passed
    on to the `runtime.kafka` logger)."""

    def __init__(self) -> None:
        self.error: KafkaError | str | None = None

    def __call__(self, error: KafkaError) -> None:
        self._keep(error)

    def log(self, level: int, message: str, *args: object) -> None:
        """The `logging.Logger.log` librdkafka's log lines arrive through (passed on to
        `CLIENT_LOG`)."""
        CLIENT_LOG.log(level, message, *args)
        text = message % args if args else message
        if _is_security(None, text):
            self._keep(text)

    def _keep(self, error: KafkaError | str) -> None:
        if self.error is None or not _is_security(*_error_of(self.error)):
            self.error = error


def redacted(properties: Mapping[str, Any]) -> dict[str, Any]:
    """`properties` with the values of secret keys (passwords, secrets, JAAS) hidden."""
    return {k: _HIDDEN if _SECRET.search(k) else v for k, v in properties.items()}


def parse_properties(text: str, origin: str = CONFIG_VARIABLE) -> dict[str, str]:
    """The `key=value` pairs of a client properties file; errors name `origin` and the line."""
    properties: dict[str, str] = {}
    pending, first = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        first = first if pending else number
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        key, value = _split(line)
        if not key:  # its text is not shown: it may be a secret's line
            raise ConfigError(origin, f"line {first} is not key=value (or key: value)")
        properties[key] = value
    if pending:
        raise ConfigError(origin, "the last line ends in '\\' but nothing follows")
    return properties


def _split(line: str) -> tuple[str, str]:
    at = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if at < 0:
        return "", ""
    return line[:at].strip(), line[at + 1 :].strip()


@dataclass(frozen=True)
class KafkaProperties:
    """The user's librdkafka properties (file, then variables); secrets hidden in `repr`."""

    values: tuple[tuple[str, str], ...] = ()
    # the properties file they were read from (None: variables only)
    file: Path | None = None

    def __repr__(self) -> str:
        return f"KafkaProperties({redacted(dict(self.values))!r}, file={self.file!r})"

    def __post_init__(self) -> None:
        for key, _ in self.values:
            _check_key(key, f"{_PREFIX}{key.upper().replace('.', '_')}")

    @property
    def mapping(self) -> dict[str, str]:
        return dict(self.values)

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> KafkaProperties:
        """Read `STATEFED_KAFKA_CONFIG` and every `STATEFED_KAFKA_*` variable."""
        path_text = environ.get(CONFIG_VARIABLE, "").strip()
        path = Path(path_text) if path_text else None
        properties: dict[str, str] = {}
        if path is not None:
            properties = parse_properties(_read(path, CONFIG_VARIABLE), CONFIG_VARIABLE)
            for key in properties:
                _check_key(key, f"{CONFIG_VARIABLE} ({path})")
            properties = _java_compatible(properties)
        for variable in sorted(environ):
            if not variable.startswith(_PREFIX) or variable == CONFIG_VARIABLE:
                continue
            raw = environ[variable]
            if raw == "":
                continue  # the rule of every variable: set empty = unset
            name = variable[len(_PREFIX) :]
            if name.endswith(_FILE_SUFFIX):
                name, raw = name[: -len(_FILE_SUFFIX)], _read(Path(raw.strip()), variable)
            key = name.lower().replace("_", ".")
            _check_key(key, variable)
            if not raw.strip():
                raise ConfigError(variable, "is blank (or names an empty file): unset it")
            properties[key] = raw.strip()
        return cls(tuple(sorted(properties.items())), path)


def _read(path: Path, variable: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(variable, f"cannot read {str(path)!r}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            variable,
            f"{str(path)!r} is no UTF-8 text (a Java keystore? librdkafka reads PEM files: "
            "name one in ssl.ca.location, ssl.certificate.location, ssl.key.location)",
        ) from exc


def _check_key(key: str, origin: str) -> None:
    if not key or not re.fullmatch(r"[a-z0-9][a-z0-9._-]*", key):
        raise ConfigError(origin, f"{key!r} is no librdkafka property name")
    if key in FIXED_KEYS:
        raise ConfigError(origin, f"sets {key}, which statefed sets itself: {FIXED_KEYS[key]}")
    if key in _JAVA_ONLY:
        raise ConfigError(
            origin,
            f"{key} is a Java client setting librdkafka does not know; use {_JAVA_ONLY[key]}",
        )


def _java_compatible(properties: dict[str, str]) -> dict[str, str]:
    """Java's spellings in a properties file that mean the same in librdkafka."""
    algorithm = properties.get("ssl.endpoint.identification.algorithm")
    if algorithm == "":  # Java's "no host name check"; librdkafka says none
        properties["ssl.endpoint.identification.algorithm"] = "none"
    return properties


@dataclass(frozen=True)
class KafkaSettings:
    """Where Kafka is and how to reach it: builds every client's librdkafka configuration."""

    bootstrap: str
    properties: KafkaProperties = field(default_factory=KafkaProperties)

    @classmethod
    def of(cls, target: str | KafkaSettings) -> KafkaSettings:
        """`target` itself, or plain bootstrap servers with no further settings."""
        return target if isinstance(target, KafkaSettings) else cls(target)

    def client(
        self, fixed: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """A client's configuration: `defaults`, then the user's properties, then `fixed`
        (what the client needs to be correct, which nothing overrides). Its log lines go
        to `CLIENT_LOG` unless `fixed` names another `logger`."""
        return {
            "logger": CLIENT_LOG,
            **(defaults or {}),
            **self.properties.mapping,
            **(fixed or {}),
            "bootstrap.servers": self.bootstrap,
        }

    @property
    def secured(self) -> bool:
        """Whether any setting beyond the bootstrap servers is given."""
        return bool(self.properties.values) or self.properties.file is not None

    def connector_options(self) -> dict[str, str]:
        """Options of Spark's Kafka connector (a Java client): `kafka.<key>`, with
        SASL's user and password as `sasl.jaas.config` and a PEM CA as a PEM truststore."""
        java = self.properties.mapping
        mechanism = java.pop("sasl.mechanisms", None) or java.get("sasl.mechanism")
        if mechanism is not None:
            java["sasl.mechanism"] = mechanism
        user, password = java.pop("sasl.username", None), java.pop("sasl.password", None)
        if user is not None or password is not None:
            module = _JAAS_MODULES.get((mechanism or "PLAIN").upper())
            if module is None:
                raise ConfigError(
                    "STATEFED_KAFKA_SASL_MECHANISM",
                    f"{mechanism} with a user and password is not one the official connector "
                    f"takes from statefed; use one of {', '.join(_JAAS_MODULES)}",
                )
            java["sasl.jaas.config"] = (
                f'{module} required username="{_jaas(user)}" password="{_jaas(password)}";'
            )
        ca = java.pop("ssl.ca.location", None)
        if ca is not None:
            java |= {"ssl.truststore.type": "PEM", "ssl.truststore.location": ca}
        if java.get("ssl.endpoint.identification.algorithm") == "none":
            java["ssl.endpoint.identification.algorithm"] = ""
        options = {f"kafka.{k}": v for k, v in java.items()}
        return {"kafka.bootstrap.servers": self.bootstrap, **options}

    def hint(self, error: object = None) -> str:
        """Which settings to check after a client failed with `error`."""
        return connection_hint(self, error)


def _jaas(value: str | None) -> str:
    return (value or "").replace("\\", "\\\\").replace('"', '\\"')


def connection_hint(settings: KafkaSettings, error: object = None) -> str:
    """What to check when a client of `settings` failed with `error` (a KafkaError, a
    KafkaException or its text): the security setting the error points at, else where
    the bootstrap servers and the security settings are configured."""
    code, text = _error_of(error)
    given = settings.properties.mapping
    if _is_unverified(text):
        return (
            "the broker's certificate could not be verified: set ssl.ca.location "
            f"(STATEFED_KAFKA_SSL_CA_LOCATION, or ssl.ca.location= in {CONFIG_VARIABLE}; now "
            f"{given.get('ssl.ca.location', 'unset: the system CAs')}) to a PEM file of the CA "
            f"that signed it, which must name the host of {BOOTSTRAP_VARIABLE} "
            f"({settings.bootstrap})"
        )
    if _is_auth(code, text):
        return (
            "an authentication error: check sasl.mechanism (now "
            f"{given.get('sasl.mechanism', given.get('sasl.mechanisms', 'unset'))}), "
            f"sasl.username and sasl.password ({_where()})"
        )
    if _is_tls(code, text):
        return (
            "a TLS error: check ssl.ca.location (the CA that signed the broker's certificate), "
            "ssl.certificate.location and ssl.key.location for client certificates, and "
            f"that security.protocol (now {given.get('security.protocol', 'PLAINTEXT')}) is "
            f"what the listener at {settings.bootstrap} speaks ({_where()})"
        )
    hint = f"check {BOOTSTRAP_VARIABLE} ({settings.bootstrap}) is where the brokers listen"
    if settings.secured:
        shown = {k: v for k, v in redacted(given).items() if k in _SECURITY_KEYS}
        hint += (
            f", and the security settings {shown} ({_where()}): security.protocol must be "
            "what that listener speaks, ssl.ca.location the CA that signed its certificate, "
            "sasl.* the mechanism and credentials it accepts"
        )
    else:
        hint += (
            f"; a secured cluster also needs {CONFIG_VARIABLE} or "
            "STATEFED_KAFKA_SECURITY_PROTOCOL and its ssl.* or sasl.* settings"
        )
    return hint


def _is_tls(code: int | None, text: str) -> bool:
    tls_words = re.search(r"SSL|TLS|(?i:certificate|handshake)", text.replace("SASL_SSL", ""))
    return code == KafkaError._SSL or bool(tls_words)


def _is_unverified(text: str) -> bool:
    # OpenSSL's words for an unknown CA and for a certificate naming another host alike
    return "certificate verify failed" in text


def _is_auth(code: int | None, text: str) -> bool:
    codes = (KafkaError._AUTHENTICATION, KafkaError.SASL_AUTHENTICATION_FAILED)
    return code in codes or bool(re.search(r"SASL|(?i:authenticat)", text))


def _is_security(code: int | None, text: str) -> bool:
    return _is_tls(code, text) or _is_auth(code, text)


def _where() -> str:
    return f"{CONFIG_VARIABLE} or STATEFED_KAFKA_* variables"


def _error_of(error: object) -> tuple[int | None, str]:
    if isinstance(error, KafkaException) and error.args and isinstance(error.args[0], KafkaError):
        error = error.args[0]
    if isinstance(error, KafkaError):
        return error.code(), error.str()
    return None, "" if error is None else str(error)


class KafkaClientConfig:
    """Mixin of a part's configuration holding `bootstrap` and `kafka_properties`
    (a `settings_group(KafkaProperties.from_env, ...)` field): `kafka` joins them."""

    bootstrap: str
    kafka_properties: KafkaProperties

    @property
    def kafka(self) -> KafkaSettings:
        """The Kafka client settings of every client the part builds."""
        return KafkaSettings(self.bootstrap, self.kafka_properties)
