"""The pipeline's exception tree.

PipelineError                  anything the pipeline raises on purpose
├── PipelineConfigError        a STATEFED_* variable or a data source option is invalid
│                              (runtime.config.ConfigError, a ValueError)
├── SourceError                an input topic cannot be read (the topic, the settings)
│   └── RegistryUnavailableError the Schema Registry did not answer
├── DeliveryError              a changelog or dead-letter record was not delivered
│   └── RecordTooLargeError    one over the producer's message.max.bytes (topic, key, size)
└── QueryFailedError           a streaming query terminated with an error (view, query)
"""

from __future__ import annotations

import runtime.config

__all__ = [
    "DeliveryError",
    "PipelineConfigError",
    "PipelineError",
    "QueryFailedError",
    "RecordTooLargeError",
    "RegistryUnavailableError",
    "SourceError",
]


class PipelineError(Exception):
    """Base of every error the pipeline raises on purpose."""


class PipelineConfigError(PipelineError, runtime.config.ConfigError):
    """A configuration variable (or data source option) is invalid; the message starts
    with its name."""


class SourceError(PipelineError):
    """An input topic cannot be read; the message names the topic and the settings to check."""


class RegistryUnavailableError(SourceError):
    """The Schema Registry did not answer (refused, timed out, no such host)."""


class DeliveryError(PipelineError):
    """A record was not delivered to its topic: the micro-batch must fail and be replayed."""


class QueryFailedError(PipelineError):
    """A streaming query stopped with an error; the message names the query and its view."""


class RecordTooLargeError(DeliveryError):
    """A record is larger than the producer may send: no replay delivers it. The message
    names the topic, the key, the size and the settings to raise."""
