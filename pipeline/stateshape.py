"""What a view's checkpoint keeps state for: its kind, its aggregates (each its function
and the field it computes over, as the pipeline stores it), its group fields and its
windows' size, slide or gap.

Spark keeps a query's state by position, not by name: resumed after a view's aggregates
changed, it refuses the state (an aggregate added or removed), or carries on from the
wrong one (two swapped whose state has the same shape: `revenue` continuing from
`largest`'s maximum), silently. So the shape a checkpoint was written for is kept beside
it (`statefed-state.json`), and a view whose shape differs from its checkpoint's is not
resumed: the pipeline stops at start naming the view, what changed, and the checkpoint to
delete for the view to be computed anew. A checkpoint written before the shape was kept
takes the view's shape at its next start.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineConfigError
from schema import Aggregate, FieldType, View

__all__ = ["check_state_shape", "has_commits", "state_shape"]

SHAPE_FILE = "statefed-state.json"


def has_commits(checkpoint: Path) -> bool:
    """Whether a query committed a micro-batch (or a checkpoint) into `checkpoint`."""
    commits = checkpoint / "commits"
    return commits.is_dir() and any(commits.iterdir())


def state_shape(view: View) -> dict[str, Any]:
    """The parts of `view` its query's state depends on, as JSON: not the results' names,
    a window's grace (the watermark's delay) nor an enum's symbols, which keep the state."""
    window = view.window
    return {
        "kind": view.kind.value,
        "aggregates": [_aggregate(view, aggregate) for aggregate in view.aggregates],
        "group_by": list(view.group_by),
        "window": None
        if window is None
        else f"size_ms={window.size_ms} slide_ms={window.slide_ms} gap_ms={window.gap_ms}",
    }


def _aggregate(view: View, aggregate: Aggregate) -> str:
    """`sum of amount (a double)`: what an aggregate computes over what, as Spark keeps
    it."""
    if aggregate.of is None:
        return f"{aggregate.function.value} of the events"
    types = {field.name: field.type for field in view.value_fields}
    of = types.get(aggregate.of)
    stored = _STORED.get(of, "a text") if isinstance(of, FieldType) else "a text"
    return f"{aggregate.function.value} of {aggregate.of} ({stored})"


# how the pipeline stores the fields aggregates take (pipeline.records); an enum is text
_STORED = {
    FieldType.INT: "an integer",
    FieldType.LONG: "an integer",
    FieldType.TIMESTAMP: "an integer",
    FieldType.FLOAT: "a double",
    FieldType.BOOLEAN: "a boolean",
}


def check_state_shape(view: View, checkpoint: Path) -> None:
    """PipelineConfigError when `checkpoint` holds state of another shape than `view`'s;
    else keeps `view`'s shape beside it (a checkpoint yet without commits takes it)."""
    path = checkpoint / SHAPE_FILE
    shape = state_shape(view)
    if has_commits(checkpoint) and path.is_file():
        kept = _read(path)
        if kept != shape:
            raise PipelineConfigError(f"view {view.name}", _changed(checkpoint, kept, shape))
        return
    checkpoint.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{SHAPE_FILE}.new")
    scratch.write_text(json.dumps(shape, sort_keys=True), encoding="utf-8")
    os.replace(scratch, path)


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PipelineConfigError(
            str(path),
            f"cannot be read ({exc}): it says what the checkpoint beside it keeps state for; "
            "delete the checkpoint directory for the view to be computed anew",
        ) from exc


def _changed(checkpoint: Path, kept: Any, shape: dict[str, Any]) -> str:
    """What changed since the checkpoint was written, and how to go on."""
    was = kept if isinstance(kept, dict) else {}
    parts = sorted(shape.keys() | was.keys())
    changes = [
        f"{part} was {json.dumps(was.get(part))}, now {json.dumps(shape.get(part))}"
        for part in parts
        if was.get(part) != shape.get(part)
    ]
    return (
        f"its checkpoint {checkpoint} keeps state for another definition ({'; '.join(changes)})"
        ", and Spark would refuse that state or carry on from the wrong results: delete the "
        "checkpoint directory (the view is computed anew from STATEFED_STARTING_OFFSETS and "
        "its rows written again), or restore the view's definition"
    )
