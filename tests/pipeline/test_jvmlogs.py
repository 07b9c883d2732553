"""The driver JVM's log lines in the pipeline's format (pipeline/jvmlogs.py): the log4j2
configurations run in a real JVM with Spark's own log4j2 jars, a warning and an error
with a stack trace, each line JSON in JSON mode and the Python parts' line in text mode;
lines that ask nothing of the operator (no native code, no adaptive execution in
streaming) are hidden, and a batch falling behind, or a source's failed attempt to ask a
broker, is told once a minute, not each time."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from pipeline.jvmlogs import CONFIGURATION, log4j_options
from tooling.connector import spark_jars
from tooling.java import find_java

# a program in one source file (java runs it without a separate compile)
PROGRAM = """
import org.apache.logging.log4j.LogManager;
import org.apache.logging.log4j.Logger;

public class LogLines {
    public static void main(String[] args) {
        Logger log = LogManager.getLogger("org.apache.spark.sql.kafka010.KafkaSource");
        log.info("below the level: not shown");
        log.warn("a \\"quoted\\" word\\nand a second line");
        log.error("the batch failed", new IllegalStateException("broker gone"));
        LogManager.getLogger("org.apache.hadoop.util.NativeCodeLoader").warn("no native code");
        String streaming = "org.apache.spark.sql.execution.streaming.runtime.";
        LogManager.getLogger(streaming + "ResolveWriteToStream").warn(
            "spark.sql.adaptive.enabled is not supported in streaming DataFrames/Datasets and "
            + "will be disabled.");
        Logger batches = LogManager.getLogger(streaming + "MicroBatchExecution");
        batches.warn("Disabling AQE since AQE is not supported in stateful workloads.");
        batches.warn("another warning of the query");
        String kafka = "org.apache.spark.sql.kafka010.";
        Logger offsets = LogManager.getLogger(kafka + "KafkaOffsetReaderAdmin");
        for (int attempt = 1; attempt <= 3; attempt++) {
            offsets.warn("Error in attempt " + attempt + " getting Kafka offsets: ",
                new IllegalStateException("Timed out waiting for a node assignment"));
        }
        String trigger = "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor";
        for (int batch = 1; batch <= 5; batch++) {
            LogManager.getLogger(trigger).warn("Current batch is falling behind: " + batch);
        }
    }
}
"""


def _run(tmp_path: Path, log_format: str) -> list[str]:
    source = tmp_path / "LogLines.java"
    source.write_text(PROGRAM, encoding="utf-8")
    options = log4j_options(log_format, {})
    # Spark's own log4j2 (api and core), as the driver runs it
    jars = [str(jar) for name in ("api", "core") for jar in spark_jars().glob(f"log4j-{name}-*")]
    assert len(jars) == 2, jars
    command = [find_java("the test"), "-cp", ":".join(jars), *options, str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    return done.stderr.splitlines()


def test_json_mode_writes_every_line_as_an_object_of_the_pipeline_part(tmp_path: Path) -> None:
    lines = [json.loads(line) for line in _run(tmp_path, "json")]
    assert [(line["level"], line["message"]) for line in lines] == [
        ("warning", 'a "quoted" word\nand a second line'),
        ("error", "the batch failed"),
        ("warning", "another warning of the query"),
        ("warning", "Error in attempt 1 getting Kafka offsets: "),
        ("warning", "Current batch is falling behind: 1"),
    ]
    for line in lines:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["time"])
        assert line["part"] == "pipeline"
    assert lines[0]["logger"] == "org.apache.spark.sql.kafka010.KafkaSource"
    assert "exception" not in lines[0]
    trace = lines[1]["exception"]
    assert trace.startswith("java.lang.IllegalStateException: broker gone")
    assert "at LogLines.main" in trace


def test_text_mode_writes_the_python_parts_line_then_the_trace(tmp_path: Path) -> None:
    lines = _run(tmp_path, "text")
    line = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} %s KafkaSource: %s"
    assert re.fullmatch(line % ("WARNING", 'a "quoted" word'), lines[0])
    assert lines[1] == "and a second line"
    assert re.fullmatch(line % ("ERROR", "the batch failed"), lines[2])
    assert lines[3] == "java.lang.IllegalStateException: broker gone"
    assert any("at LogLines.main" in rest for rest in lines[4:])
    attempts = [line for line in lines if "getting Kafka offsets" in line]
    assert len(attempts) == 1 and "Error in attempt 1" in attempts[0]
    behind = [line for line in lines if "falling behind" in line]
    assert len(behind) == 1 and behind[0].endswith(
        "ProcessingTimeExecutor: Current batch is falling behind: 1"
    )
    assert not any("native code" in line or "AQE" in line for line in lines)
    assert not any("adaptive" in line for line in lines)
    assert any(line.endswith("MicroBatchExecution: another warning of the query") for line in lines)


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_configuration_in_spark_conf_dir_is_left_to_spark(
    tmp_path: Path, log_format: str
) -> None:
    assert CONFIGURATION.is_file()
    assert log4j_options(log_format, {"SPARK_CONF_DIR": str(tmp_path)}) != []
    (tmp_path / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert log4j_options(log_format, {"SPARK_CONF_DIR": str(tmp_path)}) == []
