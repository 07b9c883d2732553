# statefed: `make demo` runs the whole system locally, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNTIME := $(VENV)/.runtime
STAMP  := $(VENV)/.installed
# the docs site, built --strict: a link to a page or an anchor that does not exist fails the
# build (mkdocs.yml's `validation`); the site goes to .cache/site (git-ignored). Material for
# MkDocs 9.x prints a banner at every build that it is maintained until 2027-05-05: silenced.
MKDOCS := NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs

.PHONY: install kafka registry connector jvm-archives browser prometheus wrk apollo-router demo test test-unit check format schema docs bench clean

# Apache Kafka's jars (the local broker) and Spark's Kafka connector: fetched from the
# Java registry into git-ignored caches, pinned in tooling/kafka/pom.xml and
# tooling/connector.py.
KAFKA_VERSION := 4.1.1
KAFKA_JARS    := .cache/kafka/$(KAFKA_VERSION)
KAFKA_STAMP   := $(KAFKA_JARS)/.fetched
CONNECTOR_STAMP := $(VENV)/.connector
# Apicurio Registry, a Schema Registry with Confluent's API (`statefed registry`, the
# tests): its ready-to-run release from Maven Central, unpacked into a git-ignored cache;
# pinned here and as REGISTRY_VERSION in tooling/registry.py (a test keeps them equal).
# 3.0.9 runs on Java 17; Apicurio 3.3 needs Java 21.
REGISTRY_VERSION := 3.0.9
REGISTRY_DIR     := .cache/registry/$(REGISTRY_VERSION)
REGISTRY_STAMP   := $(REGISTRY_DIR)/.fetched
REGISTRY_ARCHIVE := apicurio-registry-app-$(REGISTRY_VERSION)-all.tar.gz
# Apollo Router, a peer of `make bench`: the crate from crates.io, built once (its build
# needs protoc, Debian's protobuf-compiler); tests/bench/peer_gateways.py pins the same
ROUTER_VERSION := 2.17.0
ROUTER_DIR     := .cache/apollo-router/$(ROUTER_VERSION)
ROUTER_BIN     := $(ROUTER_DIR)/bin/router

# Class-data archives of the broker's, the registry's and Spark's JVMs (runtime/classdata.py):
# written by a training run of each part, after which each starts in seconds less.
JVM_ARCHIVES := .cache/jvm
JVM_STAMP    := $(JVM_ARCHIVES)/.trained

# the runtime dependencies alone (what `make demo` needs), then the dev extras on top
# (tests, linters, profilers: what `make test` and `make check` need). uv installs them
# (pip installs uv first): it resolved the same versions pip did, in 45 s instead of 100 s
# on a machine with empty caches (2 cores, December 2026). --system-certs: the system's
# certificates, as pip is configured to use. uv's stamp names its version, so a venv made
# before uv (or with another uv) gets this one and its packages installed again.
UV_VERSION := 0.13.8
UV_STAMP   := $(VENV)/.uv-$(UV_VERSION)
UV_PIP     := $(BIN)/uv pip install --quiet --system-certs --python $(BIN)/python

$(UV_STAMP):
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	touch $(UV_STAMP)

$(RUNTIME): pyproject.toml $(UV_STAMP)
	$(UV_PIP) -e .
	touch $(RUNTIME)

$(STAMP): $(RUNTIME)
	$(UV_PIP) -e '.[dev]'
	touch $(STAMP)

$(KAFKA_STAMP): tooling/kafka/pom.xml
	command -v mvn >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y maven)
	rm -rf $(KAFKA_JARS)
	mvn --batch-mode --quiet -f tooling/kafka/pom.xml dependency:copy-dependencies -DoutputDirectory=$(CURDIR)/$(KAFKA_JARS)
	touch $(KAFKA_STAMP)

