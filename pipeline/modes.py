"""Which views run in Spark's Real-Time Mode, and what that asks of the Spark session.

Real-Time Mode processes each record as it arrives, in long-running tasks, instead of a
micro-batch per trigger. Spark runs only some queries so (its allowlist: no Python UDFs,
the Kafka or `foreach` sinks, update mode) and the pipeline writes a view's changelog in it
with Spark's Kafka sink, whose default partitioner must pick the view's partition. So a
view runs in Real-Time Mode when its kind writes records keyed by the entity key (count,
latest, aggregate: `KindPlan.records`), its keys are plain strings (other key types are
decoded by Python code) and its values JSON (registry formats are not shown in Real-Time
Mode yet); windowed and history views, whose record keys pack more than the key, run in
micro-batches.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from pipeline.errors import PipelineConfigError
from pipeline.kinds import plan_for
from schema import KeyType, PipelineMode, ValueFormat, View

__all__ = ["MODES", "realtime_problem", "realtime_slots", "runs_realtime"]

log = logging.getLogger(__name__)

# the values of STATEFED_PIPELINE_MODE: the mode of the views that leave it to the pipeline
MODES = (PipelineMode.REAL_TIME.value, PipelineMode.MICRO_BATCH.value)


def realtime_problem(view: View) -> str | None:
    """Why Spark cannot run `view` in Real-Time Mode, or None if it can."""
    if plan_for(view).records is None:
        return (
            f"a {view.kind.value} view's changelog record keys pack more than the entity "
            f"key, which Spark's Kafka sink cannot partition by"
        )
    if view.key_type is not KeyType.STRING:
        return "its keys are decoded by Python code, which Real-Time Mode does not run"
    if view.value_format is not ValueFormat.JSON:
        return f"{view.value_format.value} values are not read in Real-Time Mode yet"
    return None


def runs_realtime(view: View, default: str) -> bool:
    """Whether `view` runs in Real-Time Mode: its own `pipeline_mode`, else `default`
    (STATEFED_PIPELINE_MODE) where Spark can run it. A view that asks for Real-Time Mode
    itself and cannot have it is a `PipelineConfigError`."""
    problem = realtime_problem(view)
    if view.pipeline_mode is PipelineMode.REAL_TIME and problem is not None:
        raise PipelineConfigError(
            f"view {view.name}",
            f"asks for pipeline_mode real_time, which Spark cannot run it in: {problem}; "
            f"set pipeline_mode=PipelineMode.AUTO (or MICRO_BATCH)",
        )
    mode = view.pipeline_mode
    if mode is PipelineMode.AUTO:
        mode = PipelineMode(default)
        if mode is PipelineMode.REAL_TIME and problem is not None:
            log.info("view %s runs in micro-batches: %s", view.name, problem)
            return False
    return mode is PipelineMode.REAL_TIME


def realtime_slots(partitions: Iterable[int], shuffle_partitions: int) -> int:
    """The task slots the Real-Time Mode queries hold for as long as they run: each query
    one task per partition of its input topic and one per shuffle partition (every kind it
    runs aggregates), all at once; `partitions` has one entry per such query."""
    return sum(p + shuffle_partitions for p in partitions)
