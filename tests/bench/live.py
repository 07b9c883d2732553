"""Live: produce -> push latency through GraphQL subscriptions, and memory per subscriber.

One subscriber process (`tests.bench.subscribers`) opens `live_subscribers` subscriptions
`wordCount(word:)`, one per fresh key, over `live_connections` graphql-transport-ws
WebSockets to the gateway. Then, at each rate of `live_rates`, this process writes count
records for those keys (round robin) straight to the view's changelog, as the pipeline
would, with `count` = microseconds since the step began on CLOCK_MONOTONIC at the
`produce()` call. The subscriber stamps each update's arrival on the same clock, so an
update's latency is its arrival minus its count: producer (linger 5 ms), broker, the
node's apply and feed, the gateway's hub and subscription, the WebSocket. The pipeline
(Spark) is not in the path: its own delivery -> changelog latency is the freshness section.

Each pushed update is one produced record; the rest were merged: a subscription whose
reader is behind gets each key's newest row (gateway.subscriptions.updates). Memory: RSS
of the gateway and the nodes before the subscriptions, with half and with all of them
(before anything is produced: the rings of the nodes' feeds fill with the changes, which
is no cost of a subscriber).

Where the time goes: a tap process (`tests.bench.feedtap`) follows one subscribed key in
`_TAP_EVERY` on each partition's owner, stamping the changes' arrival on the same clock
(produce -> the node's feed), and each part's run-queue time while producing says how long
its threads were ready to run with no core free.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import psutil
from confluent_kafka import Producer

from runtime.produce import new_producer
from schema import CountRow, encode_count, partition_for
from tests.bench.cpu import busy_seconds, run_queue_seconds
from tests.bench.profile import Profile, ProfileRecorder, find_py_spy, write_profiles
from tests.bench.report import Report, Section, fmt_bytes, fmt_ms, fmt_num
from tests.bench.session import BenchError, BenchSession, bench_process
from tests.bench.stats import Summary
from tooling.processes import ManagedProcess, wait_until

__all__ = [
    "NAME",
    "TITLE",
    "Pushes",
    "RateRun",
    "feed_latencies",
    "measure",
    "pushes_of",
    "write_runs",
]

NAME = "live"
TITLE = "Live: produce -> push through subscriptions, memory per subscriber"
_DRAIN_S = 20.0  # after the last produce, how long pushes may still come
_QUIET_S = 1.0  # no push for this long after the last produce: drained
_BUSY_SUBSCRIBER = 0.8  # cores: above this the subscriber may limit what it receives
_TAP_EVERY = 10  # the feed tap follows one subscribed key in this many


@dataclass
class RateRun:
    """One rate: what was produced (counts are produce times), and the CPU it cost."""

    rate: int
    seconds: float
    produced: int = 0
    produce_s: float = 0.0
    first_us: int = 0  # produce time of the first record of the run
    last_us: int = 0  # and of the last
    last_by_key: dict[int, int] = field(default_factory=dict)  # key index -> last count
    drained: bool = False
    cores: dict[str, float] = field(default_factory=dict)  # part -> average cores
    cpu_s: dict[str, float] = field(default_factory=dict)  # part -> CPU seconds of the run
    machine_busy: float = 0.0  # share of the machine's cores busy (every process)
    # while producing: per part, its threads waiting for a core (average count), and the
    # share of the time the gateway's event loop (its main thread) waited for one
    waiting: dict[str, float] = field(default_factory=dict)
    loop_waiting: float = 0.0
    feed_ms: list[float] = field(default_factory=list)  # produce -> the owner's feed (tap)
    profiles: list[Profile] = field(default_factory=list)  # of the top rate

    @property
    def achieved_rate(self) -> float:
        return self.produced / self.produce_s if self.produce_s else 0.0


@dataclass(frozen=True)
class Pushes:
    """What the subscriber received of one run."""

    latencies_ms: list[float]
    duplicates: int  # the same (key, offset) twice
    out_of_order: int  # an offset not above the key's previous one
    keys_final: int  # keys whose last pushed count is the last produced

    def growth_ms(self) -> float:
        """p50 of the last third of the pushes (by produce time) minus that of the first
        third: a push path that keeps up shows none, a backlog shows its growth."""
        third = len(self.latencies_ms) // 3
        if third == 0:
            return 0.0
        last = Summary.of(self.latencies_ms[-third:]).p50
        return last - Summary.of(self.latencies_ms[:third]).p50


def _cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for part, pid in pids.items():
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds[part] = t.user + t.system
    return seconds


def _rss(pids: dict[str, int]) -> dict[str, int]:
    found: dict[str, int] = {}
    for part, pid in pids.items():
        try:
            found[part] = psutil.Process(pid).memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return found


def _parts(session: BenchSession) -> dict[str, int]:
    """The gateway's and the nodes' pids."""
    return {p: pid for p, pid in session.pids().items() if p == "gateway" or p.startswith("node")}


def _path_parts(session: BenchSession) -> dict[str, int]:
    """Every process on the push path: the gateway, the nodes, the broker, and this one
    (the producer)."""
    broker = getattr(session.cluster.broker, "pid", None)
    return {**_parts(session), **({"broker": broker} if broker else {}), "producer": os.getpid()}


def _start_profiles(
    session: BenchSession, seconds: float
) -> tuple[ProfileRecorder | None, list[Any]]:
    """py-spy on the gateway and the nodes for `seconds`, the GIL holder only: each
    process's Python work (on a saturated machine, also its time waiting for a core)."""
    py_spy = find_py_spy(session.settings.py_spy)
    if py_spy is None:
        return None, []
    recorder = ProfileRecorder(py_spy, session.settings.workdir / "profiles-live")
    return recorder, [
        recorder.start(part, pid, seconds, gil=True) for part, pid in _parts(session).items()
    ]