# the archive is unpacked with tar: the dependency plugin's own unpack (2.8, what Maven 3.8
# runs without a pom) cuts long file names short
$(REGISTRY_STAMP):
	command -v mvn >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y maven)
	rm -rf $(REGISTRY_DIR)
	mvn --batch-mode --quiet dependency:copy -Dartifact=io.apicurio:apicurio-registry-app:$(REGISTRY_VERSION):tar.gz:all -DoutputDirectory=$(abspath $(REGISTRY_DIR))
	tar xzf $(REGISTRY_DIR)/$(REGISTRY_ARCHIVE) -C $(REGISTRY_DIR)
	rm $(REGISTRY_DIR)/$(REGISTRY_ARCHIVE)
	touch $(REGISTRY_STAMP)

# Spark's own Kafka connector and spark-avro, resolved by Spark's `--packages` resolver
# into the venv's pyspark jars/ (the Dockerfile runs the same step)
$(CONNECTOR_STAMP): $(RUNTIME) tooling/connector.py
	$(BIN)/python -m tooling.connector
	touch $(CONNECTOR_STAMP)

# An archive is a speed-up only: a failed training run says so, and the JVMs start without
# one (the next `make install` tries again).
$(JVM_STAMP): $(RUNTIME) $(KAFKA_STAMP) $(REGISTRY_STAMP) $(CONNECTOR_STAMP) runtime/classdata.py tooling/classdata.py
	mkdir -p $(JVM_ARCHIVES)
	if STATEFED_JVM_ARCHIVES=$(abspath $(JVM_ARCHIVES)) $(BIN)/python -m tooling.classdata; then touch $(JVM_STAMP); else \
	  echo "make: no class-data archives (the JVMs start without them, slower): see above"; fi

kafka: $(KAFKA_STAMP)  ## Apache Kafka's jars for the local broker, into .cache/kafka/

registry: $(REGISTRY_STAMP)  ## Apicurio Registry (a Schema Registry with Confluent's API) for `statefed registry`, into .cache/registry/

connector: $(CONNECTOR_STAMP)  ## Spark's Kafka connector and spark-avro, into the venv's pyspark

jvm-archives: $(JVM_STAMP)  ## class-data archives of the broker's, registry's and Spark's JVMs (faster starts), into .cache/jvm/

install: $(STAMP) $(KAFKA_STAMP) $(REGISTRY_STAMP) $(CONNECTOR_STAMP) $(JVM_STAMP)  ## .venv with the pinned dependencies and dev extras, Kafka's jars, the Schema Registry, Spark's connector, the JVMs' class-data archives

demo: $(RUNTIME) $(KAFKA_STAMP) $(CONNECTOR_STAMP)  ## broker, pipeline, two nodes, gateway and demo data (runtime dependencies only); prints the GraphiQL URL
	$(BIN)/statefed demo

browser:  ## Debian's Chromium, which the GraphiQL browser test drives (installing needs root)
	command -v chromium >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium)

prometheus:  ## Prometheus and promtool, which the metrics tests scrape and check every part with
	command -v prometheus >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y prometheus)

wrk:  ## wrk, the benchmark's load generator (and the test of its answer-checking script)
	command -v wrk >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y wrk)

