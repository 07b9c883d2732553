"""`/metrics` of a gateway run as several processes (STATEFED_GATEWAY_PROCESSES).

A scrape of the port reaches one worker, whichever the kernel gave the connection to. So
each worker also answers its own metrics on a Unix socket in the workers' directory (made
by the parent, `gateway.edge.workers`, readable by its user only), and the worker a scrape
reaches gathers every worker's and labels each series `worker="<index>"`: one scrape sees
every process, and series keep their labels whichever worker answered it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.parser import text_string_to_metric_families

from runtime.metrics import exposition

__all__ = ["WORKER_LABEL", "WorkerMetrics", "merge_expositions", "worker_socket_path"]

log = logging.getLogger(__name__)

WORKER_LABEL = "worker"
# a worker's metrics are in its memory: anything slower than this is a stopped or hung worker
_GATHER_TIMEOUT_S = 2.0


def worker_socket_path(directory: Path, index: int) -> Path:
    """Where worker `index` answers its own metrics."""
    return directory / f"worker-{index}.sock"


class WorkerMetrics:
    """Worker `index` of `count` sharing `directory`: serves its registry to the others on
    its socket (`start`) and gathers every worker's for a scrape (`gather`)."""

    def __init__(self, directory: Path, index: int, count: int) -> None:
        if not 0 <= index < count:
            raise ValueError(f"worker index {index} is not in 0..{count - 1}")
        self.directory = directory
        self.index = index
        self.count = count
        self._registry: CollectorRegistry | None = None
        self._server: asyncio.AbstractServer | None = None

    async def start(self, registry: CollectorRegistry) -> None:
        """Answer the other workers' reads of `registry` until `stop`."""
        self._registry = registry
        path = worker_socket_path(self.directory, self.index)
        path.unlink(missing_ok=True)  # left by a worker of this index that was killed
        self._server = await asyncio.start_unix_server(self._answer, path=str(path))

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        worker_socket_path(self.directory, self.index).unlink(missing_ok=True)

    async def gather(self) -> bytes:
        """Every worker's metrics that answered in time, in one exposition with a `worker`
        label; a worker that did not answer is left out, and logged."""
        if self._registry is None:
            raise RuntimeError("WorkerMetrics.gather before start")
        texts = await asyncio.gather(*(self._read(i) for i in range(self.count)))
        answered = {i: text for i, text in enumerate(texts) if text is not None}
        # parsing a few hundred series is pure Python: off the event loop
        return await asyncio.to_thread(merge_expositions, answered)

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            assert self._registry is not None  # the server starts after the registry is set
            writer.write(exposition(self._registry))
            await writer.drain()
        finally:
            writer.close()

    async def _read(self, index: int) -> str | None:
        if index == self.index:
            assert self._registry is not None
            return exposition(self._registry).decode()
        path = worker_socket_path(self.directory, index)
        try:
            async with asyncio.timeout(_GATHER_TIMEOUT_S):
                reader, writer = await asyncio.open_unix_connection(str(path))
                try:
                    return (await reader.read()).decode()
                finally:
                    writer.close()
        except (OSError, TimeoutError) as exc:
            log.warning(
                "/metrics: worker %d did not answer at %s (%s); its series are left out of "
                "this scrape (a worker starting or stopping does this)",
                index,
                path,
                exc,
            )
            return None


def merge_expositions(expositions: Mapping[int, str]) -> bytes:
    """One exposition of every family in `expositions` (text format, by worker index), each
    sample labelled with its worker."""
    families: dict[str, Metric] = {}
    for index, text in expositions.items():
        worker = str(index)
        for family in text_string_to_metric_families(text):
            merged = families.get(family.name)
            if merged is None:
                merged = Metric(family.name, family.documentation, family.type, family.unit)
                families[family.name] = merged
            merged.samples.extend(
                sample._replace(labels={**sample.labels, WORKER_LABEL: worker})
                for sample in family.samples
            )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families.values()))
    return generate_latest(registry)


class _Families:
    """A collector of families already made."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = tuple(families)

    def collect(self) -> Iterator[Metric]:
        return iter(self._families)
