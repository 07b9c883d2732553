"""Shared fixtures (one Apache Kafka broker per test run) and the test tiers.

Every test gets exactly one tier marker, from its folder (`_FOLDER_TIERS`); a test of a
folder of unit tests that takes the `broker` fixture, or whose module starts Kafka, a
Schema Registry or a local cluster of its own, is of the `kafka` tier. `make
test-unit` runs the `unit` tier alone (the inner loop); `make test` runs every tier.

The JVMs the tests start (brokers, Schema Registries, Spark's drivers) compile with C1
alone, and Spark's drivers collect with the serial collector, unless the environment says
otherwise (`_QUICK_JVM`, `_QUICK_SPARK`).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from xdist.remote import Producer

from tests.scheduling import OPTION, SCOPES, LongestFirst
from tooling.broker import KafkaBroker

_TESTS = Path(__file__).parent

# tier of each folder below tests/ (and of files directly in it) that is not `unit`
_FOLDER_TIERS: dict[str, str] = {
    "chaos": "chaos",
    "conformance": "cluster",
    "differential": "cluster",
    "e2e": "cluster",
    "kafka_tls": "cluster",
    "newcomer": "cluster",
    "observe": "cluster",
    "pipeline": "spark",
    "realtime": "cluster",
    "replication": "chaos",
    "test_connector.py": "spark",
    "test_broker.py": "kafka",
    "test_registry.py": "kafka",  # starts a Schema Registry (a JVM) of its own
    "test_restore_view.py": "kafka",
    "test_status_command.py": "kafka",
    "test_kafka_clients.py": "kafka",
}
TIERS = ("unit", "kafka", "spark", "cluster", "chaos")

# Hypothesis fails an example slower than 200 ms by default: a wall-clock bound, and a
# loaded 2-core machine exceeds it (277 ms once, a property of tests/gateway that takes 13
# ms alone). The tests assert behaviour; speed goals are the benchmark's.
settings.register_profile("statefed", deadline=None)
settings.load_profile("statefed")
# a module that imports one of these starts real parts of its own
_STARTERS = ("KafkaBroker", "KafkaCluster", "LocalCluster", "SchemaRegistry")


def tier_of(item: pytest.Item) -> str:
    """The tier of a collected test: by its folder, then by the real parts it takes."""
    relative = Path(str(item.path)).relative_to(_TESTS)
    tier = _FOLDER_TIERS.get(relative.parts[0], "unit")
    if tier != "unit":
        return tier
    module = getattr(item, "module", None)
    starts = module is not None and any(hasattr(module, name) for name in _STARTERS)
    return "kafka" if starts or "broker" in getattr(item, "fixturenames", ()) else tier


# A test's JVM lives a minute or two: too short for C2's compilations to pay back the CPU
# they take from the other parts on 2 cores. Measured on the kafka and spark tiers: 981
# busy core-seconds with C2, 742 with C1 alone (8:47 -> 6:53); tests of timings (the chaos
# tier) took as long either way. The broker and the registry collect with the serial
# collector already (tooling/broker.py, tooling/registry.py); Spark's driver keeps G1 unless
# told otherwise, whose parallel and concurrent threads cost more on 2 cores than a test's
# small heap needs: the Spark aggregate and Real-Time Mode kill tests took 142 busy
# core-seconds with the serial collector, 161 with G1 (98 s against 107 s).
# C1 alone shrinks the JVM's default code cache from 240 MB to 48 MB, which a Spark driver
# that lives through a worker's whole share of tests fills with the code Spark generates
# per query: then "Out of space in CodeCache for adapters" kills its tasks and the driver
# (seen in CI after 264 s of one worker's Spark tests). The driver gets the 240 MB back.
_QUICK_JVM = "-XX:TieredStopAtLevel=1"
_QUICK_SPARK = f"{_QUICK_JVM} -XX:ReservedCodeCacheSize=240m -XX:+UseSerialGC"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        OPTION,
        choices=SCOPES,
        help="with -n: give the workers whole files or folders of tests/, the longest first"
        " (tests/scheduling.py)",
    )


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LongestFirst | None:
    return LongestFirst(config, log) if config.getoption(OPTION) else None


def _check_dist_by(config: pytest.Config) -> None:
    workers = config.getoption("numprocesses", None)
    if not workers or config.getoption("dist", "no") not in ("no", "load"):
        raise pytest.UsageError(f"{OPTION} needs -n (workers) and no --dist of its own")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption(OPTION) and not hasattr(config, "workerinput"):
        _check_dist_by(config)
    os.environ.setdefault("STATEFED_JVM_OPTIONS", _QUICK_JVM)  # the local broker and registry
    os.environ.setdefault("SPARK_SUBMIT_OPTS", _QUICK_SPARK)  # Spark's driver (PySpark's)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(getattr(pytest.mark, tier_of(item)))


_LOOPBACK_NAMES = frozenset({"localhost", "::1"})


@pytest.fixture(autouse=True)
def _loopback_names_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A unit test's Python code looks up loopback names only: fake nodes have URLs like
    http://n0.test, and a gateway's feed link to one would ask the machine's DNS resolver
    (off the machine) and wait for its answer; now it fails at once."""
    if request.node.get_closest_marker("unit") is None:
        return
    resolve = socket.getaddrinfo

    def loopback_only(host: Any, *args: Any, **kwargs: Any) -> Any:
        name = host.decode() if isinstance(host, bytes) else host
        if name is None or name in _LOOPBACK_NAMES or str(name).startswith("127."):
            return resolve(host, *args, **kwargs)
        raise socket.gaierror(socket.EAI_NONAME, f"unit tests look up loopback names only: {name}")

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    """A real Apache Kafka broker (KRaft) on a loopback port, stopped at the end of the run.

    Tests that create topics use names unique to the test, since the broker is shared.
    """
    log = Path(tmp_path_factory.mktemp("broker")) / "kafka.log"
    with KafkaBroker(log_path=log) as running:
        yield running
