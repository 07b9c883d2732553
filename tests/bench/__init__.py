"""statefed's benchmarks (issue 6): `make bench` runs `python -m tests.bench`.

They start the real system on loopback (broker, nodes, gateway, Spark pipeline), measure
query latency and throughput against a floor, fan-out, freshness, pipeline throughput,
restore, failover and memory, and write tests/bench/RESULTS.md and RESULTS.json.
Benchmarks are not tests: a missed target prints FAIL but does not fail the run.
"""

__all__: list[str] = []
