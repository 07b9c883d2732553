"""Kafka client settings (runtime.kafka): the properties file, the variables, secrets from
files, refused keys, redaction and the hints a failed client gives."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError

from runtime.config import ConfigError
from runtime.kafka import (
    CLIENT_LOG,
    KafkaProperties,
    KafkaSettings,
    connection_hint,
    parse_properties,
    redacted,
)

SASL = {
    "STATEFED_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
    "STATEFED_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512",
    "STATEFED_KAFKA_SASL_USERNAME": "statefed",
    "STATEFED_KAFKA_SASL_PASSWORD": "hunter2",
}


def test_the_properties_file_format() -> None:
    text = (
        "# Kafka's client.properties\n"
        "! also a comment\n"
        "\n"
        "security.protocol=SASL_SSL\n"
        "  sasl.mechanism = PLAIN  \n"
        "sasl.username: alice\n"
        "sasl.password=a=b\\\n"
        "    c\n"
        "ssl.endpoint.identification.algorithm=\n"
    )
    assert parse_properties(text) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": "a=bc",
        "ssl.endpoint.identification.algorithm": "",
    }


def test_a_line_that_is_no_property_is_refused_with_its_number() -> None:
    with pytest.raises(ConfigError, match=r"STATEFED_KAFKA_CONFIG: line 2 is not key=value"):
        parse_properties("a=b\noops\n")


def test_variables_win_over_the_file(tmp_path: Path) -> None:
    file = tmp_path / "client.properties"
    file.write_text("security.protocol=SSL\nssl.ca.location=/etc/ca.pem\n")
    properties = KafkaProperties.from_env(
        {
            "STATEFED_KAFKA_CONFIG": str(file),
            "STATEFED_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "STATEFED_KAFKA_SASL_USERNAME": "",  # empty = unset, as for every variable
        }
    )
    assert properties.mapping == {"security.protocol": "SASL_SSL", "ssl.ca.location": "/etc/ca.pem"}
    assert properties.file == file


def test_a_secret_comes_from_a_file(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret\n")
    properties = KafkaProperties.from_env({"STATEFED_KAFKA_SASL_PASSWORD_FILE": str(secret)})
    assert properties.mapping == {"sasl.password": "s3cret"}
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ConfigError, match="STATEFED_KAFKA_SASL_PASSWORD_FILE: is blank"):
        KafkaProperties.from_env({"STATEFED_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "empty")})
    with pytest.raises(ConfigError, match="STATEFED_KAFKA_SASL_PASSWORD_FILE: cannot read"):
        KafkaProperties.from_env({"STATEFED_KAFKA_SASL_PASSWORD_FILE": str(tmp_path / "none")})
    keystore = tmp_path / "client.jks"
    keystore.write_bytes(b"\xfe\xed\xfe\xed\x00\x00\x00\x02")
    with pytest.raises(ConfigError, match=r"STATEFED_KAFKA_CONFIG: .* is no UTF-8 text"):
        KafkaProperties.from_env({"STATEFED_KAFKA_CONFIG": str(keystore)})


def test_a_line_that_is_not_key_value_is_named_by_its_number_never_shown(tmp_path: Path) -> None:
    file = tmp_path / "client.properties"
    file.write_text("security.protocol=SASL_SSL\nsasl.password  hunter2\n")
    with pytest.raises(ConfigError, match="line 2 is not key=value") as caught:
        KafkaProperties.from_env({"STATEFED_KAFKA_CONFIG": str(file)})
    assert "hunter2" not in str(caught.value)


def test_java_only_keys_are_refused_with_the_librdkafka_keys_to_use(tmp_path: Path) -> None:
    file = tmp_path / "client.properties"
    file.write_text('sasl.jaas.config=...PlainLoginModule required username="a" password="b";\n')
    with pytest.raises(ConfigError, match=r"use sasl\.username and sasl\.password") as caught:
        KafkaProperties.from_env({"STATEFED_KAFKA_CONFIG": str(file)})
    assert caught.value.variable.startswith("STATEFED_KAFKA_CONFIG")
    assert 'password="b"' not in str(caught.value)
    with pytest.raises(ConfigError, match=r"STATEFED_KAFKA_SSL_TRUSTSTORE_LOCATION: .*ssl\.ca"):
        KafkaProperties.from_env({"STATEFED_KAFKA_SSL_TRUSTSTORE_LOCATION": "/x.jks"})


def test_settings_statefed_fixes_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"STATEFED_KAFKA_ENABLE_AUTO_COMMIT: sets enable\.auto"):
        KafkaProperties.from_env({"STATEFED_KAFKA_ENABLE_AUTO_COMMIT": "true"})
    with pytest.raises(ConfigError, match="set STATEFED_BOOTSTRAP instead"):
        KafkaProperties.from_env({"STATEFED_KAFKA_BOOTSTRAP_SERVERS": "x:9092"})


def test_a_client_gets_defaults_then_the_user_settings_then_its_fixed_ones() -> None:
    kafka = KafkaSettings(
        "k:9093", KafkaProperties.from_env({**SASL, "STATEFED_KAFKA_LINGER_MS": "50"})
    )
    config = kafka.client(fixed={"acks": "all"}, defaults={"linger.ms": 5, "client.id": "c"})
    assert config == {
        "logger": CLIENT_LOG,
        "bootstrap.servers": "k:9093",
        "client.id": "c",
        "linger.ms": "50",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "statefed",
        "sasl.password": "hunter2",
        "acks": "all",
    }


def test_secrets_are_hidden_in_repr_and_redacted() -> None:
    properties = KafkaProperties.from_env(
        {**SASL, "STATEFED_KAFKA_SSL_KEY_PASSWORD": "pw2", "STATEFED_KAFKA_SSL_KEY_PEM": "K"}
    )
    shown = repr(KafkaSettings("k:1", properties))
    for secret in ("hunter2", "pw2", "'K'"):
        assert secret not in shown
    assert "SCRAM-SHA-512" in shown and "statefed" in shown
    hidden = redacted({"sasl.oauthbearer.client.secret": "x", "sasl.username": "u"})
    assert hidden == {"sasl.oauthbearer.client.secret": "***", "sasl.username": "u"}


# librdkafka 2.16's properties whose values are secrets (its CONFIGURATION.md), and some
# whose values are not
_SECRETS = (
    "sasl.password",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.key.pem",
    "sasl.oauthbearer.config",
    "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.assertion.private.key.passphrase",
    "sasl.oauthbearer.assertion.private.key.pem",
)
_NOT_SECRETS = (
    "sasl.username",
    "sasl.mechanism",
    "ssl.key.location",
    "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.assertion.private.key.file",
)


def test_every_secret_librdkafka_property_is_redacted() -> None:
    hidden = redacted(dict.fromkeys(_SECRETS + _NOT_SECRETS, "value"))
    assert hidden == {**dict.fromkeys(_SECRETS, "***"), **dict.fromkeys(_NOT_SECRETS, "value")}


def test_the_official_connector_gets_java_names() -> None:
    kafka = KafkaSettings(
        "k:9093",
        KafkaProperties.from_env({**SASL, "STATEFED_KAFKA_SSL_CA_LOCATION": "/ca.pem"}),
    )
    options = kafka.connector_options()
    assert options == {
        "kafka.bootstrap.servers": "k:9093",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
        'required username="statefed" password="hunter2";',
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
    }


def test_hints_name_the_setting_to_look_at() -> None:
    plain = KafkaSettings("k:9092")
    assert "STATEFED_BOOTSTRAP (k:9092)" in connection_hint(plain)
    assert "STATEFED_KAFKA_SECURITY_PROTOCOL" in connection_hint(plain)
    secured = KafkaSettings("k:9093", KafkaProperties.from_env(SASL))
    hint = connection_hint(secured, KafkaError(KafkaError._TRANSPORT, "connection refused"))
    assert "STATEFED_BOOTSTRAP (k:9093)" in hint and "'security.protocol': 'SASL_SSL'" in hint
    tls = connection_hint(secured, KafkaError(KafkaError._SSL, "certificate verify failed"))
    assert "ssl.ca.location (STATEFED_KAFKA_SSL_CA_LOCATION" in tls
    assert "now unset: the system CAs" in tls and "STATEFED_BOOTSTRAP (k:9093)" in tls
    handshake = connection_hint(secured, "SSL handshake failed: wrong version number")
    assert "a TLS error" in handshake and "security.protocol (now SASL_SSL)" in handshake
    auth = KafkaError(KafkaError.SASL_AUTHENTICATION_FAILED, "bad credentials")
    assert "sasl.username and sasl.password" in connection_hint(secured, auth)
    assert "hunter2" not in connection_hint(secured, auth) + hint + tls
