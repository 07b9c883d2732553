"""How big and how long each measurement is; `make bench` must stay under 10 minutes."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

__all__ = ["BenchSettings"]


@dataclass(frozen=True)
class BenchSettings:
    """Sizes and durations of one run; `quick()` shrinks them for a smoke run."""

    workdir: Path
    keys: int = 1_000_000  # changelog records restored, and the query data set
    partitions: int = 6
    # a step that would start after this is skipped; 540 s kept `make bench` under 10 minutes
    # until the peers step (about 120 s: six targets, two query forms, two connection counts,
    # two rounds of 2 s each) joined it: with it a full run takes about 11 minutes; and the
    # aggregates step (a second Spark process, seven bursts) adds about 2 minutes; the
    # freshness step in micro-batches (one more Spark start, the steady rates) about 80 s;
    # the freshness warm-up until a re-read backlog drained up to 60 s, and at 860 s the
    # ramp and the failover steps no longer fitted (1,000 s); the shapes step (about 170 s:
    # six query shapes, five targets, two connection counts, 2 s each) took it to 1,200 s,
    # and its second round (about 130 s) to 1,330 s
    budget_s: float = 1330.0
    warmup_s: float = 1.0
    point_s: float = 5.0  # per (target, connections) load run
    point_connections: tuple[int, ...] = (1, 32)
    point_keys: int = 2000  # distinct keys the point load cycles through
    peers_s: float = 2.0  # per (target, form, connections) load run of the peers step
    peers_rounds: int = 2  # interleaved: every cell once, then every cell again
    shapes_s: float = 2.0  # per (shape, target, connections) load run of the shapes step
    shapes_rounds: int = 2  # interleaved, as the peers step's
    fanout_s: float = 3.0
    fanout_keys: int = 100
    top_limit: int = 10
    # events/s measured in both pipeline modes, side by side; the first is the freshness
    # target's (the 1,000/s of issue 6, and with 10,000/s those of issue 30)
    steady_rates: tuple[int, ...] = (1000, 10_000)
    steady_s: float = 15.0  # per steady rate and mode
    freshness_warmup_s: float = 6.0  # at the first steady rate, not measured: Spark's first batches
    ramp_rates: tuple[int, ...] = (20_000, 50_000, 100_000)  # Real-Time Mode, above the steady
    ramp_s: float = 12.0
    probes_per_s: int = 20  # freshness probes among the events
    poll_interval_s: float = 0.05  # polling costs the gateway CPU Spark needs
    throughput_events: int = 1_000_000
    throughput_vocabulary: int = 1000
    # per view of the aggregates step: 200,000 took 300-400 s, count_distinct alone ~105 s
    aggregate_events: int = 50_000
    failover_timeout_s: float = 90.0
    live_subscribers: int = 1000  # subscriptions of the live step, one key each
    live_connections: int = 10  # WebSockets they share (the gateway allows 100 per connection)
    live_rates: tuple[int, ...] = (1000, 10_000)  # changelog records/s over their keys
    live_s: float = 10.0  # producing at each rate
    py_spy: str | None = None
    profile_s: float = 4.0

    def __post_init__(self) -> None:
        if self.keys < 1000:
            raise ValueError(f"--keys must be at least 1000, got {self.keys}")
        if self.shapes_rounds < 1:
            raise ValueError(f"shapes_rounds must be at least 1, got {self.shapes_rounds}")
        if self.point_s <= 0 or self.fanout_s <= 0 or self.steady_s <= 0:
            raise ValueError("load durations must be positive")
        if not self.steady_rates:
            raise ValueError("steady_rates needs at least one rate (the freshness target's)")

    def quick(self) -> BenchSettings:
        """A smoke run: small data set, short loads (for developing the benchmark)."""
        return replace(
            self,
            keys=min(self.keys, 100_000),
            warmup_s=0.5,
            point_s=2.0,
            fanout_s=1.5,
            steady_s=6.0,
            freshness_warmup_s=2.0,
            ramp_rates=(20_000,),
            ramp_s=4.0,
            throughput_events=100_000,
            aggregate_events=20_000,
            live_s=3.0,
            profile_s=2.0,
            shapes_rounds=1,
        )
