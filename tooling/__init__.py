"""Local tooling: the `statefed` command line, Apache Kafka run locally, the local cluster
launcher, the demo and child processes owned by a handle. Nothing deployed imports it."""

from tooling.broker import KafkaBroker, KafkaCluster
from tooling.localcluster import LocalCluster
from tooling.processes import ManagedProcess, wait_until, wait_until_async

__all__ = [
    "KafkaBroker",
    "KafkaCluster",
    "LocalCluster",
    "ManagedProcess",
    "wait_until",
    "wait_until_async",
]
