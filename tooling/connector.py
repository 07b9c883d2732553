"""Spark's own Kafka connector and Avro functions, added to the installed pyspark (`make
install`, the image).

The pipeline reads its input topics with Spark's Kafka source, and decodes Avro values with
spark-avro's `from_avro`; the pyspark wheel ships neither. `python -m tooling.connector`
(`make connector`; compose/Dockerfile runs it too) resolves
`org.apache.spark:spark-sql-kafka-0-10_<scala>:<CONNECTOR_VERSION>` and
`org.apache.spark:spark-avro_<scala>:<CONNECTOR_VERSION>` with their runtime dependencies
the way `spark-submit --packages` does (Spark's own Ivy, the versions the modules' POMs
name), then copies into pyspark's `jars/` each resolved jar whose
artifact pyspark does not ship already: where both have one (slf4j, lz4, snappy), Spark's
copy stays the only one, as it would win on the classpath with `--packages`.

The connector's version is pinned apart from pyspark's: the Java registry serves no
connector of Spark 4.3.0 yet, so the newest one of the same major version that it serves
is used (4.2.0; the Kafka source and sink, and `from_avro`, are checked against the pinned
pyspark by the pipeline's tests). Move it to pyspark's own version as soon as that is
served. (spark-protobuf is served in no version of Spark 4, so Protobuf values are not
decoded by it.)
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import quoteattr

import pyspark

__all__ = [
    "CONNECTOR_VERSION",
    "artifact",
    "connector_coordinates",
    "install_jars",
    "only_repositories",
    "resolve_jars",
    "spark_jars",
]

# Spark's modules the pipeline needs beyond the pyspark wheel, of the same version
MODULES = ("spark-sql-kafka-0-10", "spark-avro")
CONNECTOR_VERSION = "4.2.0"
# the version starts at the first `-<digits>.`: `spark-sql-kafka-0-10_2.13-4.3.0`
_VERSIONED = re.compile(r"^(.+?)-\d+\.")
_SPARK_CORE = re.compile(r"^spark-core_(\d+\.\d+)-.+\.jar$")


def spark_jars() -> Path:
    """The `jars/` directory of the installed pyspark (its classpath)."""
    return Path(pyspark.__file__).parent / "jars"


def connector_coordinates(version: str, jars: Path) -> str:
    """The Maven coordinates of every module of `MODULES` for Spark `version`, for the
    Scala version of the Spark in `jars` (its spark-core jar), comma-separated as
    `--packages` takes them."""
    for jar in jars.iterdir():
        match = _SPARK_CORE.match(jar.name)
        if match:
            scala = match.group(1)
            return ",".join(f"org.apache.spark:{m}_{scala}:{version}" for m in MODULES)
    raise SystemExit(f"no spark-core_<scala>-<version>.jar in {jars}: is pyspark installed?")


def artifact(jar_name: str) -> str:
    """The artifact a jar file is of: `kafka-clients` for `kafka-clients-3.9.1.jar`."""
    stem = jar_name.removesuffix(".jar")
    match = _VERSIONED.match(stem)
    return match.group(1) if match else stem


def only_repositories(repositories: Sequence[str], path: Path) -> Path:
    """An Ivy settings file at `path` that resolves from `repositories` (Maven layout) and
    nothing else: no Maven Central, no ~/.m2, no Ivy cache of earlier builds."""
    resolvers = "\n".join(
        f'      <ibiblio name="repository-{i}" m2compatible="true" root={quoteattr(url)}/>'
        for i, url in enumerate(repositories)
    )
    path.write_text(
        "<ivysettings>\n"
        '  <settings defaultResolver="only"/>\n'
        '  <resolvers>\n    <chain name="only" returnFirst="true">\n'
        f"{resolvers}\n"
        "    </chain>\n  </resolvers>\n</ivysettings>\n"
    )
    return path


def resolve_jars(coordinates: str, ivy: Path, repositories: Sequence[str] = ()) -> list[Path]:
    """Every jar `coordinates` needs at run time, fetched by `spark-submit --packages` into
    `ivy/jars/`: from Maven Central (Spark's default resolvers), or only from
    `repositories` when given (a mirror, or a test's own repository)."""
    noop = ivy / "noop.py"
    ivy.mkdir(parents=True, exist_ok=True)
    noop.write_text("")
    command = [
        str(Path(pyspark.__file__).parent / "bin" / "spark-submit"),
        "--master",
        "local[1]",
        "--packages",
        coordinates,
        "--conf",
        f"spark.jars.ivy={ivy}",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
    ]
    if repositories:
        settings = only_repositories(repositories, ivy / "ivysettings.xml")
        command += ["--conf", f"spark.jars.ivySettings={settings}"]
    result = subprocess.run([*command, str(noop)], capture_output=True, text=True, check=False)
    jars = sorted((ivy / "jars").glob("*.jar"))
    if result.returncode != 0 or not jars:
        raise SystemExit(
            f"resolving {coordinates} failed (exit {result.returncode}):\n{result.stderr[-4000:]}"
        )
    return jars


def install_jars(resolved: Iterable[Path], jars: Path) -> tuple[list[Path], list[Path]]:
    """Copy into `jars` each resolved jar whose artifact is not there yet; (copied, skipped).
    Ivy names a jar `<organisation>_<artifact>-<revision>.jar`."""
    shipped = {artifact(p.name) for p in jars.iterdir() if p.suffix == ".jar"}
    copied, skipped = [], []
    for jar in resolved:
        name = jar.name.split("_", 1)[1] if "_" in jar.name else jar.name
        if artifact(name) in shipped:
            skipped.append(jar)
            continue
        shutil.copyfile(jar, jars / name)
        copied.append(jars / name)
    return copied, skipped


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--spark-version",
        default=pyspark.__version__,
        help="the Spark the connector goes into: must be the installed pyspark's version",
    )
    parser.add_argument(
        "--connector-version",
        default=CONNECTOR_VERSION,
        help="the connector's version (same major version as Spark)",
    )
    parser.add_argument(
        "--repository",
        action="append",
        default=[],
        help="resolve only from this Maven repository (repeatable)",
    )
    parser.add_argument("--jars", type=Path, default=None, help="target (pyspark's jars/)")
    args = parser.parse_args(argv)
    if args.spark_version != pyspark.__version__:
        raise SystemExit(
            f"--spark-version {args.spark_version} is not the installed pyspark "
            f"{pyspark.__version__}: the connector must match Spark exactly (update the "
            "Dockerfile's SPARK_VERSION with pyproject.toml's pyspark pin)"
        )
    if args.connector_version.split(".")[0] != args.spark_version.split(".")[0]:
        raise SystemExit(
            f"--connector-version {args.connector_version} is not of Spark "
            f"{args.spark_version}'s major version: the connector would not load"
        )
    jars = args.jars or spark_jars()
    coordinates = connector_coordinates(args.connector_version, jars)
    with tempfile.TemporaryDirectory(prefix="statefed-ivy-") as ivy:
        copied, skipped = install_jars(resolve_jars(coordinates, Path(ivy), args.repository), jars)
    installed = {artifact(p.name) for p in jars.glob("*.jar")}
    # installed now, or by an earlier run (a reinstall of the venv's packages reruns this step)
    for module in (c.split(":")[1] for c in coordinates.split(",")):
        if module not in installed:
            raise SystemExit(f"{module} was not installed into {jars}")
    for path in copied:
        print(f"installed {path.name}")
    for path in skipped:
        print(f"kept Spark's own copy instead of {path.name}")


if __name__ == "__main__":
    main()
