"""The pipeline's exception tree.

PipelineError                  anything the pipeline raises on purpose
├── PipelineConfigError        a STATEFED_* variable or a data source option is invalid
│                              (runtime.config.ConfigError, a ValueError)
├── SourceError                reading an input topic failed (topic, partition, offsets)
├── DeliveryError              a changelog or dead-letter record was not delivered
└── QueryFailedError           a streaming query terminated with an error (view, query)
"""

from __future__ import annotations

import runtime.config

__all__ = [
    "DeliveryError",
    "PipelineConfigError",
    "PipelineError",
    "QueryFailedError",
    "SourceError",
]


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose."""


class PipelineConfigError(PipelineError, runtime.config.ConfigError):
    """A configuration variable (or data source option) is invalid; the message starts
    with its name."""


class SourceError(PipelineError):
    """Reading an input topic failed; the message names the topic, partition and offsets."""


class DeliveryError(PipelineError):
    """A record was not delivered to its topic: the micro-batch must fail and be replayed."""


class QueryFailedError(PipelineError):
    """A streaming query stopped with an error; the message names the query and its view."""
