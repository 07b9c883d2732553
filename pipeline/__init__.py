"""The Spark Structured Streaming pipeline: input topics -> view state -> changelog topics.

One query per view (every kind: count, windowed_count, latest, history), one dead-letter
query per input topic, and a status record per view and micro-batch on
`statefed.pipeline`. `run_pipeline(config)` is the process; `start_queries(spark, config,
catalogue)` runs the same queries in an existing session (tests share one session per run).
"""

from pipeline.config import PipelineConfig
from pipeline.errors import (
    DeliveryError,
    PipelineConfigError,
    PipelineError,
    QueryFailedError,
    RecordTooLargeError,
    SourceError,
)
from pipeline.health import HealthFile, check_health
from pipeline.job import RunningPipeline, start_queries
from pipeline.run import run_pipeline
from pipeline.session import build_session

__all__ = [
    "DeliveryError",
    "HealthFile",
    "PipelineConfig",
    "PipelineConfigError",
    "PipelineError",
    "QueryFailedError",
    "RecordTooLargeError",
    "RunningPipeline",
    "SourceError",
    "build_session",
    "check_health",
    "run_pipeline",
    "start_queries",
]
