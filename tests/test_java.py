"""Which `java` the local tools run and the options they give it (`tooling.java`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime.classdata import archive_path
from runtime.config import ConfigError
from tooling.java import JavaNotFound, find_java, jvm_options


def test_java_home_wins_over_the_path(tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    assert find_java("Kafka", {"JAVA_HOME": str(tmp_path), "PATH": "/usr/bin"}) == str(java)


def test_a_java_home_without_java_says_what_to_point_it_at(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFound, match=r"JAVA_HOME is .* no bin/java: point it at a Java 17"):
        find_java("Kafka", {"JAVA_HOME": str(tmp_path), "PATH": "/usr/bin"})


def test_no_java_names_the_part_and_what_to_install(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFound, match=r"no `java` on the PATH .*: Kafka needs Java 17 .*apt"):
        find_java("Kafka", {"PATH": str(tmp_path)})


def test_options_are_split_as_a_shell_splits_words(tmp_path: Path) -> None:
    environ = {
        "STATEFED_JVM_OPTIONS": "-Xss4m  '-Da=b c' -XX:TieredStopAtLevel=1",
        "STATEFED_JVM_ARCHIVES": str(tmp_path),  # no archive written there
    }
    assert jvm_options("kafka", environ) == ["-Xss4m", "-Da=b c", "-XX:TieredStopAtLevel=1"]
    assert jvm_options("kafka", {"STATEFED_JVM_ARCHIVES": str(tmp_path)}) == []


def test_options_a_shell_cannot_split_are_named_with_the_variable(tmp_path: Path) -> None:
    environ = {"STATEFED_JVM_OPTIONS": '-Dx="a', "STATEFED_JVM_ARCHIVES": str(tmp_path)}
    with pytest.raises(ConfigError, match=r"^STATEFED_JVM_OPTIONS: cannot be split into words"):
        jvm_options("kafka", environ)


def test_a_parts_archive_comes_first_once_it_is_written(tmp_path: Path) -> None:
    environ = {"STATEFED_JVM_OPTIONS": "-Xss4m", "STATEFED_JVM_ARCHIVES": str(tmp_path)}
    (tmp_path / "kafka.jsa").write_bytes(b"")
    shared = f"-XX:SharedArchiveFile={tmp_path / 'kafka.jsa'}"
    assert jvm_options("kafka", environ) == [shared, "-Xss4m"]
    assert jvm_options("registry", environ) == ["-Xss4m"]  # each part has its own


def test_a_part_without_an_archive_is_named() -> None:
    with pytest.raises(ValueError, match=r"no class-data archive for 'gateway': the parts are"):
        archive_path("gateway", None)
