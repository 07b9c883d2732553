"""The demo domain's events: words, page views per host and bookings per customer.

Values of `pageviews` and `bookings` are JSON with the event time in ms under
`timestamp` (the catalogue's `event_time_field`); words carry no value and use the Kafka
timestamp. The clock is a parameter so the data is reproducible.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import orjson

from runtime.produce import Record

__all__ = [
    "DEMO_WORDS",
    "HOSTS",
    "SEED_WORDS",
    "TRIPS",
    "bookings",
    "pageviews",
    "skewed_words",
    "trickle",
    "words",
]

DEMO_WORDS = (
    "kafka",
    "franz",
    "caste",
    "trail",
    "castle",
    "spark",
    "stream",
    "state",
    "query",
    "graph",
    "node",
    "gateway",
    "partition",
    "offset",
    "replica",
    "leader",
    "follower",
    "broker",
    "topic",
    "record",
    "window",
    "latest",
    "history",
    "count",
    "merge",
    "route",
    "shard",
    "lambda",
    "kappa",
    "table",
    "store",
    "index",
    "level",
    "batch",
    "commit",
)

SEED_WORDS = ["kafka"] * 8 + ["franz"] * 3 + ["caste"] * 2 + ["trail", "castle"]
HOSTS = ("example.com", "kafka.apache.org", "spark.apache.org", "graphql.org", "statefed.dev")
PATHS = ("/", "/docs", "/downloads", "/blog", "/about")
TRIPS = ("LIS-BER", "BER-OSL", "OSL-LIS", "MAD-ROM", "ROM-MAD", "PAR-NYC")
CUSTOMERS = tuple(f"c{n:03d}" for n in range(1, 21))

Clock = Callable[[], int]


def words(count: int, rng: random.Random) -> list[Record]:
    picks = rng.choices(DEMO_WORDS, [1.0 / (i + 1) for i in range(len(DEMO_WORDS))], k=count)
    return [Record(w) for w in SEED_WORDS + picks]


def pageviews(
    count: int, rng: random.Random, now_ms: int, spread_ms: int = 600_000
) -> list[Record]:
    """Page views over the last `spread_ms`, in time order, so the windows fill up."""
    times = sorted(now_ms - rng.randrange(spread_ms) for _ in range(count))
    weights = [1.0 / (i + 1) for i in range(len(HOSTS))]
    return [Record(rng.choices(HOSTS, weights)[0], _json(t, path=rng.choice(PATHS))) for t in times]


def bookings(
    count: int, rng: random.Random, now_ms: int, spread_ms: int = 86_400_000
) -> list[Record]:
    """Bookings over the last day, out of order on purpose: `latest` must keep the newest."""
    return [
        Record(
            rng.choice(CUSTOMERS), _json(now_ms - rng.randrange(spread_ms), trip=rng.choice(TRIPS))
        )
        for _ in range(count)
    ]


def trickle(tick: int, rng: random.Random, now_ms: int) -> dict[str, list[Record]]:
    """What the demo produces every second so the views move."""
    batch = {
        "words": [Record(DEMO_WORDS[tick % len(DEMO_WORDS)])],
        "pageviews": pageviews(3, rng, now_ms, spread_ms=1_000),
    }
    if tick % 5 == 0:
        batch["bookings"] = bookings(1, rng, now_ms, spread_ms=1)
    return batch


def _json(timestamp_ms: int, **fields: str) -> bytes:
    return orjson.dumps({"timestamp": timestamp_ms, **fields})


def skewed_words(
    count: int, vocabulary: int = 1000, skew: float = 1.1, seed: int = 0, prefix: str = "w"
) -> list[str]:
    """`count` words from a Zipf-like distribution over `vocabulary` distinct words."""
    rng = random.Random(seed)
    weights = [1.0 / (rank**skew) for rank in range(1, vocabulary + 1)]
    names = [f"{prefix}{rank:05d}" for rank in range(1, vocabulary + 1)]
    return rng.choices(names, weights, k=count)
