# Sluice — every target does its own set-up (venv, packages, jars, services) on a fresh machine.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: venv up down status demo demo-cdc demo-search demo-lake demo-mqtt demo-file test test-fast lint bench-rocketmq bench-pipeline bench-db bench-cdc bench-cdc-batch bench-binlog bench-scale bench-search bench-lake bench-cold-job bench-replicator clean-state

$(STAMP): pyproject.toml
	@command -v java >/dev/null || (apt-get update -q && apt-get install -y -q openjdk-17-jdk-headless)
	@command -v mvn >/dev/null || (apt-get update -q && apt-get install -y -q maven)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[worker,dev]'
	touch $(STAMP)

venv: $(STAMP)

up: venv
	$(BIN)/sluice stack up

down: venv
	$(BIN)/sluice stack down

status: venv
	$(BIN)/sluice stack status

demo: up
	$(BIN)/python -m sluice.worker.demo.db $(DEMO_ARGS)

demo-cdc: up
	$(BIN)/python -m sluice.worker.demo.cdc $(DEMO_ARGS)

demo-search: up
	$(BIN)/python -m sluice.worker.demo.search $(DEMO_ARGS)

demo-lake: up
	$(BIN)/python -m sluice.worker.demo.lake $(DEMO_ARGS)

demo-mqtt: up
	$(BIN)/python -m sluice.worker.demo.mqtt $(DEMO_ARGS)

demo-file: up
	$(BIN)/python -m sluice.worker.demo.file

# mypy can't follow the editable install's import hook (pyproject.toml maps the folders under
# `sluice`), so it reads them through a link tree spelled as installed: build/typecheck/sluice/worker
# -> worker/ and so on. Its messages are shown with the repository's paths.
TYPECHECK := build/typecheck
lint: venv
	$(BIN)/ruff check .
	@mkdir -p $(TYPECHECK)/sluice
	@for d in workflows activities connectors worker deploy; do ln -sfn ../../../$$d $(TYPECHECK)/sluice/$$d; done
	@ln -sf ../../../deploy/packaging/sluice/__init__.py $(TYPECHECK)/sluice/__init__.py
	set -o pipefail; MYPYPATH=$(TYPECHECK) $(BIN)/mypy $$(find -L $(TYPECHECK)/sluice -name '*.py' \
	    -not -path '*/packaging/*' -not -path '*/__pycache__/*') | sed 's|$(TYPECHECK)/sluice/||'

# The whole suite against the real local stack (CI runs `make lint` beside it: .ci/run). The chart
# tests' helm is built (once per machine, minutes with empty Go caches) while the stack starts.
test: venv
	$(BIN)/python -m sluice.deploy.local.helm > /dev/null & helm_build=$$!; \
	$(BIN)/sluice stack up; up=$$?; wait $$helm_build; [ $$up -eq 0 ] || exit $$up
	$(BIN)/pytest -q -ra --durations=25 $(PYTEST_ARGS)

# The lane for iterating: every test that needs neither the stack nor a JVM (markers set from the
# fixtures a test uses: tests/conftest.py), with no set-up beyond the venv.
test-fast: venv
	$(BIN)/pytest -q -ra -m "not stack and not spark" --durations=10 $(PYTEST_ARGS)

bench-rocketmq: up
	$(BIN)/python -m bench.rocketmq_bench

bench-pipeline: up
	$(BIN)/python -m bench.pipeline_bench $(BENCH_RECORDS)

bench-db: up
	$(BIN)/python -m bench.db_bench $(BENCH_ROWS)

bench-replicator: up
	$(BIN)/python -m bench.replicator_bench $(BENCH_MESSAGES)

bench-mqtt: up
	$(BIN)/python -m bench.mqtt_bench $(BENCH_MESSAGES)

bench-cold-job: up
	$(BIN)/python -m bench.cold_job $(BENCH_ROWS)

bench-cdc: up
	$(BIN)/python -m bench.cdc_bench $(BENCH_ARGS)

bench-cdc-batch: up
	$(BIN)/python -m bench.cdc_batch $(BENCH_ROWS)

bench-binlog: up
	$(BIN)/python -m bench.binlog_decoders $(BENCH_ARGS)

bench-scale: up
	$(BIN)/python -m bench.scale_bench $(BENCH_CONNECTORS)

bench-search: up
	$(BIN)/python -m bench.search_bench $(BENCH_ARGS)

bench-lake: up
	$(BIN)/python -m bench.lake_bench $(BENCH_ARGS)

bench-verify: up
	$(BIN)/python -m bench.verify_bench

clean-state: down
	rm -rf .sluice
