"""The pipeline status record: what the pipeline has processed, and what it dropped.

Topic `statefed.pipeline` (1 partition), key = view name, one record per micro-batch of
the view's query. `source_offsets` are the next offsets to read per partition of the
view's input topic once the batch is done (so a reader can tell that everything produced
before some point has been processed); `late_dropped` is the total of events that
arrived later than the window's grace period (windowed views) since the view's
checkpoint began. `changelog_offsets` are the next offsets per partition of the view's
changelog topic once the batch's rows are acknowledged: a node that has applied them has
everything the batch wrote (read-your-writes waits on them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

__all__ = ["PIPELINE_TOPIC", "ViewStatus", "decode_status", "encode_status"]

PIPELINE_TOPIC = "statefed.pipeline"


@dataclass(frozen=True)
class ViewStatus:
    view: str
    batch_id: int
    updated_ms: int
    late_dropped: int = 0
    source_offsets: dict[int, int] = field(default_factory=dict)
    changelog_offsets: dict[int, int] = field(default_factory=dict)


def encode_status(status: ViewStatus) -> bytes:
    return orjson.dumps(
        {
            "view": status.view,
            "batch_id": status.batch_id,
            "updated_ms": status.updated_ms,
            "late_dropped": status.late_dropped,
            "source_offsets": {str(p): o for p, o in status.source_offsets.items()},
            "changelog_offsets": {str(p): o for p, o in status.changelog_offsets.items()},
        }
    )


def decode_status(value: bytes) -> ViewStatus:
    try:
        doc = orjson.loads(value)
        return ViewStatus(
            view=doc["view"],
            batch_id=int(doc["batch_id"]),
            updated_ms=int(doc["updated_ms"]),
            late_dropped=int(doc["late_dropped"]),
            source_offsets={int(p): int(o) for p, o in doc["source_offsets"].items()},
            # absent from statuses written before read-your-writes existed
            changelog_offsets={int(p): int(o) for p, o in doc.get("changelog_offsets", {}).items()},
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"undecodable pipeline status {value[:200]!r}") from exc
