"""Subscriptions under chaos on the real path: 50 subscriptions held by the real graphql-ws
npm client in one Node process (tests/live/subscribers.mjs) while words are produced at
200/s and bookings at 10/s; one node is SIGKILLed, another is stopped and started again.

Judged afterwards, for every subscriber: per key, updates strictly increasing in offset
(and count), the newest equal to the ground truth (the producers' delivery reports) once
the load stops; every top-N subscriber's newest push equal to the top a query reads then.
A third node is SIGKILLed after the restart's rebalance.
A group of subscribers disconnects right after the SIGKILL and resumes with its tokens
once the cluster is stable again (another did the same earlier, with no node death), over
graphql-ws and over graphql-sse: across the resume a count's offsets still strictly
increase and end at the truth, what a resumed count subscriber receives equals exactly
what a subscriber connected throughout received after the token, and a customer's
history has every booking exactly once. Every subscriber connected throughout receives
every changelog record of its key from its first update on: none missed across the kill
and the restart."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

import httpx
import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from gateway.subscriptions.tokens import ResumeToken
from runtime.produce import new_producer
from schema import WORD_COUNTS
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
        # 3 that disconnect after the SIGKILL and resume with their tokens, and 2 that
        # disconnect and resume while no node dies (55 in all); each count one has a
        # subscriber of its key connected throughout among the 30 above
        self.resuming = {
            "resume-count": (COUNT, {"k": asked[0]}, "resuming"),
            "resume-count-sse": (COUNT, {"k": asked[1]}, "resuming-sse"),
            "resume-history": (HISTORY, {"k": customers[0]}, "resuming"),
        }
        self.calm = {
            "calm-count": (COUNT, {"k": asked[2]}, "calm"),
            "calm-count-sse": (COUNT, {"k": asked[3]}, "calm-sse"),
        }

    def all(self) -> dict[str, tuple[str, dict[str, Any], str]]:
        return {**self.subscriptions, **self.resuming, **self.calm}

    def of(self, query: str) -> list[str]:
        return [i for i, (q, _, _) in self.all().items() if q == query]


def client_of(connection: str) -> str:
    """The subscription client of a connection: graphql-sse for those named so."""
    return "graphql-sse" if connection.endswith("-sse") else "graphql-ws"


def _disconnect(
    clients: Subscribers, group: dict[str, tuple[str, dict[str, Any], str]]
) -> dict[str, dict[str, Any]]:
    """Close the connections of `group`; the newest update of each of its subscriptions
    (whose token it resumes with)."""
    for connection in {c for _, _, c in group.values()}:
        clients.close(connection)
    return {i: clients.received[i][-1]["data"][FIELDS[q]] for i, (q, _, _) in group.items()}


def _resume(
    clients: Subscribers,
    group: dict[str, tuple[str, dict[str, Any], str]],
    newest: dict[str, dict[str, Any]],
) -> None:
    for ident, (query, variables, connection) in group.items():
        resumed = {**variables, "after": newest[ident]["token"]}
        again = f"{connection}-again"
        clients.subscribe(f"{ident}-again", client_of(connection), query, resumed, again)


def _resume_problems(
    clients: Subscribers,
    group: dict[str, tuple[str, dict[str, Any], str]],
    newest: dict[str, dict[str, Any]],
) -> list[str]:
    """A resumed count subscriber whose updates are not exactly those a subscriber of its
    key connected throughout received after the resumed token's update."""
    problems = []
    for ident, (query, variables, _) in group.items():
        if query != COUNT:
            continue
        after = _offset(newest[ident])
        control = clients.data(f"single-{variables['k']}", "wordCount")
        wanted = [(_offset(u), u["count"]) for u in control if _offset(u) > after]
        got = [(_offset(u), u["count"]) for u in clients.data(f"{ident}-again", "wordCount")]
        if got != wanted:
            problems.append(f"{ident} after offset {after}: got {got}, connected got {wanted}")
    return problems


def _offset(update: dict[str, Any]) -> int:
    """The changelog offset of `update`: a Long, a string of decimal digits in the answer."""
    return int(update["offset"])


