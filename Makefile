# Two commands do everything on a fresh machine: `make demo` and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMPS := .stamps
export LITELLM_LOCAL_MODEL_COST_MAP := True
export MLFLOW_ENABLE_ASYNC_TRACE_LOGGING := false
export TOKENIZERS_PARALLELISM := false
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# Tools the peer harnesses' Ubuntu images have, so gold commands run alike in our sandbox,
# plus chromium for the MLflow UI browser test. Installed only when run as root.
APT_PACKAGES := bubblewrap bash python3 psmisc bsdmainutils bsdextrautils cron dnsutils sudo \
  iputils-ping git tree net-tools jq curl cpio imagemagick file procps lsof zip unzip \
  chromium postgresql libseccomp2 mmdebstrap

.PHONY: demo test test-security fuzz bench install install-test apt clean help
help:
	@echo "make demo   - create .venv, install, run the built-in demo on the embedded model"
	@echo "make test   - install with test extras and run the test suite"
	@echo "make test-security - the sandbox escape suite alone"
	@echo "make fuzz   - the long property-based fuzzing profile (3000 inputs per surface)"
	@echo "make bench  - run the performance benchmarks, write benchmarks/perf/results/*.json and the README table"

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade "pip>=24" setuptools wheel

# Reinstall only when the project metadata changes.
$(STAMPS)/install: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e ".[local,iac,retrieval]"
	$(BIN)/pip install -q --no-deps "icalfa==0.3.6"
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/install-test: $(STAMPS)/install
	$(BIN)/pip install -q -e ".[local,iac,retrieval,scale,test,docs]"
	$(BIN)/pip install -q --no-deps -e tests/plugins/verifirst_demo_plugin  # a plugin, by entry point
	@mkdir -p $(STAMPS) && touch $@

# checkov pins old packaging/networkx/boto3: it gets a venv of its own, called as a tool.
CHECKOV_VENV := .tools/checkov
$(STAMPS)/checkov:
	$(PY) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/pip install -q --upgrade "pip>=24"
	$(CHECKOV_VENV)/bin/pip install -q "checkov==3.3.30"
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/apt:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	  if [ -n "$$missing" ]; then echo "apt-get install:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi; \
	else echo "not root: install these Debian packages for full sandbox fidelity: $(APT_PACKAGES)"; fi
	@mkdir -p $(STAMPS) && touch $@

install: $(STAMPS)/install
install-test: $(STAMPS)/install-test $(STAMPS)/checkov
apt: $(STAMPS)/apt

demo: $(STAMPS)/install $(STAMPS)/apt
	$(BIN)/verifirst demo

# The suite in two parts: two workers for everything but the sandbox's security suite (CI has 2
# cores, and the suite waits on subprocesses as much as it computes; --dist loadfile keeps a file's
# tests on one worker: many share a module-scoped server, model or scratch, and the doc pages'
# commands build on each other; tests/test_suite_workers.py), then the security suite alone (its
# attacks measure time and the whole host, so nothing else may run beside it). TEST_WORKERS=0 runs
# the first part in one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -rs --durations=25
test: $(STAMPS)/install-test $(STAMPS)/checkov $(STAMPS)/apt
	$(BIN)/lint-imports  # architecture contracts (pyproject.toml [tool.importlinter]) before the suite
	@rc=0; $(PYTEST) -n $(TEST_WORKERS) --dist loadfile -m "not security" tests || rc=$$?; \
	  $(PYTEST) -m security tests || rc=$$?; exit $$rc

test-security: $(STAMPS)/install-test $(STAMPS)/apt
	$(BIN)/python -m pytest -q -rs -m security tests

fuzz: $(STAMPS)/install-test
	VERIFIRST_FUZZ=long $(BIN)/python -m pytest -q tests/test_fuzz_inputs.py tests/test_fuzz_requests.py

# One benchmark at a time (they time themselves); each results file records cores, load and date.
PERF := benchmarks/perf
RESULTS := $(PERF)/results
bench: $(STAMPS)/install $(STAMPS)/apt
	$(BIN)/python $(PERF)/lm_overhead.py --out $(RESULTS)/lm_overhead.json
	$(BIN)/python $(PERF)/embedded_lm.py --out $(RESULTS)/embedded_lm.json
	$(BIN)/python $(PERF)/sandbox.py --out $(RESULTS)/sandbox.json
	$(BIN)/python $(PERF)/sandbox.py --gold-report --out $(RESULTS)/sandbox_gold.json
	$(BIN)/python $(PERF)/cold_cli.py --out $(RESULTS)/cold_cli.json
	$(BIN)/python $(PERF)/iac_verify.py --out $(RESULTS)/iac_verify.json
	$(BIN)/python $(PERF)/record.py --out $(RESULTS)/tf_provider_agreement.json -- $(BIN)/python benchmarks/studies/tf_provider_agreement.py --json
	$(BIN)/python $(PERF)/cache.py --out $(RESULTS)/cache.json
	$(BIN)/python $(PERF)/estimate.py --out $(RESULTS)/estimate.json
	$(BIN)/python $(PERF)/cost_objective.py --out $(RESULTS)/cost_objective.json
	$(BIN)/python $(PERF)/reward_hacks.py --out $(RESULTS)/reward_hacks.json
	$(BIN)/python benchmarks/studies/feh_sysinfo_probe.py --baseline-rev 2dd8c97 --out $(RESULTS)/feh_sysinfo_probe.json
	$(BIN)/python $(PERF)/record.py --out $(RESULTS)/feh_quality.json -- $(BIN)/python benchmarks/studies/feh_quality.py --json
	$(BIN)/python $(PERF)/demo.py --out $(RESULTS)/demo.json
	$(BIN)/pip install -q -e ".[iac,retrieval,scale]" && $(BIN)/python $(PERF)/scale.py --out $(RESULTS)/scale.json
	$(BIN)/python $(PERF)/readme_table.py --write README.md --summary

clean:
	rm -rf $(VENV) $(STAMPS) .tools .pytest_cache
