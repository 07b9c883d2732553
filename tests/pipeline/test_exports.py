"""The package's public names are exactly its `__all__`, and each of them exists."""

from __future__ import annotations

import pipeline


def test_all_lists_the_public_names() -> None:
    public = {name for name in vars(pipeline) if not name.startswith("_")}
    modules = {name for name in public if type(vars(pipeline)[name]).__name__ == "module"}
    assert set(pipeline.__all__) == public - modules
    assert {"PipelineConfig", "run_pipeline", "start_queries"} <= set(pipeline.__all__)