def _changelog_offsets(bootstrap: str, topic: str, keys: set[str]) -> dict[str, list[int]]:
    """The offsets of every record of `keys` in `topic` (every partition) up to its end."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "chaos-changelog-reader",
         "enable.auto.commit": False, "enable.partition.eof": True}
    )  # fmt: skip
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in partitions}  # fmt: skip
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends if ends[p]])
        found: dict[str, list[int]] = defaultdict(list)
        reached = {p for p, end in ends.items() if not end}
        deadline = time.monotonic() + 60
        while len(reached) < len(ends):
            assert time.monotonic() < deadline, f"the changelog was not read to {ends}"
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            partition, offset = message.partition(), message.offset()
            assert partition is not None and offset is not None
            key = (message.key() or b"").decode()
            if key in keys:
                found[key].append(offset)
            if offset + 1 >= ends[partition]:
                reached.add(partition)
        return found
    finally:
        consumer.close()


def _missed_rounds(clients: Subscribers, plan: Plan, records: dict[str, list[int]]) -> list[str]:
    """A subscriber connected throughout whose updates after its first (the current row,
    whose offset is where the partition stood) are not every later changelog record of
    its key, each once, in order."""
    problems = []
    for ident, (query, variables, _) in plan.subscriptions.items():
        if query != COUNT:
            continue
        first, *later = [_offset(u) for u in clients.data(ident, "wordCount")]
        wanted = [o for o in records.get(variables["k"], []) if o > first]
        if later != wanted:
            missed = sorted(set(wanted) - set(later))
            extra = sorted(set(later) - set(wanted))
            problems.append(
                f"{ident}: from offset {first}, missed {missed[:10]}, extra {extra[:10]} "
                f"of {len(wanted)}"
            )
    return problems


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
        offsets = [_offset(u) for u in of_key]
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


def _offsets(update: dict[str, Any]) -> dict[int, int]:
    """The offsets of the token of `update` (a resumed subscription's newest before it
    disconnected)."""
    return dict(ResumeToken.parse("booking_history", update["token"]).offsets)


def _history_problems(who: str, updates: list[Any], produced: list[str]) -> list[str]:
    """A customer's bookings not exactly the produced ones from the first received on: a
    gap, a repeat, out of order, or not up to the last."""
    trips = [u["trip"] for u in updates]
    if not trips or trips[0] not in produced:
        return [f"{who}: received {trips[:5]}..., produced {produced[:5]}..."]
    start = produced.index(trips[0])
    if trips != produced[start:]:
        extra = [t for t in dict.fromkeys(trips) if trips.count(t) > 1][:5]
        at = {t: [_offset(u) for u in updates if u["trip"] == t] for t in extra}
        missing = sorted(set(produced[start:]) - set(trips))[:5]
        return [
            f"{who}: repeated {extra} (at offsets {at}), missing {missing} of "
            f"{len(produced) - start}"
        ]
    offsets = [_offset(u) for u in updates]
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
            clients.subscribe(ident, client_of(connection), query, variables, connection)
        first = [i for i in plan.all() if FIELDS[plan.all()[i][0]] != "bookingHistory"]
        clients.wait("every first row", lambda: all(clients.received.get(i) for i in first))
        counts = TruthProducer(local.bootstrap, "words", asked, RATE_PER_S).start()
        bookings = BookingProducer(local.bootstrap, customers).start()
        try:
            clients.wait(
                "bookings before the SIGKILL",
                lambda: all(clients.received.get(i) for i in plan.of(HISTORY)),
            )
            calm = _disconnect(clients, plan.calm)  # nothing more arrives for them
            time.sleep(1.0)  # changes they miss while disconnected, not a wait for a condition
            _resume(clients, plan.calm, calm)
            killed, restarted = chaos.live()[:2]
            local.nodes[killed].kill()
            newest = _disconnect(clients, plan.resuming)
            chaos.wait_stable(gateway)
            local.nodes[restarted].stop()
            local.start_node(restarted)
            chaos.wait_stable(gateway)
            # after the restart's rebalance some follows may be on copies that moved: a
            # second SIGKILL, of a node other than the restarted one, must not silence them
            second = next(n for n in chaos.live() if n != restarted)
            local.nodes[second].kill()
            chaos.wait_stable(gateway)
            _resume(clients, plan.resuming, newest)
            time.sleep(SETTLE_S)  # the load on the final cluster, not a wait for a condition
        finally:
            truth = counts.stop()
            trips = bookings.stop()
        resumed_ids = {i: [i, f"{i}-again"] for i in {**plan.resuming, **plan.calm}}
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
                    parts = [clients.data(i, "bookingHistory") for i in ids]
                    updates = [u for part in parts for u in part]
                    customer = plan.all()[who][1]["k"]
                    problems = _history_problems(who, updates, trips[customer])
                    if who in newest:  # a resumed one: where it resumed from
                        problems = [
                            f"{problem}; {[len(part) for part in parts]} received before and "
                            f"after the resume, token {_offsets(newest[who])}"
                            for problem in problems
                        ]
                    found += problems
            return found

        try:
            clients.wait("every subscriber at the truth", lambda: not problems(), 120)
        except TimeoutError:
            found = problems()
            raise AssertionError(f"{len(found)} problems, first: {found[:10]}") from None
        resumes = _resume_problems(clients, plan.calm, calm)
        resumes += _resume_problems(clients, plan.resuming, newest)
        assert not resumes, resumes
        records = _changelog_offsets(local.bootstrap, WORD_COUNTS.changelog_topic, set(asked))
        missed = _missed_rounds(clients, plan, records)
        assert not missed, f"{len(missed)} subscribers missed records, first: {missed[:5]}"
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
            i: len(clients.data(f"{i}-again", FIELDS[q]))
            for i, (q, _, _) in {**plan.resuming, **plan.calm}.items()
        }
        received = sum(len(v) for v in clients.received.values())
    print(
        f"\nlive chaos: killed {killed}, restarted {restarted}, killed {second}; {received} "
        f"messages to "
        f"{len(plan.all())} subscribers; top-N pushes {pushed}; truth {sum(truth.values())} "
        f"words, {sum(len(t) for t in trips.values())} bookings; after the resume {again}"
    )
    # the killed node was followed, and every key moved off it to a live copy
    assert killed in seen, seen
    assert not {killed, second} & set(last_from.values()), last_from
    assert all(again.values()), again
