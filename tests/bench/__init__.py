"""statefed's benchmarks (issues 6, 15, 16, 18, 30 and 31): `make bench` runs
`python -m tests.bench` (`--only NAME` runs one measurement, e.g. `--only live`; `--quick` a
small smoke run).

They start the real system on loopback (broker, nodes, gateway, Spark pipeline), measure
query latency and throughput against a floor (also with the gateway cache on and off),
fan-out, produce -> push latency of subscriptions and memory per subscriber, freshness
(the pipeline in Real-Time Mode and in micro-batches, side by side), pipeline throughput,
restore, failover and memory, and write tests/bench/RESULTS.md and RESULTS.json.
Benchmarks are not tests: a missed target prints FAIL but does not fail the run.
"""

__all__: list[str] = []