def _status(path: Path) -> dict[str, Any]:
    try:
        status: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return {}
    return status


def _written(path: Path, process: ManagedProcess, missing: str) -> dict[str, Any]:
    """The JSON a stopped helper process wrote to `path`; BenchError saying `missing`, why
    and the end of its log when there is none."""
    try:
        written: dict[str, Any] = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise BenchError(f"{missing} ({exc}): {process.log_tail()}") from exc
    return written


class _Subscribers:
    """The subscriber process and its files."""

    def __init__(self, session: BenchSession, keys: list[str]) -> None:
        base = session.settings.workdir / "live"
        base.mkdir(parents=True, exist_ok=True)
        self.status_path, self.out_path = base / "status.json", base / "samples.json"
        self.status_path.unlink(missing_ok=True)
        self.out_path.unlink(missing_ok=True)
        keys_path = base / "keys.txt"
        keys_path.write_text("\n".join(keys) + "\n")
        url = "ws://" + session.gateway_url.removeprefix("http://")
        args = [
            *("--url", url, "--keys", str(keys_path)),
            *("--connections", str(session.settings.live_connections)),
            *("--status", str(self.status_path), "--out", str(self.out_path)),
            *("--first", str(len(keys) // 2)),
        ]
        log = base / "subscribers.log"
        self.process: ManagedProcess = bench_process(
            "subscribers", "tests.bench.subscribers", args, log
        )
        self.count = len(keys)

    def status(self) -> dict[str, Any]:
        return _status(self.status_path)

    def start(self) -> None:
        """Start with the first half of the subscriptions."""
        self.process.start()

    def subscribe_rest(self) -> None:
        """Open the second half of the subscriptions."""
        if self.process.pid is not None:
            os.kill(self.process.pid, signal.SIGUSR1)

    def wait_ready(self, count: int, timeout_s: float) -> None:
        """Wait until `count` subscriptions had their first update."""

        def ready() -> bool:
            if not self.process.running():
                raise BenchError(f"the subscriber process exited: {self.process.log_tail()}")
            status = self.status()
            if status.get("errors") or status.get("closed"):
                raise BenchError(f"subscribing failed: {status}")
            return bool(status.get("ready") == count)

        wait_until(ready, timeout_s, f"{count} subscriptions to get their first update", 0.2)

    def drain(self, timeout_s: float) -> bool:
        """Wait until no update came for `_QUIET_S` (counted from now at the earliest); False
        when pushes went on past `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        began_us = time.monotonic_ns() // 1000
        while time.monotonic() < deadline:
            last = max(began_us, self.status().get("last_arrival_us") or 0)
            if time.monotonic_ns() // 1000 - last > _QUIET_S * 1e6:
                return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        """Stop the process: on SIGTERM it closes its connections and writes its samples."""
        if self.process.pid is not None:
            self.process.stop()

    def samples(self) -> dict[str, Any]:
        return _written(self.out_path, self.process, "the subscriber wrote no samples")


def _warm_producer(session: BenchSession, key: str) -> Producer:
    """A producer that has written one record (count 0, for `key`, which nobody subscribes
    to): it has the changelog's metadata and its idempotent producer id, so the first
    records of a rate do not wait for them (about 0.8 s, which was counted as push latency)."""
    producer = new_producer(session.cluster.bootstrap)
    view, partitions = session.dataset.view, session.settings.partitions
    value = encode_count(CountRow(key, 0, int(time.time() * 1000)))
    producer.produce(view.changelog_topic, value, key.encode(), partition_for(key, partitions))
    if producer.flush(30.0):
        raise BenchError(f"the live step's producer could not write to {view.changelog_topic}")
    return producer


def _produce(
    session: BenchSession, producer: Producer, keys: list[str], run: RateRun, epoch_us: int
) -> None:
    """`run.rate` records/s for `run.seconds`, round robin over `keys`, count = produce time."""
    view, partitions = session.dataset.view, session.settings.partitions
    topic = view.changelog_topic
    targets = [(key.encode(), partition_for(key, partitions)) for key in keys]
    total = int(run.rate * run.seconds)
    began = time.monotonic()
    while run.produced < total and time.monotonic() - began < run.seconds + 5:
        due = min(total, int((time.monotonic() - began) * run.rate) + 1)
        while run.produced < due:
            index = run.produced % len(keys)
            key, partition = targets[index]
            count = time.monotonic_ns() // 1000 - epoch_us
            value = encode_count(CountRow(keys[index], count, int(time.time() * 1000)))
            try:
                producer.produce(topic, value, key, partition)
            except BufferError:
                break  # the local queue is full: serve it below, then go on
            run.first_us = run.first_us or count
            run.last_us = count
            run.last_by_key[index] = count
            run.produced += 1
        producer.poll(0.001)
    run.produce_s = time.monotonic() - began
    left = producer.flush(10.0)
    if left:
        raise BenchError(f"{left} records undelivered to {topic}")


def _delete(session: BenchSession, keys: list[str]) -> None:
    """Tombstones for `keys`: their counts (produce times, far above the data set's) must
    not stay in the view for the steps after this one (the top-N of fan-out)."""
    producer = new_producer(session.cluster.bootstrap)
    view, partitions = session.dataset.view, session.settings.partitions
    for key in keys:
        producer.produce(view.changelog_topic, None, key.encode(), partition_for(key, partitions))
        producer.poll(0)
    left = producer.flush(10.0)
    if left:
        raise BenchError(f"{left} tombstones undelivered to {view.changelog_topic}")


def _run_rate(
    session: BenchSession,
    subscribers: _Subscribers,
    producer: Producer,
    keys: list[str],
    rate: int,
    epoch_us: int,
) -> RateRun:
    run = RateRun(rate, session.settings.live_s)
    pids = {**_path_parts(session), "subscriber": subscribers.process.pid or 0}
    profiled = rate == max(session.settings.live_rates)
    recorder, started = _start_profiles(session, run.seconds) if profiled else (None, [])
    cpu_before, busy_before, began = _cpu_seconds(pids), busy_seconds(), time.monotonic()
    waits_before = _waits(pids)
    _produce(session, producer, keys, run, epoch_us)
    _note_waits(run, pids, waits_before, time.monotonic() - began)
    run.drained = subscribers.drain(_DRAIN_S)
    seconds = time.monotonic() - began
    cpu_after = _cpu_seconds(pids)
    run.machine_busy = (busy_seconds() - busy_before) / seconds / (psutil.cpu_count() or 1)
    run.cpu_s = {
        part: cpu_after[part] - cpu_before[part] for part in cpu_after if part in cpu_before
    }
    run.cores = {part: round(cpu / seconds, 2) for part, cpu in run.cpu_s.items()}
    if recorder is not None:
        run.profiles = [recorder.finish(one, run.seconds + 20) for one in started]
    session.progress(
        f"live at {rate:,}/s: produced {run.produced:,} in {run.produce_s:.1f} s, "
        f"{subscribers.status().get('received', 0):,} pushes so far, cores {run.cores}"
    )
    return run


def _waits(pids: dict[str, int]) -> dict[str, float]:
    """Run-queue seconds so far of each part's threads, and of the gateway's main thread."""
    waits = {part: run_queue_seconds(pid) for part, pid in pids.items()}
    if "gateway" in pids:
        waits["gateway loop"] = run_queue_seconds(pids["gateway"], main_only=True)
    return waits


def _note_waits(
    run: RateRun, pids: dict[str, int], before: dict[str, float], seconds: float
) -> None:
    after = _waits(pids)
    waited = {part: (after[part] - before[part]) / seconds for part in after if part in before}
    run.loop_waiting = round(waited.pop("gateway loop", 0.0), 3)
    run.waiting = {part: round(w, 2) for part, w in waited.items()}


def _owners(session: BenchSession) -> dict[int, str]:
    """partition -> the node that owns it, once the nodes agree."""
    found: dict[int, str] = {}

    def settled() -> bool:
        owners = session.owners()
        if owners is not None:
            found.update(owners)
        return owners is not None

    wait_until(settled, session.timeout_s(60), "the nodes to own every partition once", 0.2)
    return found


class _FeedTap:
    """The feed tap process (`tests.bench.feedtap`): one subscribed key in `_TAP_EVERY` of
    each partition, followed on the partition's owner."""

    def __init__(self, session: BenchSession, keys: list[str], owners: dict[int, str]) -> None:
        base = session.settings.workdir / "live"
        self.out_path = base / "feedtap.json"
        self.out_path.unlink(missing_ok=True)
        partitions = session.settings.partitions
        sampled: dict[int, list[str]] = {}
        for key in keys[::_TAP_EVERY]:
            sampled.setdefault(partition_for(key, partitions), []).append(key)
        args = ["--out", str(self.out_path)]
        for partition, chosen in sorted(sampled.items()):
            keys_path = base / f"tap-{partition}.txt"
            keys_path.write_text("\n".join(chosen) + "\n")
            owner = owners[partition]
            url = session.cluster.node_urls[owner]
            args += ["--follow", owner, url, str(partition), str(keys_path)]
        self.process = bench_process("feedtap", "tests.bench.feedtap", args, base / "feedtap.log")

    def start(self) -> None:
        self.process.start()

    def stop(self) -> None:
        self.process.stop()

    def recorded(self) -> dict[str, Any]:
        """What the stopped tap recorded: {"changes": [[count, arrival_us], ...], "errors"}."""
        return _written(self.out_path, self.process, "the feed tap wrote nothing")


def feed_latencies(changes: list[list[int]], run: RateRun, epoch_us: int) -> list[float]:
    """Produce -> arrival at the tap (ms) of the changes `run` produced, in produce order."""
    timed = sorted(
        (count, (arrival - epoch_us - count) / 1000)
        for count, arrival in changes
        if run.first_us <= count <= run.last_us
    )
    return [latency for _, latency in timed]


def pushes_of(samples: dict[str, Any], run: RateRun, epoch_us: int) -> Pushes:
    """The updates of `run` (their counts are its produce times), checked in the order they
    arrived; latencies in produce order."""
    timed: list[tuple[int, float]] = []
    seen: set[tuple[int, int]] = set()
    previous: dict[int, int] = {}
    newest: dict[int, int] = {}
    duplicates = out_of_order = 0
    rows = zip(
        samples["ident"], samples["count"], samples["offset"], samples["arrival_us"], strict=True
    )
    for ident, count, offset, arrival in rows:  # in arrival order
        if not run.first_us <= count <= run.last_us:
            continue
        if (ident, offset) in seen:
            duplicates += 1
            continue
        seen.add((ident, offset))
        if offset <= previous.get(ident, -1):
            out_of_order += 1
        previous[ident] = offset
        newest[ident] = max(count, newest.get(ident, 0))
        timed.append((count, (arrival - epoch_us - count) / 1000))
    final = sum(1 for ident, last in run.last_by_key.items() if newest.get(ident) == last)
    latencies = [latency for _, latency in sorted(timed)]
    return Pushes(latencies, duplicates, out_of_order, final)


def _where_time_goes(section: Section, runs: list[RateRun], pushes: list[Pushes]) -> None:
    """Per rate: produce -> the owner's feed (the tap) against produce -> subscriber, and
    how long each part waited for a core while the records were produced."""
    table = section.table(
        "target rate",
        "to the node's feed p50",
        "p99",
        "to the subscriber p50",
        "p99",
        "gateway CPU per push",
        "gateway event loop waiting for a core",
        "threads waiting for a core: gateway / nodes / broker / producer / subscriber",
    )
    for run, got in zip(runs, pushes, strict=True):
        feed = Summary.of(run.feed_ms) if run.feed_ms else None
        push = Summary.of(got.latencies_ms)
        nodes = sum(w for part, w in run.waiting.items() if part.startswith("node"))
        per_push = _per_push_us(run, got)
        table.add(
            fmt_num(run.rate) + "/s",
            "n/a" if feed is None else fmt_ms(feed.p50),
            "n/a" if feed is None else fmt_ms(feed.p99),
            fmt_ms(push.p50),
            fmt_ms(push.p99),
            "n/a" if per_push is None else f"{per_push:.0f} µs",
            f"{run.loop_waiting:.0%}",
            " / ".join(
                f"{w:.2f}"
                for w in (
                    run.waiting.get("gateway", 0),
                    nodes,
                    run.waiting.get("broker", 0),
                    run.waiting.get("producer", 0),
                    run.waiting.get("subscriber", 0),
                )
            ),
        )
    section.notes.append(
        "Where the time goes: a tap (tests.bench.feedtap) follows one subscribed key in "
        f"{_TAP_EVERY} on each partition's owner, as the gateway follows the node's feed; "
        "produce -> the tap is the producer, the broker and the node's apply and feed, the "
        "rest of a push's latency is the gateway's and the WebSocket's. Waiting for a core: "
        "from Linux's run-queue time of each thread (/proc/PID/task/TID/schedstat) while the "
        "records were produced, as an average number of each part's threads ready to run "
        "with no core free; the gateway's event loop (its main thread) as a share of that "
        "time. A loop that waits for a core most of the time reads its feeds late whatever "
        "its own cost per change: the machine, not the loop, sets the pace. Gateway CPU per "
        "push: the gateway's CPU time over the run (produce and drain) by the updates pushed."
    )


def _per_push_us(run: RateRun, got: Pushes) -> float | None:
    """The gateway's CPU time over the run by the updates pushed, in us."""
    cpu = run.cpu_s.get("gateway")
    if cpu is None or not got.latencies_ms:
        return None
    return cpu / len(got.latencies_ms) * 1e6


def _memory(section: Section, rss: list[dict[str, int]], n: int) -> None:
    """RSS with none, half and all `n` subscriptions: per 1,000 from the second half (what
    one more subscription costs) and from none (with what the first ones set up)."""
    half = n - n // 2
    table = section.table(
        "part",
        "RSS before",
        f"with {n // 2:,}",
        f"with {n:,}",
        "per 1,000 (second half)",
        "per 1,000 (all)",
    )
    figures: dict[str, Any] = {}
    for part in sorted(rss[2]):
        if part not in rss[0] or part not in rss[1]:
            continue
        marginal = (rss[2][part] - rss[1][part]) * 1000 / half
        whole = (rss[2][part] - rss[0][part]) * 1000 / n
        figures[part] = {
            "rss": [r[part] for r in rss],
            "per_1000_bytes": round(marginal),
            "per_1000_from_none_bytes": round(whole),
        }
        table.add(part, *(fmt_bytes(r[part]) for r in rss), fmt_bytes(marginal), fmt_bytes(whole))
    nodes = [f for part, f in figures.items() if part.startswith("node")]
    gateway = figures.get("gateway", {}).get("per_1000_bytes")
    section.figures["memory"] = {
        "subscriptions": n,
        "parts": figures,
        "gateway_per_1000_bytes": gateway,
        "gateway_per_1000_mib": None if gateway is None else round(gateway / (1 << 20), 2),
        # one follow per subscription (each names one key, so one partition)
        "nodes_per_1000_follows_bytes": sum(f["per_1000_bytes"] for f in nodes) if nodes else None,
    }


def write_runs(
    section: Section, runs: list[RateRun], pushes: list[Pushes], subscribers: int
) -> None:
    table = section.table(
        "target rate",
        "achieved",
        "produced",
        "pushed",
        "p50",
        "p99",
        "max",
        "growth",
        "keys at last value",
        "duplicates",
        "cores: gateway / nodes / broker / producer / subscriber",
        "machine busy",
    )
    figures = {}
    for run, got in zip(runs, pushes, strict=True):
        s = Summary.of(got.latencies_ms)
        fraction = len(got.latencies_ms) / run.produced if run.produced else None
        nodes = sum(c for part, c in run.cores.items() if part.startswith("node"))
        per_push = _per_push_us(run, got)
        figures[f"rate_{run.rate}"] = {
            "rate": run.rate,
            "achieved_rate": round(run.achieved_rate),
            "produced": run.produced,
            "pushed": len(got.latencies_ms),
            "pushed_fraction": None if fraction is None else round(fraction, 4),
            "latency_ms": s.to_json(),
            "growth_ms": round(got.growth_ms(), 1),
            "keys_at_last_value": got.keys_final,
            "keys": len(run.last_by_key),
            "duplicates": got.duplicates,
            "out_of_order": got.out_of_order,
            "drained": run.drained,
            "cores": run.cores,
            "gateway_cpu_us_per_push": None if per_push is None else round(per_push, 1),
            "machine_busy": round(run.machine_busy, 3),
            "node_feed_latency_ms": Summary.of(run.feed_ms).to_json() if run.feed_ms else None,
            "threads_waiting_for_a_core": run.waiting,
            "gateway_loop_waiting_share": run.loop_waiting,
        }
        table.add(
            fmt_num(run.rate) + "/s",
            fmt_num(run.achieved_rate) + "/s",
            fmt_num(run.produced),
            "n/a" if fraction is None else f"{fmt_num(len(got.latencies_ms))} ({fraction:.1%})",
            fmt_ms(s.p50),
            fmt_ms(s.p99),
            fmt_ms(s.max),
            fmt_ms(got.growth_ms()),
            f"{got.keys_final:,} of {len(run.last_by_key):,}",
            got.duplicates,
            " / ".join(
                f"{c:.2f}"
                for c in (
                    run.cores.get("gateway", 0),
                    nodes,
                    run.cores.get("broker", 0),
                    run.cores.get("producer", 0),
                    run.cores.get("subscriber", 0),
                )
            ),
            f"{run.machine_busy:.0%}",
        )
        if got.out_of_order:
            section.errors.append(
                f"at {run.rate:,}/s {got.out_of_order} updates came with an offset not above "
                "their key's previous one"
            )
        if not run.drained:
            section.notes.append(
                f"At {run.rate:,}/s pushes still arrived {_DRAIN_S:.0f} s after the last "
                "produce: the push path fell behind the rate (latency grows with the run)."
            )
        if run.cores.get("subscriber", 0) > _BUSY_SUBSCRIBER:
            section.notes.append(
                f"At {run.rate:,}/s the subscriber process used {run.cores['subscriber']:.2f} "
                "cores: it may have limited the pushes it took."
            )
    section.figures["runs"] = figures
    _where_time_goes(section, runs, pushes)
    section.figures["subscribers"] = subscribers
    top = max(runs, key=lambda run: run.rate, default=None)
    if top is not None:
        write_profiles(
            section,
            top.profiles,
            f"Profiles: py-spy at 250 Hz over the {top.rate:,}/s run's {top.seconds:g} s of "
            "produce, of the gateway and each node, only the thread holding the GIL sampled: "
            "each process's Python work, and on a busy machine also its time waiting for a "
            "core while holding the GIL.",
        )


def measure(session: BenchSession, report: Report) -> None:
    """Subscribe, measure memory, then produce at each rate and time the pushes."""
    section = report.section(NAME, TITLE)
    session.ensure_nodes(2)
    session.ensure_gateway()
    settings = session.settings
    tag = uuid.uuid4().hex[:6]
    keys = [f"lv{tag}k{i:05d}" for i in range(settings.live_subscribers)]
    warm_key = f"lv{tag}warm"
    section.figures["idle_wait_seconds"] = round(session.quiet(), 1)
    parts = _parts(session)
    rss = [_rss(parts)]
    subscribers = _Subscribers(session, keys)
    epoch_us = time.monotonic_ns() // 1000
    runs: list[RateRun] = []
    tap: _FeedTap | None = None
    try:
        subscribers.start()
        subscribers.wait_ready(len(keys) // 2, session.timeout_s(120))
        session.quiet(5.0)
        rss.append(_rss(parts))
        began = time.monotonic()
        subscribers.subscribe_rest()
        subscribers.wait_ready(len(keys), session.timeout_s(120))
        ready_s = time.monotonic() - began
        session.progress(f"live: {len(keys):,} subscriptions had their first update")
        session.quiet(5.0)
        rss.append(_rss(parts))
        tap = _FeedTap(session, keys, _owners(session))
        tap.start()
        producer = _warm_producer(session, warm_key)
        for rate in settings.live_rates:
            runs.append(_run_rate(session, subscribers, producer, keys, rate, epoch_us))
    finally:
        if tap is not None:
            tap.stop()
        subscribers.stop()
        _delete(session, [*keys, warm_key])
    samples = subscribers.samples()
    tapped = tap.recorded() if tap is not None else {"changes": [], "errors": []}
    for run in runs:
        run.feed_ms = feed_latencies(tapped["changes"], run, epoch_us)
    for text in tapped["errors"]:
        section.errors.append(f"the feed tap: {text}")
    _memory(section, rss, len(keys))
    pushes = [pushes_of(samples, run, epoch_us) for run in runs]
    write_runs(section, runs, pushes, len(keys))
    section.figures["second_half_subscribe_seconds"] = round(ready_s, 2)
    for text in samples.get("error_texts", []):
        section.errors.append(f"a subscription error: {text}")
    for text in samples.get("closed", []):
        section.errors.append(f"a subscriber connection ended: {text}")
    _notes(section, session, len(keys), ready_s)


def _notes(section: Section, session: BenchSession, subscriptions: int, ready_s: float) -> None:
    settings = session.settings
    section.notes.append(
        f"{subscriptions:,} subscriptions `wordCount(word:)`, one per key, over "
        f"{settings.live_connections} graphql-transport-ws WebSockets (no compression) from "
        f"one asyncio process, opened in two halves (memory is read after each); the second "
        f"{subscriptions - subscriptions // 2:,} had their first update {ready_s:.2f} s after "
        "the subscriber was told to open them. "
        f"{len(session.live)} nodes; each subscription starts on a follow of its own and "
        "moves onto its partition's shared follow once caught up (one per partition)."
    )
    section.notes.append(
        "Latency: from the `produce()` call (count records straight to the changelog, "
        f"round robin over the keys, {settings.live_s:g} s per rate) to the update's arrival "
        "at the subscriber, both on CLOCK_MONOTONIC. The pipeline is not in the path: add "
        "the freshness section's delivery -> changelog part for event -> push."
    )
    section.notes.append(
        "Pushed: updates received of the records produced. The rest were merged: a "
        "subscription whose reader is behind (an update waited over "
        "STATEFED_GATEWAY_SUBSCRIPTION_MAX_WAIT_MS, 100 ms) gets each key's newest row; "
        "`keys at last value`: keys whose "
        "newest update shows the last record produced for them. Cores: average over the "
        "produce time and the drain after it (until no push came for 1 s); the producer is "
        "the benchmark's own process. Machine busy: the share of all the machine's cores "
        "busy meanwhile, every process counted: near 100% the parts wait for a core, and "
        "latency is queueing, not work."
    )
    section.notes.append(
        "Memory: RSS of each process before subscribing, once half and once all the "
        "subscriptions had their first update (nothing produced yet); per 1,000 = the growth "
        "scaled, over the second half (what more subscriptions cost) and over all (with what "
        "the first ones set up: connections, code paths first used). RSS moves with "
        "Python's allocator too: read it as an estimate."
    )
