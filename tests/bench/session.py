"""The system under test for one run: a LocalCluster grown as the measurements need it.

Steps ask for what they need (`ensure_nodes(n)`, `ensure_gateway()`,
`ensure_pipeline()`) and the session starts the missing parts, in the order the run
plan makes cheapest. The first node always restores the data set from the changelog,
and that start is timed (the restore measurement). The session's pipeline runs with the
defaults; `other_pipeline(mode)` runs one in another mode for a step instead. Every
process is a real one on loopback, stopped by its handle in `close()`.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from runtime.produce import produce_keys
from schema import PipelineMode, View
from tests.bench.cpu import retire_descendants, wait_quiet
from tests.bench.dataset import Dataset, produce_dataset
from tests.bench.graphql import GraphQLClient, many_body, point_body
from tests.bench.loadgen import LoadGenerator
from tests.bench.rss import RssSampler
from tests.bench.settings import BenchSettings
from tooling.broker import free_port
from tooling.localcluster import LocalCluster
from tooling.processes import ManagedProcess, wait_until

__all__ = [
    "MIN_WAIT_S",
    "Batches",
    "BenchError",
    "BenchSession",
    "PipelineStart",
    "RestoreTiming",
    "batches_in",
    "bench_process",
    "directory_bytes",
    "logged_mode",
    "samples_of",
    "view_batches",
]

Progress = Callable[[str], None]
# the gateway falls back to standby copies at most this many records behind (default 1000:
# the heavy load of earlier steps can leave standbys further behind); it changes nothing
# while every owner answers
GATEWAY_ENV = {"STATEFED_GATEWAY_MAX_LAG": "10000"}
# the session's pipeline runs the views in Real-Time Mode, whose goals the bench checks
# (issue 30); the freshness step's other pipeline runs the default, micro-batches
PIPELINE_ENV = {"STATEFED_PIPELINE_MODE": "real_time"}
_BATCH_METRIC = "statefed_pipeline_batch_duration_seconds"
_PHASE_METRIC = "statefed_pipeline_batch_phase_seconds"
# the shortest wait a step gets once the budget is spent (`BenchSession.timeout_s`)
MIN_WAIT_S = 10.0
RESTORE_POLL_S = 0.2  # /health polls cost the node's GIL; 0.2 s is 2% of a 10 s restore


class BenchError(RuntimeError):
    """A part of the system did not do what a measurement needs; names the part."""


@dataclass(frozen=True)
class RestoreTiming:
    """The timed start of the first node on a changelog holding the whole data set."""

    records: int
    produce_s: float  # writing the records to the changelog
    join_s: float  # process start -> partitions assigned (start-up and group join)
    restore_s: float  # assignment -> every partition applied to its end
    store_bytes: int  # the node's LevelDB directories right after


@dataclass(frozen=True)
class PipelineStart:
    """A pipeline's start: the mode its log says the bench view's query runs in, process
    start -> ready, and ready -> a key produced then visible through the gateway."""

    mode: PipelineMode
    start_s: float
    first_visible_s: float
    metrics_url: str | None = None  # the driver's /metrics


@dataclass(frozen=True)
class Batches:
    """A view query's batches: how many ended, their seconds in all, and those seconds by
    the phase Spark timed (`statefed_pipeline_batch_phase_seconds`)."""

    count: int
    seconds: float
    phases: dict[str, float]

    def since(self, before: Batches) -> Batches:
        """The batches that ended between the reading `before` and this one."""
        phases = {p: s - before.phases.get(p, 0.0) for p, s in self.phases.items()}
        return Batches(self.count - before.count, self.seconds - before.seconds, phases)

    def mean_ms(self) -> float | None:
        return None if self.count == 0 else round(self.seconds / self.count * 1000, 1)

    def phase_means_ms(self) -> dict[str, float]:
        """Each phase's mean milliseconds per batch, the longest first."""
        if self.count == 0:
            return {}
        means = {p: round(s / self.count * 1000, 1) for p, s in self.phases.items()}
        return dict(sorted(means.items(), key=lambda item: -item[1]))


def view_batches(metrics_url: str | None, view: str) -> Batches | None:
    """The batches of `view`'s query that ended so far, from the pipeline's /metrics; None
    when not served."""
    if metrics_url is None:
        return None
    try:
        text = httpx.get(metrics_url, timeout=5).text
    except httpx.HTTPError:
        return None
    return batches_in(text, view)


def samples_of(text: str, family: str) -> list[Sample]:
    """The samples of metric `family` in a Prometheus text exposition (none when absent)."""
    return [
        sample
        for found in text_string_to_metric_families(text)
        if found.name == family
        for sample in found.samples
    ]