# Three phases. The unit tier on two workers: alone its tests wait a third of their time
# (timeouts, subprocesses, browsers), so `test-unit` runs it on four (a working tree,
# December 2026: 2:39 on four, 3:03 on three, 3:32 on two), but in `make test` the rest of
# `install` fills those waits (a fresh clone: 4:00 on four against 3:39 on two). The kafka and spark tiers on three workers, a test
# file per worker (each worker has its own session broker): their parts mostly wait on
# the broker and on rebalances (on 2 cores: 5:34 on three workers, 6:47 on two, 5:41 on
# four, one user CPU-second per second, when measured), and their bounds held on a shared
# machine. Whole systems beside them (the demo, the conformance matrix, a cluster on TLS)
# saturate the 2 cores: measured 10:41 for the phase and a node test past its deadline.
# The cluster and chaos tiers on two workers, a folder of tests/ per worker (a folder's
# one cluster stays on one worker): their bounds (answered shares, hedge delays, outages)
# hold with two clusters on 2 cores. tests/scheduling.py starts the longest units first.
# Every phase runs; the target fails if any did. On a slower machine of the same kind
# (2026-12) every phase was bound by CPU: the unit tier beside the kafka and spark tiers
# only slowed both (0.4% idle), and the cluster tier's CPU went 42% to Spark's JVMs (its
# micro-batches more than its starts), 20% to the brokers, 14% to the pytest workers.
# The unit tier needs the venv alone, so the rest of `install` (Kafka's jars, the registry,
# Spark's connector, the class-data training: about a minute on a fresh clone) is made
# beside it, its output in $(INSTALL_LOG), shown once the unit tier ends; a failed install
# fails the target before the tiers that need it. Measured on 2 cores (December 2026, three
# runs): 141-143 s for both, against 116 s and 60 s one after the other. `make install` is
# called as $(INSTALLER), not as $(MAKE): make runs a line naming $(MAKE) under `make -n`
# too, and this line also runs the tests.
INSTALLER   = $(MAKE) --no-print-directory install
INSTALL_LOG := .cache/install.log
test: $(STAMP) browser prometheus wrk  ## the whole suite (unit and end-to-end on real parts)
	mkdir -p $(dir $(INSTALL_LOG))
	$(INSTALLER) > $(INSTALL_LOG) 2>&1 & installing=$$!; \
	$(BIN)/pytest -m unit -n 2; unit=$$?; \
	wait $$installing; installed=$$?; cat $(INSTALL_LOG); \
	if test $$installed -ne 0; then \
	  echo "make test: make install failed beside the unit tier (its output is above and in $(INSTALL_LOG)); fix what it names, then run make test again"; \
	  exit 1; fi; \
	$(BIN)/pytest -m "kafka or spark" -n 3 --dist-by file; parts=$$?; \
	$(BIN)/pytest -m "cluster or chaos" -n 2 --dist-by folder; whole=$$?; \
	test $$unit -eq 0 && test $$parts -eq 0 && test $$whole -eq 0

test-unit: $(STAMP) browser prometheus wrk  ## the unit tier alone (no broker, Spark or cluster): the inner loop, a few minutes
	$(BIN)/pytest -m unit -n 4

check: $(STAMP)  ## format, lint, types, the import contracts (pyproject.toml) and the docs site's links
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(MKDOCS) build --strict --quiet

# the built-in catalogue's, whatever STATEFED_CATALOGUE says (`statefed schema` prints yours)
schema: $(STAMP)  ## regenerate the committed SDL in schema/ from the code (gateway and node) and Apollo Client's possibleTypes.json
	$(BIN)/python -m gateway.execute.sdl --write schema/gateway.graphql
	$(BIN)/python -m node.subgraph.sdl --write schema/node.graphql
	$(BIN)/python -m gateway.execute.possibletypes --write schema/possibleTypes.json

docs: $(STAMP)  ## regenerate docs/configuration.md from the settings' declarations, then build the docs site into .cache/site
	$(BIN)/python -m tooling.configdocs --write docs/configuration.md
	$(MKDOCS) build --strict

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

apollo-router: $(ROUTER_BIN)  ## Apollo Router (Rust), a peer of the benchmarks: built from crates.io into .cache/apollo-router/ the first time (about 12 minutes on 2 cores)

$(ROUTER_BIN):
	command -v protoc >/dev/null || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y protobuf-compiler)
	CARGO_HOME=$(CURDIR)/.cache/cargo cargo install apollo-router --version $(ROUTER_VERSION) --locked --root $(ROUTER_DIR)

bench: install wrk apollo-router  ## benchmarks; figures go to tests/bench/RESULTS.md
	$(BIN)/python -m tests.bench

clean:
	rm -rf $(VENV) .statefed *.egg-info
