"""Distributing the tests over pytest-xdist workers a file or a folder at a time, the
longest first (`--dist-by file` or `--dist-by folder`, with `-n`).

A folder below tests/ that starts a whole cluster once for all its files (a package-scoped
fixture: `tests/e2e`, `tests/chaos`, `tests/differential`) must run on one worker: spread
over two, each worker would start a cluster of its own. pytest-xdist's `--dist loadfile`
spreads a folder's files; its `--dist loadgroup` marks groups in `item._nodeid`, which
pytest 9 no longer reads. And pytest-xdist sends the scopes of most tests first, so a file
of one long test comes last and leaves its worker alone for minutes at the end.

So the unit of work here is a test's file, or its folder below tests/ (a file directly in
tests/ is its own unit), and the units start in the order of `LONGEST` (what they took in
`make test`), then of their number of tests. A worker gets its next unit once two or fewer
of its tests are left, so a worker may hold two long units at the start: the order is
longest first, not an optimal packing.
"""

from __future__ import annotations

from pathlib import PurePosixPath

import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadScopeScheduling
from xdist.workermanage import WorkerController

__all__ = ["LONGEST", "OPTION", "SCOPES", "LongestFirst", "file_scope", "folder_scope"]

OPTION = "--dist-by"
SCOPES = ("file", "folder")

# Seconds of the longest units (about a minute or more), measured in make test on 2 cores
# (`--durations=0`); a unit missing here starts after them. Approximate is enough: the
# order is what counts.
LONGEST: dict[str, int] = {
    # the cluster and chaos tiers, by folder
    "tests/differential": 400,
    "tests/chaos": 330,
    "tests/e2e": 230,
    "tests/newcomer": 150,
    "tests/conformance": 120,
    "tests/replication": 85,
    "tests/realtime": 55,
    # the kafka and spark tiers, by file: each file of 20 s or more, so that none is left
    # to run alone at the end (a file of one long test sorts last by its number of tests)
    "tests/pipeline/test_standalone.py": 150,
    "tests/pipeline/test_realtime_kill.py": 120,
    "tests/pipeline/test_aggregates.py": 90,
    "tests/gateway/test_scan_kafka.py": 85,
    "tests/pipeline/test_registry_formats.py": 65,
    "tests/node/test_node_kafka.py": 45,
    "tests/pipeline/test_run.py": 40,
    "tests/node/test_lifecycle_faults.py": 40,
    "tests/live/test_fastpath.py": 38,
    "tests/gateway/test_failover_kafka.py": 37,
    "tests/pipeline/test_realtime.py": 35,
    "tests/node/test_feed_kafka.py": 28,
    "tests/node/test_disk_faults.py": 26,
    "tests/gateway/test_scan_failover_kafka.py": 21,
    "tests/test_broker.py": 21,
    "tests/node/test_standby_pause.py": 21,
    "tests/pipeline/test_session.py": 20,
    "tests/node/test_broker_outage.py": 20,
    "tests/schema/test_keytypes_kafka.py": 20,
    "tests/pipeline/test_job.py": 20,
}


def file_scope(nodeid: str) -> str:
    """The file of the test `nodeid`: "tests/e2e/test_x.py" for "tests/e2e/test_x.py::t"."""
    return nodeid.split("::", 1)[0]


def folder_scope(nodeid: str) -> str:
    """The folder below tests/ of the test `nodeid` ("tests/e2e" for
    "tests/e2e/sub/test_x.py::t"), or its file when it lies directly in tests/."""
    parts = PurePosixPath(file_scope(nodeid)).parts
    return "/".join(parts[:2]) if len(parts) > 2 else "/".join(parts)


class LongestFirst(LoadScopeScheduling):
    """pytest-xdist's scope scheduling by file or folder, the longest units first."""

    def __init__(self, config: pytest.Config, log: Producer | None = None) -> None:
        super().__init__(config, log)
        self._scope = folder_scope if config.getoption(OPTION) == "folder" else file_scope

    def _split_scope(self, nodeid: str) -> str:
        return self._scope(nodeid)

    def _assign_work_unit(self, node: WorkerController) -> None:
        longest = max(self.workqueue, key=lambda scope: LONGEST.get(scope, 0))
        self.workqueue.move_to_end(longest, last=False)  # the one the base class takes
        super()._assign_work_unit(node)
