"""Class-data archives (Java's AppCDS) of the JVMs statefed starts: the local Kafka
broker, the Schema Registry and Spark's driver.

A JVM spends its first seconds loading, parsing and verifying classes: Spark's driver
loads about 15,000 before its first query. An archive of a part's classes, written at
the exit of a training run of that part (`make jvm-archives`, `tooling.classdata`), is
mapped in instead. Measured on 2 cores: a Spark session and a first query in 5-7 s
instead of 12, a broker ready in 2.6 s instead of 3.2-3.8.

A JVM given an archive it cannot use (written by another Java, or for other jars) warns
once on its output and starts as it would without one: an archive only ever saves time.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["PARTS", "archive_options", "archive_path", "archives_dir"]

PARTS = ("kafka", "registry", "spark")
_CHECKOUT = Path(__file__).resolve().parent.parent


def archives_dir(configured: Path | None) -> Path:
    """`STATEFED_JVM_ARCHIVES` when set, else the checkout's `.cache/jvm`."""
    return configured if configured is not None else _CHECKOUT / ".cache" / "jvm"


def archive_path(part: str, configured: Path | None) -> Path:
    """Where the archive of `part` (one of `PARTS`) is written and read."""
    if part not in PARTS:
        raise ValueError(f"no class-data archive for {part!r}: the parts are {', '.join(PARTS)}")
    return archives_dir(configured) / f"{part}.jsa"


def archive_options(part: str, configured: Path | None) -> list[str]:
    """The JVM options that map `part`'s archive in, when it has been written."""
    path = archive_path(part, configured)
    return [f"-XX:SharedArchiveFile={path}"] if path.is_file() else []
