"""The image build step that adds Spark's Kafka connector to pyspark (tooling.connector),
run here against a Maven repository the test writes, since Maven Central is not reachable:
the resolution is Spark's own (`spark-submit --packages`), only the repository differs."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pyspark
import pytest

from tooling.connector import CONNECTOR_VERSION, artifact, connector_coordinates, main, spark_jars

ROOT = Path(__file__).resolve().parents[1]


def _pinned_pyspark() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (pin,) = [d for d in project["project"]["dependencies"] if d.startswith("pyspark==")]
    return pin.removeprefix("pyspark==")


def test_the_coordinates_are_of_the_installed_spark_and_its_scala() -> None:
    assert pyspark.__version__ == _pinned_pyspark()
    coordinates = connector_coordinates(_pinned_pyspark(), spark_jars())
    assert coordinates == (
        f"org.apache.spark:spark-sql-kafka-0-10_2.13:{_pinned_pyspark()},"
        f"org.apache.spark:spark-avro_2.13:{_pinned_pyspark()}"
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("spark-sql-kafka-0-10_2.13-4.3.0.jar", "spark-sql-kafka-0-10_2.13"),
        ("spark-token-provider-kafka-0-10_2.13-4.3.0.jar", "spark-token-provider-kafka-0-10_2.13"),
        ("kafka-clients-3.9.1.jar", "kafka-clients"),
        ("commons-pool2-2.12.1.jar", "commons-pool2"),
        ("commons-pool-1.5.4.jar", "commons-pool"),
        ("zstd-jni-1.5.7-7.jar", "zstd-jni"),
        ("guava-33.6.0-jre.jar", "guava"),
    ],
)
def test_a_jar_name_gives_its_artifact(name: str, expected: str) -> None:
    assert artifact(name) == expected


def test_every_jar_spark_ships_gives_an_artifact_without_its_version() -> None:
    jars = [p.name for p in spark_jars().iterdir() if p.suffix == ".jar"]
    assert len(jars) > 100
    for name in jars:
        assert name.startswith(artifact(name) + "-"), name


def _artifact(repo: Path, group: str, name: str, version: str, deps: list[str]) -> None:
    """A jar and its POM in Maven's layout; `deps` as `group:artifact:version`."""
    folder = repo.joinpath(*group.split("."), name, version)
    folder.mkdir(parents=True)
    dependencies = "".join(
        f"<dependency><groupId>{g}</groupId><artifactId>{a}</artifactId>"
        f"<version>{v}</version></dependency>"
        for g, a, v in (d.split(":") for d in deps)
    )
    (folder / f"{name}-{version}.pom").write_text(
        '<?xml version="1.0"?><project xmlns="http://maven.apache.org/POM/4.0.0">'
        f"<modelVersion>4.0.0</modelVersion><groupId>{group}</groupId>"
        f"<artifactId>{name}</artifactId><version>{version}</version>"
        f"<dependencies>{dependencies}</dependencies></project>"
    )
    with zipfile.ZipFile(folder / f"{name}-{version}.jar", "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")


@pytest.mark.timeout(180)
def test_the_build_step_adds_the_connector_and_keeps_sparks_own_libraries(
    tmp_path: Path,
) -> None:
    repo, jars = tmp_path / "repo", tmp_path / "jars"
    version = CONNECTOR_VERSION  # what the build step asks for unless told otherwise
    # a dependency under a group of its own (nothing in ~/.m2 can stand in for it), and one
    # of an artifact Spark ships already
    _artifact(
        repo,
        "org.apache.spark",
        "spark-sql-kafka-0-10_2.13",
        version,
        ["org.example.statefedtest:pool-lib:1.0.0", "org.example.statefedtest:slf4j-api:2.0.17"],
    )
    _artifact(repo, "org.apache.spark", "spark-avro_2.13", version, [])
    _artifact(repo, "org.example.statefedtest", "pool-lib", "1.0.0", [])
    _artifact(repo, "org.example.statefedtest", "slf4j-api", "2.0.17", [])
    jars.mkdir()
    for shipped in ("spark-core_2.13-4.3.0.jar", "slf4j-api-2.0.17.jar"):
        (jars / shipped).write_bytes(b"")

    options = [
        "--spark-version",
        _pinned_pyspark(),
        "--repository",
        repo.as_uri(),
        "--jars",
        str(jars),
    ]
    result = subprocess.run(
        [sys.executable, "-m", "tooling.connector", *options],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in jars.iterdir()) == [
        "pool-lib-1.0.0.jar",
        "slf4j-api-2.0.17.jar",
        f"spark-avro_2.13-{version}.jar",
        "spark-core_2.13-4.3.0.jar",
        f"spark-sql-kafka-0-10_2.13-{version}.jar",
    ]
    assert (jars / "slf4j-api-2.0.17.jar").read_bytes() == b""  # Spark's copy, untouched
    assert "kept Spark's own copy instead of org.example.statefedtest_slf4j-api" in result.stdout
    # run again (make reruns it after any reinstall of the venv): the connector is there
    again = subprocess.run(
        [sys.executable, "-m", "tooling.connector", *options],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=150,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(list(jars.iterdir())) == 5


def test_a_version_other_than_the_installed_pyspark_stops_the_build() -> None:
    with pytest.raises(SystemExit, match=r"pyproject\.toml"):
        main(["--spark-version", "3.5.0"])


def test_a_connector_of_another_major_version_stops_the_build() -> None:
    with pytest.raises(SystemExit, match=r"--connector-version 3\.5\.0 .* would not load"):
        main(["--spark-version", _pinned_pyspark(), "--connector-version", "3.5.0"])


def test_the_installed_connector_is_the_pinned_one() -> None:
    """`make install` put the connector and spark-avro of CONNECTOR_VERSION into pyspark's
    jars/: the pipeline's only input source, and its Avro decoder."""
    names = {p.name for p in spark_jars().iterdir()}
    assert f"spark-sql-kafka-0-10_2.13-{CONNECTOR_VERSION}.jar" in names
    assert f"spark-avro_2.13-{CONNECTOR_VERSION}.jar" in names
    assert any(artifact(n) == "kafka-clients" for n in names)
