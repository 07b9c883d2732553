"""The JVMs statefed starts itself, the local Kafka broker and Schema Registry: which
`java` runs them, and the options `STATEFED_JVM_OPTIONS` and their class-data archives
(`runtime.classdata`) add to each.

Spark's driver is not one of them: the pipeline starts it through PySpark, which takes
its options from `SPARK_SUBMIT_OPTS` (or `spark-submit --driver-java-options`).
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping
from pathlib import Path

from runtime.classdata import archive_options
from tooling.config import ToolingConfig

__all__ = ["JavaNotFound", "find_java", "jvm_options"]


class JavaNotFound(RuntimeError):
    """No Java to run a part with; the message names what to install or set."""


def find_java(part: str, environ: Mapping[str, str] = os.environ) -> str:
    """The `java` of JAVA_HOME when it is set, else the one on the PATH, to run `part`."""
    home = environ.get("JAVA_HOME")
    if home:
        java = Path(home) / "bin" / "java"
        if not os.access(java, os.X_OK):
            raise JavaNotFound(
                f"JAVA_HOME is {home}, which has no bin/java: point it at a Java 17 or newer, "
                "or unset it to use the `java` on the PATH"
            )
        return str(java)
    found = shutil.which("java", path=environ.get("PATH"))
    if found is None:
        raise JavaNotFound(
            f"no `java` on the PATH (and no JAVA_HOME): {part} needs Java 17 or newer "
            "(Debian: apt-get install openjdk-17-jre-headless)"
        )
    return found


def jvm_options(part: str, environ: Mapping[str, str] = os.environ) -> list[str]:
    """The options of `part`'s JVM (`runtime.classdata.PARTS`): its class-data archive,
    when written, then `STATEFED_JVM_OPTIONS` split as a shell splits words."""
    config = ToolingConfig.from_env(environ)
    try:
        words = shlex.split(config.jvm_options or "")
    except ValueError as exc:  # an unclosed quote
        raise ToolingConfig.config_error(
            "STATEFED_JVM_OPTIONS",
            f"cannot be split into words as a shell would ({exc}): close its quotes, got "
            f"{config.jvm_options!r}",
        ) from exc
    return [*archive_options(part, config.jvm_archives), *words]
