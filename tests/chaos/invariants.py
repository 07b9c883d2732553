"""What the chaos tests require of every recorded answer, as functions returning the
violations (empty = the invariant holds), so a failure lists what went wrong."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from tests.chaos.load import Answer

# (sent, received, count, node) of one key's answer from one role
_Read = tuple[float, float, int, str]


def protocol_problems(answers: Iterable[Answer]) -> list[str]:
    """Every non-answer must be a structured error; every answer must say who read it."""
    return [f"{a.kind} at {a.sent:.2f}: {p}" for a in answers for p in a.problems]


def above_truth(answers: Iterable[Answer]) -> list[str]:
    """Counts above what the broker had acknowledged when the answer arrived."""
    return [
        f"{word}: {read[0]} from {read[1]} {read[2]} > delivered {a.truth[word]}"
        for a in answers
        for word, read in a.keys.items()
        if read is not None and read[0] > a.truth[word]
    ]


def regressions(answers: Iterable[Answer], by_role: bool = True) -> list[str]:
    """A key's count from one role (or from any, without `by_role`) going down: an answer
    lower than one that was received before it was asked (real-time order; concurrent ones
    may cross)."""
    reads: defaultdict[tuple[str, str], list[_Read]] = defaultdict(list)
    for a in answers:
        for word, read in a.keys.items():
            if read is not None:
                role = read[1] if by_role else "any role"
                reads[(word, role)].append((a.sent, a.received, read[0], read[2]))
    found: list[str] = []
    for (word, role), of_key in reads.items():
        by_received = sorted(of_key, key=lambda r: r[1])
        at, best = 0, (0.0, 0.0, 0, "")
        for later in sorted(of_key, key=lambda r: r[0]):
            while at < len(by_received) and by_received[at][1] < later[0]:
                best = max(best, by_received[at], key=lambda r: r[2])
                at += 1
            if later[2] < best[2]:
                found.append(
                    f"{word} {role}: {later[2]} from {later[3]} at {later[0]:.2f} after "
                    f"{best[2]} from {best[3]} received at {best[1]:.2f}"
                )
    return found


def stale_strict_reads(answers: Iterable[Answer]) -> list[str]:
    """Answers of requests that asked `maxLag: 0` below an answer for the same key (from
    any copy, to any request) received before they were sent."""
    answers = list(answers)
    # per key: times received, and the best (count, node) received up to each of them
    received: defaultdict[str, list[tuple[float, int, str]]] = defaultdict(list)
    for a in answers:
        for word, read in a.keys.items():
            if read is not None:
                received[word].append((a.received, read[0], read[2]))
    times: dict[str, list[float]] = {}
    best: dict[str, list[tuple[int, str, float]]] = {}
    for word, reads in received.items():
        reads.sort()
        times[word] = [r[0] for r in reads]
        running: list[tuple[int, str, float]] = []
        for at, count, node in reads:
            top = running[-1] if running else (-1, "", 0.0)
            running.append((count, node, at) if count > top[0] else top)
        best[word] = running
    found = []
    for a in answers:
        if a.max_lag != 0:
            continue
        for word, read in a.keys.items():
            if read is None:
                continue
            before = bisect.bisect_left(times[word], a.sent)
            if before and read[0] < best[word][before - 1][0]:
                count, node, at = best[word][before - 1]
                found.append(
                    f"{word}: maxLag 0 answered {read[0]} from {read[1]} {read[2]} at "
                    f"{a.sent:.2f}, after {count} from {node} received at {at:.2f}"
                )
    return found


def promised_regressions(answers: Iterable[Answer]) -> list[str]:
    """A key's count going down where the default read mode promises it never does
    (docs/querying.md, `maxLag`): below an earlier answer of the same role, but for
    standbys, and below an earlier answer of the same standby copy. Two standby copies may
    differ (one further behind answers lower, within `maxLag`), as when a rebalance moves
    a partition's standby to another node."""
    answers = list(answers)
    not_standby = [_reads_where(a, lambda role: role != "STANDBY") for a in answers]
    standby = [_reads_where(a, lambda role: role == "STANDBY") for a in answers]
    return regressions(not_standby) + copy_regressions(standby)


def _reads_where(answer: Answer, keep: Callable[[str], bool]) -> Answer:
    """`answer` with the reads of the roles `keep` refuses left out (as unavailable keys)."""
    keys = {w: r if r is not None and keep(r[1]) else None for w, r in answer.keys.items()}
    return replace(answer, keys=keys)


def copy_regressions(answers: Iterable[Answer]) -> list[str]:
    """A key's count from one copy (node and role) going down between answers."""
    return regressions(_by_copy(answers))


def _by_copy(answers: Iterable[Answer]) -> list[Answer]:
    """The answers with each read's role replaced by "role on node": `regressions` per role
    then judges each copy on its own."""
    return [
        replace(
            a,
            keys={
                w: None if r is None else (r[0], f"{r[1]} on {r[2]}", r[2])
                for w, r in a.keys.items()
            },
        )
        for a in answers
    ]


def answered_share(
    answers: Iterable[Answer], kind: str, start: float, end: float
) -> tuple[int, int]:
    """(keys answered, keys asked) by `kind` queries asked within [start, end]."""
    asked = [
        read
        for a in answers
        if a.kind == kind and start <= a.sent <= end
        for read in a.keys.values()
    ]
    return sum(read is not None for read in asked), len(asked)


def unavailable_until(answers: Iterable[Answer], since: float) -> float:
    """Seconds after `since` until the last answer that could not read some key (0 if none)."""
    failed = [a.received for a in answers if a.sent >= since and None in a.keys.values()]
    return max(failed) - since if failed else 0.0
