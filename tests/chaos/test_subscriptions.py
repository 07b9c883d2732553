"""Subscriptions under chaos on the real path: 50 subscriptions held by the real graphql-ws
npm client in one Node process (tests/live/subscribers.mjs) while words are produced at
200/s and bookings at 10/s; one node is SIGKILLed, another is stopped and started again.

Judged afterwards, for every subscriber: per key, updates strictly increasing in offset
(and count), the newest equal to the ground truth (the producers' delivery reports) once
the load stops; every top-N subscriber's newest push equal to the top a query reads then.
A group of subscribers disconnects right after the SIGKILL and resumes with its tokens
once the cluster is stable again: across the resume a count's offsets still strictly
increase and end at the truth, and a customer's history has every booking exactly once."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import KafkaError, Message

from gateway.live.tokens import ResumeToken
from runtime.produce import new_producer
from tests.chaos.conftest import ChaosCluster, words
from tests.chaos.load import TruthProducer
from tests.live.subscribers import Subscribers

pytestmark = pytest.mark.timeout(420)

RATE_PER_S = 200  # words produced per second
SETTLE_S = 3.0  # load on the cluster after the resume, before the producers stop
TOP_LIMIT = 5
COUNT = """subscription($k: String!, $after: String) {
  wordCount(word: $k, after: $after) { word count offset token freshness { node role } }
}"""
COUNTS = """subscription($ks: [String!]!) {
  wordCounts(words: $ks) { word count offset token freshness { node role } }
}"""
TOP = """subscription($n: Int!) {
  topWords(limit: $n, interval: 200) { rows { word count } token }
}"""
HISTORY = """subscription($k: String!, $after: String) {
  bookingHistory(customer: $k, after: $after) { customer trip offset token }
}"""
TOP_QUERY = "query($n: Int!) { topWords(limit: $n) { word count } }"


class BookingProducer:
    """Books trips e0, e1, ... for each customer from a thread, about 5 a second each, in
    increasing event time; `delivered()` is what the broker acknowledged, in order."""

    def __init__(self, bootstrap: str, customers: list[str]) -> None:
        self._producer = new_producer(bootstrap)
        self._customers = customers
        self._delivered: dict[str, list[str]] = {c: [] for c in customers}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.failures: list[str] = []
        self._thread = threading.Thread(target=self._run, name="booking-producer", daemon=True)

    def start(self) -> BookingProducer:
        self._thread.start()
        return self

    def _on_delivery(self, err: KafkaError | None, msg: Message) -> None:
        customer = (msg.key() or b"").decode()
        with self._lock:
            if err is None:
                self._delivered[customer].append(orjson.loads(msg.value() or b"{}")["trip"])
            else:
                self.failures.append(f"{customer}: {err}")

    def _run(self) -> None:
        epoch_ms = time.time_ns() // 1_000_000
        n = 0
        while not self._stop.is_set():
            for customer in self._customers:
                value = {"trip": f"e{n}", "timestamp": epoch_ms + n * 200}
                self._producer.produce(
                    "bookings",
                    key=customer,
                    value=orjson.dumps(value),
                    on_delivery=self._on_delivery,
                )
            n += 1
            self._producer.poll(0)
            self._stop.wait(0.2)  # the load's pace, not a wait for anything

    def stop(self) -> dict[str, list[str]]:
        self._stop.set()
        self._thread.join(30)
        assert self._producer.flush(30) == 0, "bookings never acknowledged"
        assert not self.failures, self.failures[:5]
        with self._lock:
            return {c: list(trips) for c, trips in self._delivered.items()}


FIELDS = {COUNT: "wordCount", COUNTS: "wordCounts", TOP: "topWords", HISTORY: "bookingHistory"}


class Plan:
    """The subscriptions of the test: id -> (query, variables, connection)."""

    def __init__(self, asked: list[str], customers: list[str]) -> None:
        self.subscriptions: dict[str, tuple[str, dict[str, Any], str]] = {}
        for i, word in enumerate(asked[:30]):  # 30 one-key subscriptions
            self.subscriptions[f"single-{word}"] = (COUNT, {"k": word}, f"c{i % 5}")
        for i in range(8):  # 8 of 5 keys each, over all 40 words
            group = asked[i * 5 : i * 5 + 5]
            self.subscriptions[f"group-{i}"] = (COUNTS, {"ks": group}, f"c{i % 5}")
        for i in range(9):  # 9 top-N
            self.subscriptions[f"top-{i}"] = (TOP, {"n": TOP_LIMIT}, f"c{i % 5}")
        self.subscriptions[f"history-{customers[1]}"] = (HISTORY, {"k": customers[1]}, "c0")
        # 2 that disconnect after the SIGKILL and resume with their tokens (50 in all)
        self.resuming = {
            "resume-count": (COUNT, {"k": asked[0]}, "resuming"),
            "resume-history": (HISTORY, {"k": customers[0]}, "resuming"),
        }

    def all(self) -> dict[str, tuple[str, dict[str, Any], str]]:
        return {**self.subscriptions, **self.resuming}

    def of(self, query: str) -> list[str]:
        return [i for i, (q, _, _) in self.all().items() if q == query]


def _by_key(clients: Subscribers, ids: list[str], field: str, key: str) -> dict[str, list[Any]]:
    """Per key, the updates of subscriptions `ids` (one subscriber's, in order)."""
    found: dict[str, list[Any]] = defaultdict(list)
    for ident in ids:
        for update in clients.data(ident, field):
            found[update[key]].append(update)
    return found


def _count_problems(who: str, updates: dict[str, list[Any]], truth: dict[str, int]) -> list[str]:
    """A key's updates not strictly increasing in offset and count, or not ending at the
    truth, or without the role of the copy they came from."""
    problems = []
    for word, of_key in updates.items():
        offsets = [u["offset"] for u in of_key]
        counts = [u["count"] or 0 for u in of_key]
        if offsets != sorted(set(offsets)) or counts != sorted(counts):
            problems.append(f"{who} {word}: offsets {offsets}, counts {counts}")
        if counts[-1] != truth.get(word, 0):
            problems.append(f"{who} {word}: ends at {counts[-1]}, truth {truth.get(word, 0)}")
        if any(u["freshness"]["role"] not in ("ACTIVE", "STANDBY") for u in of_key):
            problems.append(f"{who} {word}: an update without a copy's role: {of_key}")
    return problems


def _top_problems(who: str, pushes: list[Any]) -> list[str]:
    """A push whose rows are not ranked by count, or whose offsets go back on a partition."""
    problems = []
    reached: dict[int, int] = {}
    for push in pushes:
        counts = [row["count"] for row in push["rows"]]
        if counts != sorted(counts, reverse=True):
            problems.append(f"{who}: rows not ranked: {push['rows']}")
        offsets = ResumeToken.parse("word_counts", push["token"]).offsets
        if any(offsets.get(p, 0) < n for p, n in reached.items()):
            problems.append(f"{who}: offsets {dict(offsets)} after {reached}")
        reached = dict(offsets)
    return problems


def _history_problems(who: str, updates: list[Any], produced: list[str]) -> list[str]:
    """A customer's bookings not exactly the produced ones from the first received on: a
    gap, a repeat, out of order, or not up to the last."""
    trips = [u["trip"] for u in updates]
    if not trips or trips[0] not in produced:
        return [f"{who}: received {trips[:5]}..., produced {produced[:5]}..."]
    start = produced.index(trips[0])
    if trips != produced[start:]:
        extra = [t for t in trips if trips.count(t) > 1][:5]
        missing = sorted(set(produced[start:]) - set(trips))[:5]
        return [f"{who}: repeated {extra}, missing {missing} of {len(produced) - start}"]
    offsets = [u["offset"] for u in updates]
    return [] if offsets == sorted(set(offsets)) else [f"{who}: offsets {offsets}"]


def test_subscribers_reach_the_truth_across_a_sigkill_a_restart_and_a_resume(
    chaos: ChaosCluster,
) -> None:
    local = chaos.local
    gateway = local.gateway_url
    asked = words("live-")
    customers = ["live-customer-0", "live-customer-1"]
    plan = Plan(asked, customers)
    chaos.wait_stable(gateway)
    with Subscribers(gateway, local.base_dir / "live-subscribers.log") as clients:
        for ident, (query, variables, connection) in plan.all().items():
            clients.subscribe(ident, "graphql-ws", query, variables, connection)
        first = [i for i in plan.all() if FIELDS[plan.all()[i][0]] != "bookingHistory"]
        clients.wait("every first row", lambda: all(clients.received.get(i) for i in first))
        counts = TruthProducer(local.bootstrap, "words", asked, RATE_PER_S).start()
        bookings = BookingProducer(local.bootstrap, customers).start()
        try:
            clients.wait(
                "bookings before the SIGKILL",
                lambda: all(clients.received.get(i) for i in plan.of(HISTORY)),
            )
            killed, restarted = chaos.live()[:2]
            local.nodes[killed].kill()
            clients.close("resuming")  # then nothing more arrives for its subscriptions
            tokens = {i: clients.received[i][-1]["data"][FIELDS[q]]["token"]
                      for i, (q, _, _) in plan.resuming.items()}  # fmt: skip
            chaos.wait_stable(gateway)
            local.nodes[restarted].stop()
            local.start_node(restarted)
            chaos.wait_stable(gateway)
            for ident, (query, variables, _) in plan.resuming.items():
                resumed = {**variables, "after": tokens[ident]}
                clients.subscribe(f"{ident}-again", "graphql-ws", query, resumed, "resumed")
            time.sleep(SETTLE_S)  # the load on the final cluster, not a wait for a condition
        finally:
            truth = counts.stop()
            trips = bookings.stop()
        resumed_ids = {i: [i, f"{i}-again"] for i in plan.resuming}
        subscribers = {i: [i] for i in plan.subscriptions} | resumed_ids

        def problems() -> list[str]:
            found = []
            for who, ids in subscribers.items():
                query = plan.all()[who][0]
                if query in (COUNT, COUNTS):
                    by_key = _by_key(clients, ids, FIELDS[query], "word")
                    found += _count_problems(who, by_key, truth)
                elif query == TOP:
                    found += _top_problems(who, clients.data(who, "topWords"))
                elif query == HISTORY:
                    updates = [u for i in ids for u in clients.data(i, "bookingHistory")]
                    customer = plan.all()[who][1]["k"]
                    found += _history_problems(who, updates, trips[customer])
            return found

        try:
            clients.wait("every subscriber at the truth", lambda: not problems(), 120)
        except TimeoutError:
            found = problems()
            raise AssertionError(f"{len(found)} problems, first: {found[:10]}") from None
        top = httpx.post(gateway, json={"query": TOP_QUERY, "variables": {"n": TOP_LIMIT}})
        rows = top.json()["data"]["topWords"]
        tops = plan.of(TOP)
        clients.wait(
            "every top-N subscriber at the top a query reads",
            lambda: all(clients.data(i, "topWords")[-1]["rows"] == rows for i in tops),
            60,
        )
        pushed = {i: len(clients.data(i, "topWords")) for i in tops}
        keyed = {w: ids for w, ids in subscribers.items() if plan.all()[w][0] in (COUNT, COUNTS)}
        last_from = {}  # (subscriber, word) -> the node its newest update came from
        seen: set[str] = set()
        for who, ids in keyed.items():  # a resumed subscriber: both of its subscriptions
            for word, of_key in _by_key(clients, ids, FIELDS[plan.all()[who][0]], "word").items():
                last_from[(who, word)] = of_key[-1]["freshness"]["node"]
                seen.update(u["freshness"]["node"] for u in of_key)
        again = {
            i: len(clients.data(f"{i}-again", FIELDS[q])) for i, (q, _, _) in plan.resuming.items()
        }
        received = sum(len(v) for v in clients.received.values())
    print(
        f"\nlive chaos: killed {killed}, restarted {restarted}; {received} messages to "
        f"{len(plan.all())} subscribers; top-N pushes {pushed}; truth {sum(truth.values())} "
        f"words, {sum(len(t) for t in trips.values())} bookings; after the resume {again}"
    )
    # the killed node was followed, and every key moved off it to a live copy
    assert killed in seen, seen
    assert killed not in set(last_from.values()), last_from
    assert all(again.values()), again