def batches_in(text: str, view: str) -> Batches | None:
    """`view_batches` of a Prometheus text exposition."""
    found = {
        sample.name: sample.value
        for sample in samples_of(text, _BATCH_METRIC)
        if sample.labels.get("view") == view
    }
    count, seconds = found.get(f"{_BATCH_METRIC}_count"), found.get(f"{_BATCH_METRIC}_sum")
    if count is None or seconds is None:
        return None
    phases = {
        sample.labels["phase"]: sample.value
        for sample in samples_of(text, _PHASE_METRIC)
        if sample.labels.get("view") == view and sample.name == f"{_PHASE_METRIC}_total"
    }
    return Batches(int(count), seconds, phases)


def _metrics_url(port: int) -> str:
    """The /metrics of a pipeline serving it on `port` (STATEFED_PIPELINE_METRICS_PORT)."""
    return f"http://127.0.0.1:{port}/metrics"


def logged_mode(log: Path, view: View, asked: PipelineMode) -> PipelineMode:
    """The mode the pipeline's last start logged `view`'s query in (pipeline/job.py says
    "started in Real-Time Mode" for one), so figures carry the mode that ran; `asked` when
    the log level hides the line."""
    started = f"query statefed.{view.name} started"
    lines = [line for line in log.read_text(errors="replace").splitlines() if started in line]
    if not lines:
        return asked
    return PipelineMode.REAL_TIME if "in Real-Time Mode" in lines[-1] else PipelineMode.MICRO_BATCH


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def bench_process(name: str, module: str, args: list[str], log: Path) -> ManagedProcess:
    """A benchmark helper process (`python -m module args`) with a ManagedProcess handle."""
    process = ManagedProcess(name, [], {}, log)
    process.args = [sys.executable, "-m", module, *args]
    repo = str(Path(__file__).resolve().parents[2])
    process.env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": repo}
    return process


