# Everything a person does with leadline is a make target.  The virtual environment is
# created on demand; PY picks the interpreter, VENV where its environment lives.
#
# PY is an interpreter (a command or a path), or a version from 3.10 to 3.15, which
# tools/ensure-python finds or installs: 3.10 to 3.13 from pyenv; 3.14 and 3.15 are Debian's, in a
# separate sid root, and every target given PY=3.14 or PY=3.15 runs inside that root
# (tools/in-root), in the same directory, with its own virtual environment (.venv-3.15).
PY ?= python3
ifeq ($(origin VENV),undefined)
VENV := $(if $(filter 3.10 3.11 3.12 3.13 3.14 3.15,$(PY)),.venv-$(PY),.venv)
endif

ifneq ($(and $(filter 3.14 3.15,$(PY)),$(if $(LEADLINE_IN_ROOT),,outside)),)
# Outside the root: make sure it exists, then run the same goal inside it.
GOALS := $(or $(MAKECMDGOALS),all)
.PHONY: $(GOALS)
$(GOALS):
	@tools/ensure-python $(PY) >/dev/null
	@$(if $(filter test,$@),tools/ensure-speedscope-schema >/dev/null)
	@$(if $(filter test-fleet bench-agent,$@),sh tools/build_pyroscope.sh >/dev/null)
	tools/in-root $(MAKE) --no-print-directory $@ PY=$(PY) VENV=$(VENV) PYTEST_ARGS='$(PYTEST_ARGS)'
else
ifneq ($(filter 3.10 3.11 3.12 3.13 3.14 3.15,$(PY)),)
override PY := $(shell tools/ensure-python $(PY))
endif
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOURCES := $(shell find src -name '*.py' -o -name '*.c' -o -name '*.h' -o -name '*.pyi' -o -name '*.js' -o -name '*.css' -o -name '*.pth') setup.py pyproject.toml

.PHONY: all venv build demo test test-fleet lint bench bench-sampling bench-stdlib bench-agent bench-soak bench-marks valgrind clean

all: build

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/python -m pip install -q ".[dev]"
	@touch $(STAMP)

venv build: $(STAMP)

demo: build
	@mkdir -p demo-output
	$(BIN)/leadline trace -o demo-output/demo.lead examples/demo.py
	$(BIN)/leadline report demo-output/demo.lead --limit 15
	$(BIN)/leadline report demo-output/demo.lead --html -o demo-output/demo.html
	$(BIN)/leadline run -q --rate 1000 -o demo-output/demo-sample.lead examples/demo.py
	$(BIN)/leadline report demo-output/demo-sample.lead --limit 10
	$(BIN)/leadline report demo-output/demo-sample.lead --html -o demo-output/demo-sample.html
	@echo "HTML reports: demo-output/demo.html (trace), demo-output/demo-sample.html (flame graph)"

test: build
	@tools/ensure-chromium
	@tools/ensure-speedscope-schema >/dev/null
	cd tests && $(abspath $(BIN))/python -m pytest -q --ignore=fleet $(PYTEST_ARGS)

# The fleet path against a real Grafana Pyroscope server (built once, minutes, then cached).
test-fleet: build
	@sh tools/build_pyroscope.sh >/dev/null
	cd tests && $(abspath $(BIN))/python -m pytest -q --fleet fleet $(PYTEST_ARGS)

lint: build
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy

valgrind: build
	$(BIN)/python tools/valgrind_check.py

# pymemtrace takes minutes per run: it is cut at 150 s and reported as a lower bound.
BENCH_ARGS ?= --rounds 5 --timeout 150

bench: build
	$(BIN)/python bench/run.py $(BENCH_ARGS)
	$(BIN)/python bench/report_speed.py

# Sampling: leadline run against py-spy, overhead on calls and las, accuracy on split.
bench-sampling: build
	$(BIN)/python bench/sampling.py $(BENCH_ARGS)

# On 3.15: leadline run against the standard library's own sampler (python -m profiling.sampling)
# on the same program at the same rates, then accuracy on split.  `make bench-stdlib PY=3.15`.
STDLIB_ROUNDS ?= 5
bench-stdlib: build
	$(BIN)/python bench/sampling.py --workload calls --rounds $(STDLIB_ROUNDS) --name sampling-vs-stdlib-calls --candidates leadline-100,leadline-1k,stdlib-100,stdlib-1k
	$(BIN)/python bench/sampling.py --accuracy --rounds $(STDLIB_ROUNDS) --name sampling-vs-stdlib-accuracy --candidates leadline-wall-1k,leadline-cpu-1k,stdlib-1k

# The fleet agent against a real local Pyroscope server: the program alone, pushing, spooling.
bench-agent: build
	@sh tools/build_pyroscope.sh >/dev/null
	$(BIN)/python bench/agent.py --rounds 7

# The fleet agent for 10 minutes against each of a server that is down, slow and failing (HTTP
# 500): its memory, descriptors and spool must stay flat.  SOAK_ARGS="--seconds 60" is shorter.
SOAK_ARGS ?=
bench-soak: build
	$(BIN)/python bench/agent_soak.py $(SOAK_ARGS)

# leadline.mark() disabled and enabled against logging.debug disabled and a no-op function.
bench-marks: build
	$(BIN)/python bench/marks.py

clean:
	rm -rf build .venv .venv-* demo-output src/*.egg-info

endif
