"""Continuous load for the chaos tests: a producer whose delivery reports are the ground
truth, and asyncio query clients that record every answer the gateway gives.

An answer is judged per key: answered (a count, with the role and node that read it from
`extensions.freshness`) or unavailable (its partition named by a PARTITION_UNAVAILABLE
error, or every key under ROUTING_NOT_READY). Anything else (HTTP errors, errors without
a code, a row next to an error for its partition, an answer without freshness) is a
`problem`.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx
from confluent_kafka import KafkaError, Message

from runtime.produce import new_producer
from schema import partition_for
from tooling.processes import client_tls, poll_client, wait_until

POINT = "query($w: String!, $m: Int) { wordCount(word: $w, maxLag: $m) { word count } }"
MULTI = "query($ws: [String!]!, $m: Int) { wordCounts(words: $ws, maxLag: $m) { word count } }"
# what a read may fail with while the cluster changes: structured, naming the partition
UNAVAILABLE_CODES = {"PARTITION_UNAVAILABLE"}
# a gateway that has not read the partition counts yet: structured, for the whole field
NOT_READY = "ROUTING_NOT_READY"


class Truth(Protocol):
    """What the load judges counts against: every count written per key so far."""

    def delivered(self) -> dict[str, int]: ...


class TruthProducer:
    """Produces `words` at about `rate_per_s` from a thread; `delivered` counts only what
    the broker acknowledged (the delivery reports)."""

    def __init__(self, bootstrap: str, topic: str, words: list[str], rate_per_s: int) -> None:
        self._producer = new_producer(bootstrap)
        self._topic = topic
        self._words = words
        self._per_tick = max(1, rate_per_s // 20)
        self._lock = threading.Lock()
        self._delivered: Counter[str] = Counter()
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="truth-producer", daemon=True)

    def start(self) -> TruthProducer:
        self._thread.start()
        return self

    def delivered(self) -> dict[str, int]:
        with self._lock:
            return dict(self._delivered)

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        word = (msg.key() or b"").decode()
        with self._lock:
            if err is None:
                self._delivered[word] += 1
            else:
                self.failures.append(f"{word}: {err}")

    def _run(self) -> None:
        rng = random.Random(4)
        next_tick = time.monotonic()
        while not self._stop.is_set():
            for word in rng.choices(self._words, k=self._per_tick):
                self._producer.produce(
                    self._topic, key=word.encode(), on_delivery=self._on_delivery
                )
            self._producer.poll(0)
            next_tick += 0.05  # paced production (20 ticks a second), not a wait for anything
            self._stop.wait(max(0.0, next_tick - time.monotonic()))
            self._producer.poll(0)

    def stop(self) -> dict[str, int]:
        """Stop producing, wait for every delivery report; the final ground truth."""
        self._stop.set()
        self._thread.join(30)
        undelivered = self._producer.flush(30)
        assert undelivered == 0, f"{undelivered} records never acknowledged"
        assert not self.failures, f"deliveries failed: {self.failures[:5]}"
        return self.delivered()


@dataclass
class Answer:
    """One gateway answer: per key (count, role, node), or None when unavailable."""

    kind: str  # "point" or "multi"
    gateway: str
    sent: float
    received: float
    max_lag: int | None = None  # what the request asked (None: the gateway's default)
    keys: dict[str, tuple[int, str, str] | None] = field(default_factory=dict)
    truth: dict[str, int] = field(default_factory=dict)  # delivered when it was received
    problems: list[str] = field(default_factory=list)
    # why keys were unavailable: (partition or None, reason, node) of each error
    reasons: list[tuple[int | None, str, str]] = field(default_factory=list)


def judge(body: Any, words: list[str], partitions: int, answer: Answer, field_name: str) -> None:
    """Fill `answer.keys` from a response body, noting every protocol problem."""
    if not isinstance(body, dict):
        answer.problems.append(f"not a JSON object: {str(body)[:200]}")
        return
    unavailable: set[int] = set()
    for error in body.get("errors", []):
        extensions = error.get("extensions") or {}
        code, partition = extensions.get("code"), extensions.get("partition")
        if code == NOT_READY:  # no partition can be read yet: every key is unavailable
            unavailable.update(range(partitions))
        elif code not in UNAVAILABLE_CODES or not isinstance(partition, int):
            answer.problems.append(f"unstructured or unexpected error: {error}")
            continue
        else:
            unavailable.add(partition)
        answer.reasons.append(
            (partition, str(extensions.get("reason")), str(extensions.get("node")))
        )
    freshness = {e["partition"]: e for e in (body.get("extensions") or {}).get("freshness", [])}
    data = (body.get("data") or {}).get(field_name)
    rows = data if isinstance(data, list) else [data]
    if len(rows) != len(words):
        answer.problems.append(f"{len(rows)} rows for {len(words)} keys: {body}")
        return
    for word, row in zip(words, rows, strict=True):
        _judge_row(word, row, partition_for(word, partitions), unavailable, freshness, answer)


def _judge_row(
    word: str,
    row: Any,
    partition: int,
    unavailable: set[int],
    freshness: dict[int, dict[str, Any]],
    answer: Answer,
) -> None:
    if partition in unavailable:
        if row is not None:
            answer.problems.append(f"{word}: a row {row} next to an error for its partition")
        answer.keys[word] = None
        return
    entry = freshness.get(partition)
    if entry is None:
        answer.problems.append(f"{word}: answered {row} without freshness for {partition}")
        return
    if row is not None and row.get("word") != word:
        answer.problems.append(f"{word}: answered the row of {row.get('word')!r}")
        return
    count = 0 if row is None else int(row["count"])  # null = never seen = 0
    answer.keys[word] = (count, entry["role"], entry["node"])


@dataclass
class QueryLoad:
    """Clients asking the gateway at `url` until `stop` is set; every answer in `answers`."""

    url: str
    words: list[str]
    partitions: int
    truth: Truth
    answers: list[Answer] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)
    max_lag: int | None = None  # every request's maxLag (None: the gateway's default)

    async def _ask(self, http: httpx.AsyncClient, kind: str, asked: list[str]) -> Answer:
        if kind == "point":
            variables: dict[str, Any] = {"w": asked[0], "m": self.max_lag}
            request, field_name = {"query": POINT, "variables": variables}, "wordCount"
        else:
            variables = {"ws": asked, "m": self.max_lag}
            request, field_name = {"query": MULTI, "variables": variables}, "wordCounts"
        sent = time.monotonic()
        try:
            response = await http.post(self.url, json=request)
        except httpx.HTTPError as exc:
            answer = Answer(kind, self.url, sent, time.monotonic(), self.max_lag)
            answer.problems.append(f"no HTTP answer: {type(exc).__name__}: {exc}")
            return answer
        answer = Answer(kind, self.url, sent, time.monotonic(), self.max_lag)
        delivered = self.truth.delivered()
        answer.truth = {w: delivered.get(w, 0) for w in asked}
        if response.status_code != 200:
            answer.problems.append(f"HTTP {response.status_code}: {response.text[:200]}")
            return answer
        judge(response.json(), asked, self.partitions, answer, field_name)
        return answer

    async def run(self, max_s: float) -> None:
        """3 point clients and 1 multi-key client until `stop` is set (at most `max_s`)."""
        clients = [self.client("point", seed, 0.02, max_s) for seed in range(3)]
        await asyncio.gather(*clients, self.client("multi", 99, 0.05, max_s))

    async def client(self, kind: str, seed: int, pause_s: float, max_s: float) -> None:
        """One client: point lookups or 8-key lookups, for at most `max_s` seconds."""
        rng = random.Random(seed)
        until = time.monotonic() + max_s
        async with httpx.AsyncClient(timeout=30.0, trust_env=False, verify=client_tls()) as http:
            while not self.stop.is_set() and time.monotonic() < until:
                asked = [rng.choice(self.words)] if kind == "point" else rng.sample(self.words, 8)
                self.answers.append(await self._ask(http, kind, asked))
                await asyncio.sleep(pause_s)  # the load's pace, not a wait for a condition


def wait_counts_equal(
    gateway: str,
    asked: list[str],
    truth: dict[str, int],
    timeout_s: float = 120.0,
    lag_known: bool = False,
    what: str = "truth",
) -> float:
    """Poll the gateway's multi-key lookup of `asked` until every count equals `truth` (a
    word it lacks: null) without an error, and with `lag_known` every copy read knows its
    lag again; returns when (monotonic time). AssertionError naming each (answer, `what`)
    that still differs."""
    last: dict[str, Any] = {}

    def equal() -> bool:
        nonlocal last
        body = http.post(gateway, json={"query": MULTI, "variables": {"ws": asked}}).json()
        rows = (body.get("data") or {}).get("wordCounts") or []
        last = {w: (r or {}).get("count") for w, r in zip(asked, rows, strict=False)}
        freshness = (body.get("extensions") or {}).get("freshness") or []
        known = not lag_known or not any("lagUnknownSince" in entry for entry in freshness)
        return known and not body.get("errors") and last == {w: truth.get(w) for w in asked}

    try:
        with poll_client(timeout_s=10.0) as http:
            wait_until(equal, timeout_s, f"every count to equal the {what}", 0.5)
    except TimeoutError:
        differ = {w: (last.get(w), truth.get(w)) for w in asked if last.get(w) != truth.get(w)}
        raise AssertionError(f"(answer, {what}) once the load stopped: {differ}") from None
    return time.monotonic()
