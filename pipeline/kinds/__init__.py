"""How each view kind is computed: one module per kind, looked up by `plan_for(view)`."""

from __future__ import annotations

from pipeline.errors import PipelineError
from pipeline.kinds import aggregate, count, history, latest, windowed_count
from pipeline.kinds.plan import ChangelogRecord, KindPlan
from schema import View, ViewKind

__all__ = ["PLANS", "ChangelogRecord", "KindPlan", "plan_for"]

PLANS: dict[ViewKind, KindPlan] = {
    ViewKind.COUNT: count.PLAN,
    ViewKind.WINDOWED_COUNT: windowed_count.PLAN,
    ViewKind.LATEST: latest.PLAN,
    ViewKind.HISTORY: history.PLAN,
    ViewKind.AGGREGATE: aggregate.PLAN,
    ViewKind.WINDOWED_AGGREGATE: windowed_count.PLAN,  # its rows carry the results
}


def plan_for(view: View) -> KindPlan:
    """The plan of `view`'s kind, or an error naming the view if the kind is not built yet."""
    try:
        return PLANS[view.kind]
    except KeyError:
        raise PipelineError(
            f"view {view.name}: kind {view.kind.value} is not supported by the pipeline yet "
            f"(supported: {', '.join(k.value for k in PLANS)})"
        ) from None
