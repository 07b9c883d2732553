"""The driver JVM's log lines in the pipeline's log format.

Spark, its Kafka connector and the Kafka Java client log through log4j2 in the driver
JVM (and, with a local master, the executors in it). With Spark's default configuration
those lines have a format of their own, and a failed batch writes a multi-line stack
trace: in a `STATEFED_LOG_FORMAT=json` stream they were most of the lines, none JSON.
When `statefed pipeline` starts the JVM it names `log4j2.properties` here and the format:
log4j2 then writes the Python parts' line (text) or object (JSON), at WARN until the
session runs and at `STATEFED_SPARK_LOG_LEVEL` from then on
(`pipeline.session.build_session`). A log4j2 configuration of the user's wins: one named
by `-Dlog4j2.configurationFile` in SPARK_SUBMIT_OPTS (later options win) or a
`log4j2.properties` in SPARK_CONF_DIR; under spark-submit the JVM runs already, with
whatever it was given.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

__all__ = ["CONFIGURATION", "log4j_options"]

CONFIGURATION = Path(__file__).parent / "log4j2.properties"
_FORMAT_PROPERTY = "statefed.log.format"  # the appender the configuration writes with


def log4j_options(log_format: str, environ: Mapping[str, str]) -> list[str]:
    """The JVM options that make the driver's log4j2 write `log_format` lines; none when
    `environ`'s SPARK_CONF_DIR holds a log4j2 configuration."""
    conf_dir = environ.get("SPARK_CONF_DIR", "").strip()
    if conf_dir and any(Path(conf_dir).glob("log4j2*")):
        return []
    return [f"-Dlog4j2.configurationFile={CONFIGURATION}", f"-D{_FORMAT_PROPERTY}={log_format}"]
