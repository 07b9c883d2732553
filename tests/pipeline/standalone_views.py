"""The catalogue of the standalone-cluster test (`STATEFED_CATALOGUE`): one count view over
a topic of its own, so a cluster with one executor core runs two queries, not eight. In
micro-batches: a Real-Time Mode query would hold a core per input and shuffle partition
(seven), where this cluster has one."""

from __future__ import annotations

from schema import PipelineMode, View, ViewKind

STANDALONE_WORDS = View(
    name="standalone_words",
    topic="test.standalone.words",
    kind=ViewKind.COUNT,
    key_field="word",
    type_name="StandaloneCount",
    point_field="standaloneCount",
    many_field="standaloneCounts",
    top_field="topStandalone",
    pipeline_mode=PipelineMode.MICRO_BATCH,
)

CATALOGUE = (STANDALONE_WORDS,)
SPEC = "tests.pipeline.standalone_views:CATALOGUE"