class BenchSession:
    """Owns the cluster, the data set and the helpers shared by the measurements."""

    def __init__(self, settings: BenchSettings, progress: Progress) -> None:
        self.settings = settings
        self.progress = progress
        # the session's pipeline serves /metrics here (the batches of the freshness step)
        self.pipeline_metrics_port = free_port()
        metrics = {"STATEFED_PIPELINE_METRICS_PORT": str(self.pipeline_metrics_port)}
        self.cluster = LocalCluster(
            settings.workdir / "cluster",
            partitions=settings.partitions,
            env={**os.environ, **GATEWAY_ENV, **PIPELINE_ENV, **metrics},
            progress=progress,
        )
        self.dataset = Dataset(settings.keys, settings.partitions)
        self.client = GraphQLClient()
        self.load = LoadGenerator(settings.workdir / "load")
        self.rss = RssSampler(self.pids)
        self.live: list[str] = []
        self.restore: RestoreTiming | None = None
        self.pipeline_started: PipelineStart | None = None
        self.pipeline_error: str | None = None
        self.started = time.monotonic()
        # the shortest wait of the current step that the budget cut (`timeout_s`), if any
        self.shortest_cut_s: float | None = None
        self._probe = self.dataset.one_per_partition()

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self.cluster.start_broker()
        self.rss.__enter__()

    def close(self) -> None:
        self.rss.__exit__(None, None, None)
        with contextlib.suppress(Exception):
            self.cluster.stop()
        self.client.close()

    @property
    def pipeline_metrics_url(self) -> str | None:
        """The /metrics of the session's pipeline (None before it started)."""
        started = self.pipeline_started
        return None if started is None else started.metrics_url

    def remaining_s(self) -> float:
        return self.settings.budget_s - (time.monotonic() - self.started)

    def timeout_s(self, wanted: float) -> float:
        """`wanted`, cut to what is left of the budget (at least `MIN_WAIT_S`): no wait
        overruns it. A cut is remembered for the step (`shortest_cut_s`)."""
        allowed = max(MIN_WAIT_S, min(wanted, self.remaining_s()))
        if allowed < wanted:
            cut = self.shortest_cut_s
            self.shortest_cut_s = allowed if cut is None else min(cut, allowed)
        return allowed

    def begin_step(self) -> None:
        """A step starts: no wait of it was cut yet."""
        self.shortest_cut_s = None

    def pids(self) -> dict[str, int]:
        """The running parts for the memory sampler: part name -> pid."""
        parts: dict[str, ManagedProcess | None] = {
            "gateway": self.cluster.gateway,
            "pipeline": self.cluster.pipeline,
            **{f"node {n}": self.cluster.nodes.get(n) for n in self.live},
        }
        return {
            name: p.pid
            for name, p in parts.items()
            if p is not None and p.pid is not None and p.running()
        }

    # -- addresses ---------------------------------------------------------------

    @property
    def gateway_url(self) -> str:
        return self.cluster.gateway_url

    def node_graphql(self, node_id: str) -> str:
        return f"{self.cluster.node_urls[node_id]}/graphql"

    def health(self, node_id: str) -> dict[str, Any] | None:
        try:
            document: dict[str, Any] = httpx.get(
                f"{self.cluster.node_urls[node_id]}/health", timeout=2.0
            ).json()
        except (httpx.HTTPError, ValueError):
            return None
        return document

    # -- nodes -------------------------------------------------------------------

    def ensure_nodes(self, count: int) -> None:
        """At least `count` live nodes, every partition owned once and caught up."""
        if not self.live:
            self._restore_first_node()
        while len(self.live) < count:
            self.start_node(f"n{len(self.cluster.nodes) + 1}")
        self.settle()

    def start_node(self, node_id: str, **extra_env: str) -> None:
        """LocalCluster.start_node plus environment for this node (e.g. no standbys).

        A node id names its state directory, so a restarted node resumes its stores.
        """
        port = free_port()
        base = self.cluster.base_dir
        env = self.cluster.env(
            STATEFED_NODE_ID=node_id,
            STATEFED_NODE_PORT=str(port),
            STATEFED_STATE_DIR=str(base / "state" / node_id),
            **extra_env,
        )
        process = ManagedProcess(f"node {node_id}", ["node"], env, base / f"node-{node_id}.log")
        self.cluster.nodes[node_id] = process.start()
        self.cluster.node_urls[node_id] = f"http://127.0.0.1:{port}"
        process.wait_for_http(f"http://127.0.0.1:{port}/health", 60.0)
        self.live.append(node_id)
        self.progress(f"node {node_id}: serving on port {port} {extra_env or ''}".rstrip())

    def shrink_to(self, count: int) -> None:
        """Stop the newest nodes cleanly until `count` are live, settling after each."""
        while len(self.live) > count:
            node_id = self.live.pop()
            self.cluster.nodes[node_id].stop()
            self.progress(f"node {node_id}: stopped")
            self.settle()

    def restart_node(self, node_id: str, **extra_env: str) -> None:
        """Stop a node cleanly, let the others take over, start it again with `extra_env`."""
        self.cluster.nodes[node_id].stop()
        self.live.remove(node_id)
        self.settle()
        self.start_node(node_id, **extra_env)
        self.settle()

    def _restore_first_node(self) -> None:
        self.progress(f"data set: producing {self.dataset.size:,} changelog records")
        produce_s = produce_dataset(self.cluster.bootstrap, self.dataset)
        began = time.monotonic()
        self.start_node("n1")
        assigned: list[float] = []

        def restored() -> bool:
            health = self.health("n1") or {}
            statuses = health.get("partitions", [])
            if statuses and not assigned:
                assigned.append(time.monotonic())
            applied = sum(s["appliedOffset"] for s in statuses)
            return health.get("state") == "RUNNING" and applied >= self.dataset.size

        wait_until(
            restored,
            self.timeout_s(300),
            f"node n1 to restore {self.dataset.size:,} records",
            RESTORE_POLL_S,
        )
        done = time.monotonic()
        assigned_at = assigned[0] if assigned else began
        self.restore = RestoreTiming(
            records=self.dataset.size,
            produce_s=produce_s,
            join_s=assigned_at - began,
            restore_s=done - assigned_at,
            store_bytes=directory_bytes(self.cluster.base_dir / "state" / "n1"),
        )
        self.progress(f"node n1: restored {self.dataset.size:,} records in {done - began:.1f} s")

    def owners(self) -> dict[int, str] | None:
        """partition -> node from the live nodes' health, or None while unsettled."""
        owners: dict[int, str] = {}
        for node_id in self.live:
            health = self.health(node_id)
            if health is None or health.get("state") != "RUNNING":
                return None
            if any(s["lag"] for s in health.get("partitions", [])):
                return None
            for partition in health.get("active", []):
                if partition in owners:
                    return None  # a rebalance is under way
                owners[partition] = node_id
        return owners if len(owners) == self.settings.partitions else None

    def settle(self, timeout_s: float = 180.0) -> None:
        """Wait until the nodes own every partition once, caught up, and the gateway agrees."""

        def settled() -> bool:
            owners = self.owners()
            if owners is None:
                return False
            return self.cluster.gateway is None or self._gateway_agrees(owners)

        wait_until(settled, self.timeout_s(timeout_s), f"nodes {self.live} to settle", 0.2)

    def _gateway_agrees(self, owners: dict[int, str]) -> bool:
        """One key per partition through the gateway: right counts, read from the owners."""
        keys = [self.dataset.key(i) for i in self._probe]
        try:
            document = self.client.post(self.gateway_url, many_body(keys))
        except (httpx.HTTPError, ValueError):
            return False
        if document.get("errors") or not document.get("data"):
            return False
        rows = document["data"][self.dataset.view.many_field]
        if [r and r["count"] for r in rows] != [self.dataset.count(i) for i in self._probe]:
            return False
        read = {e["partition"]: e["node"] for e in document["extensions"]["freshness"]}
        return read == owners

    def quiet(self, max_s: float = 15.0) -> float:
        """Wait until compactions and catch-up of the parts are over; returns the wait."""
        waited = wait_quiet(max_s)
        if waited > 1.0:
            self.progress(f"waited {waited:.1f} s for the cluster to go idle")
        return waited

    def kill_node(self, node_id: str) -> None:
        """SIGKILL a node (a crash); it is no longer live."""
        self.cluster.nodes[node_id].kill()
        self.live.remove(node_id)

    # -- gateway and pipeline ----------------------------------------------------

    def ensure_gateway(self) -> None:
        if self.cluster.gateway is None:
            self.cluster.start_gateway()
            if self.live:
                self.settle()

    def ensure_pipeline(self) -> None:
        """Start Spark, then wait for its first micro-batch to reach the gateway."""
        if self.pipeline_error is not None:
            raise BenchError(f"the pipeline failed before: {self.pipeline_error}")
        if self.cluster.pipeline is not None:
            return
        try:
            self._start_pipeline()
        except Exception as exc:
            self.pipeline_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            raise

    def _start_pipeline(self) -> None:
        self.ensure_gateway()
        began = time.monotonic()
        process = self.cluster.start_pipeline(timeout_s=self.timeout_s(240))
        start_s = time.monotonic() - began
        asked = self.cluster.env().get("STATEFED_PIPELINE_MODE") or PipelineMode.REAL_TIME.value
        mode = logged_mode(process.log_path, self.dataset.view, PipelineMode(asked))
        metrics_url = _metrics_url(self.pipeline_metrics_port)
        self.pipeline_started = PipelineStart(mode, start_s, self.first_visible_s(), metrics_url)
        self.progress(
            f"pipeline ({mode.value}): first event visible after "
            f"{self.pipeline_started.first_visible_s:.1f} s"
        )

    def first_visible_s(self) -> float:
        """Produce a key never produced before and wait until the gateway shows it; returns
        the wait. A pipeline on a fresh checkpoint first re-reads the input topic from its
        start, so this waits for that catch-up too (in the key's partition)."""
        key = f"bench-warmup-{time.time_ns()}"
        produce_keys(self.cluster.bootstrap, self.dataset.view.topic, [key])
        began = time.monotonic()

        def visible() -> bool:
            try:
                document = self.client.post(self.gateway_url, point_body(key))
            except (httpx.HTTPError, ValueError):
                return False
            return bool((document.get("data") or {}).get(self.dataset.view.point_field))

        what = f"key {key}, produced to the pipeline's input, to be visible"
        wait_until(visible, self.timeout_s(120), what, 0.1)
        return time.monotonic() - began

    def stop_pipeline(self) -> None:
        """Stop the session's pipeline cleanly; the next `ensure_pipeline` starts it again,
        resuming its checkpoint."""
        process, self.cluster.pipeline = self.cluster.pipeline, None
        if process is not None:
            if process.pid is not None:
                retire_descendants(process.pid)
            process.stop()
            self.progress("pipeline: stopped")

    @contextlib.contextmanager
    def other_pipeline(self, mode: PipelineMode) -> Iterator[PipelineStart]:
        """A pipeline with STATEFED_PIPELINE_MODE=`mode` instead of the session's until the
        block ends, on a checkpoint directory of its own: Spark resumes no checkpoint in the
        other mode, and the session's stays as it was. Not sampled for memory (not the
        session's pipeline)."""
        self.stop_pipeline()
        self.ensure_gateway()
        checkpoints = self.cluster.base_dir / f"checkpoints-{mode.value}-{time.time_ns()}"
        port = free_port()
        env = self.cluster.env(
            STATEFED_PIPELINE_MODE=mode.value,
            STATEFED_CHECKPOINT_DIR=str(checkpoints),
            STATEFED_PIPELINE_METRICS_PORT=str(port),
        )
        log = self.cluster.base_dir / f"pipeline-{mode.value}.log"
        process = ManagedProcess(f"{mode.value} pipeline", ["pipeline"], env, log)
        self.progress(f"pipeline ({mode.value}): starting Spark on {checkpoints}")
        began = time.monotonic()
        process.start()
        try:
            process.wait_for_log("statefed pipeline: ready", self.timeout_s(240))
            start_s = time.monotonic() - began
            started = PipelineStart(
                logged_mode(log, self.dataset.view, mode),
                start_s,
                self.first_visible_s(),
                _metrics_url(port),
            )
            self.progress(f"pipeline ({started.mode.value}): ready in {start_s:.1f} s")
            yield started
        finally:
            if process.pid is not None:
                retire_descendants(process.pid)
            process.stop()
            self.progress(f"pipeline ({mode.value}): stopped")
