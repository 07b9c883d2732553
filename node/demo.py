"""`statefed demo`: the whole system on this machine, with live demo data.

Starts the embedded broker, two nodes, the gateway and the Spark pipeline through
`LocalCluster`, produces the demo words, prints the GraphiQL URL and an example query,
then keeps a trickle of words flowing until Ctrl-C, when it stops everything it started.
"""

from __future__ import annotations

import shutil
import signal
import socket
import threading
import time
from pathlib import Path

from node.localcluster import LocalCluster
from node.produce import DEMO_WORDS, new_producer, produce_keys, skewed_words

__all__ = ["run_demo"]

SEED_WORDS = ["kafka"] * 8 + ["franz"] * 3 + ["caste"] * 2 + ["trail", "castle"]
EXAMPLE = """\
  { wordCount(word: "kafka") { word count } }
  { wordCounts(words: ["kafka", "franz", "nope"]) { word count } }
  { topWords(limit: 3) { word count } }"""


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def _settings(env: dict[str, str]) -> tuple[Path, int, int]:
    base = Path(env.get("STATEFED_DEMO_DIR", ".statefed/demo"))
    port = int(env.get("STATEFED_GATEWAY_PORT", "8100"))
    partitions = int(env.get("STATEFED_PARTITIONS", "6"))
    if not _port_free(port):
        raise SystemExit(
            f"port {port} is taken: stop what listens there or run `statefed demo --port N`"
        )
    return base, port, partitions


def run_demo(env: dict[str, str]) -> None:
    base, port, partitions = _settings(env)
    # The embedded broker keeps topics in memory only: state from an earlier demo would
    # name offsets the new broker never had, so each demo starts from a clean directory.
    shutil.rmtree(base, ignore_errors=True)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    cluster = LocalCluster(base, partitions, gateway_port=port, env=env, progress=_say)
    try:
        cluster.start_all()
        produce_keys(cluster.bootstrap, "words", SEED_WORDS + skewed_words(5000, 200, seed=1))
        _say(f"demo data: {len(SEED_WORDS) + 5000} words produced to topic words")
        print(f"\nGraphiQL: {cluster.gateway_url}\nTry:\n{EXAMPLE}\n", flush=True)
        print(f"Logs: {base}/*.log. Ctrl-C stops everything.\n", flush=True)
        _trickle(cluster.bootstrap, stop)
    except KeyboardInterrupt:
        pass
    except Exception as exc:
        _say(f"demo failed: {exc}")
        raise SystemExit(1) from exc
    finally:
        _say("stopping ...")
        stopped = cluster.stop()
        _say(f"stopped {', '.join(stopped) or 'nothing'}")


def _trickle(bootstrap: str, stop: threading.Event) -> None:
    """A few demo words a second, so the counts in GraphiQL move."""
    producer = new_producer(bootstrap)
    tick = 0
    while not stop.wait(1.0):
        tick += 1
        produce_keys(bootstrap, "words", [DEMO_WORDS[tick % len(DEMO_WORDS)]], producer=producer)
