"""Local tooling: the `statefed` command line, the embedded broker, the local cluster
launcher, the demo and child processes owned by a handle. Nothing deployed imports it."""

from tooling.broker import EmbeddedBroker
from tooling.localcluster import LocalCluster
from tooling.processes import ManagedProcess, wait_until, wait_until_async

__all__ = ["EmbeddedBroker", "LocalCluster", "ManagedProcess", "wait_until", "wait_until_async"]
