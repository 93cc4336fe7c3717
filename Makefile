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
	@$(if $(filter test test-loaded,$@),tools/ensure-speedscope-schema >/dev/null)
	@$(if $(filter test-fleet bench-agent,$@),sh tools/build_pyroscope.sh >/dev/null)
	tools/in-root $(MAKE) --no-print-directory $@ PY=$(PY) VENV=$(VENV) PYTEST_ARGS='$(PYTEST_ARGS)' CHECK_ARGS='$(CHECK_ARGS)'
else
ifneq ($(filter 3.10 3.11 3.12 3.13 3.14 3.15,$(PY)),)
override PY := $(shell tools/ensure-python $(PY))
endif
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SOURCES := $(shell find src -name '*.py' -o -name '*.c' -o -name '*.h' -o -name '*.pyi' -o -name '*.js' -o -name '*.css' -o -name '*.pth') setup.py pyproject.toml

.PHONY: all venv build demo test test-loaded test-fleet lint bench bench-check bench-sampling bench-stdlib bench-agent bench-soak bench-marks valgrind sanitize fuzz clean

all: build

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# pip compiles what it installs one file at a time (a virtual environment took 58 s to make);
# installed without that, then compiled on every core, it takes 39 s (CI makes seven).  Left
# to the first import instead, with PYTHONDONTWRITEBYTECODE set (as here) it would be compiled
# again by every process: valgrind's stage took 40 s longer.
compile_all = $(1)/python -m compileall -q -j 0 $$($(1)/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))') >/dev/null
$(STAMP): $(BIN)/python $(SOURCES)
	$(BIN)/python -m pip install -q --no-compile ".[dev]"
	$(call compile_all,$(BIN))
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

# --durations: the slowest tests in every log, for keeping CI under its time.
test: build
	@tools/ensure-test-tools
	@tools/ensure-speedscope-schema >/dev/null
	cd tests && $(abspath $(BIN))/python -m pytest -q --durations=15 --ignore=fleet $(PYTEST_ARGS)

# The whole suite while other processes keep every core busy (tools/with-load: one CPU hog per
# core), as on a shared CI machine: timing and statistical tests must hold there too.
test-loaded: build
	tools/with-load $(MAKE) --no-print-directory test PY=$(PY) VENV=$(VENV) PYTEST_ARGS='$(PYTEST_ARGS)'

# The fleet path against a real Grafana Pyroscope server (built once, minutes, then cached).
test-fleet: build
	@sh tools/build_pyroscope.sh >/dev/null
	cd tests && $(abspath $(BIN))/python -m pytest -q --fleet fleet $(PYTEST_ARGS)

lint: build
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/mypy

# Every C file of src/leadline/_native under memcheck (tools/valgrind_workload.py drives each).
valgrind: build
	$(BIN)/python tools/valgrind_check.py

# The native core built with AddressSanitizer and UndefinedBehaviorSanitizer, in its own virtual
# environment (the normal one is untouched), then the tests that drive it: tracing, sampling
# (in-process, attach, --subprocesses), the capture reader and its fuzzing, probes, marks, the
# exporters and the version tables; then tools/valgrind_workload.py, which drives every C file.
# tools/sanitize_check.py sets up the runtime and fails on any report from any process.
# Deselected, each for a reason:
#  - test_memory_truth_retained_vs_transient, test_rss_trigger_records_only_memory_moves,
#    test_the_memory_timeline_marks_the_calls_that_grew_it: they assert RSS figures (a freed
#    64 MiB block no longer counted; under 100 events that move RSS by a page; a release that
#    gives 66 MiB back), and ASan's allocator holds every freed block in a 256 MiB quarantine
#    before it reuses or releases it, so RSS grows where these expect it still (the release
#    grew it 8 MiB there); the tracer code they drive
#    runs in every other test of test_trace_e2e.py;
#  - test_accuracy_on_a_known_split, test_cpu_mode_ignores_sleeping_threads,
#    test_fork_child_unchanged_and_parent_keeps_sampling: they assert sampling timings (under 1%
#    of 1 kHz ticks missed over 14 s, sampled CPU within 15% of the thread's clock, over 100
#    samples in 0.5 s): on a busy machine they fail now and then unsanitized, and the sanitized
#    program and sampler thread, several times slower, make it the rule (at load 11 on 2 cores:
#    90-93 samples unsanitized, 39-70 sanitized); the same sampling code runs in the other tests
#    of test_sampling_e2e.py, and a fork while sampling in the workload;
#  - test_marks_on_the_html_timeline: renders the report in Chromium, which is not ours to run
#    under a preloaded ASan runtime (its trace is test_marks_in_trace_report_log_and_chrome's).
#  - test_the_writer_is_not_woken_for_every_chunk: it counts the writer's wake-ups against one a
#    10 ms period plus one per 32 chunks, which tells them from one a chunk only while the
#    program hands over well over 100 chunks a second (it needs 160); the sanitized hook, about
#    ten times slower, hands over 110-190 (112 quiet, 150 in CI), about one a period, where the
#    two cannot be told apart; the writer it drives runs in every other trace test here.
SAN_VENV := $(VENV)-sanitize
SAN_BIN := $(SAN_VENV)/bin
SAN_STAMP := $(SAN_VENV)/.installed
SANITIZE_TESTS ?= test_trace_e2e.py test_sampling_e2e.py test_capture_format.py test_probe.py \
	test_marks.py test_export_formats.py test_versions.py test_errors.py test_diff_work.py \
	test_sampling_asyncio.py test_run_native.py
SANITIZE_DESELECT := test_trace_e2e.py::test_memory_truth_retained_vs_transient \
	test_diff_work.py::test_calls_in_html \
	test_trace_e2e.py::test_rss_trigger_records_only_memory_moves \
	test_trace_e2e.py::test_the_memory_timeline_marks_the_calls_that_grew_it \
	test_sampling_e2e.py::test_accuracy_on_a_known_split \
	test_sampling_e2e.py::test_cpu_mode_ignores_sleeping_threads \
	test_sampling_e2e.py::test_fork_child_unchanged_and_parent_keeps_sampling \
	test_marks.py::test_marks_on_the_html_timeline \
	test_trace_e2e.py::test_the_writer_is_not_woken_for_every_chunk \
	test_sampling_asyncio.py::test_a_mix_of_tasks_is_shared_as_the_program_measured \
	test_sampling_asyncio.py::test_the_flame_graph_colours_tasks

$(SAN_BIN)/python:
	$(PY) -m venv $(SAN_VENV)
	$(SAN_BIN)/python -m pip install -q --upgrade pip

$(SAN_STAMP): $(SAN_BIN)/python $(SOURCES)
	LEADLINE_SANITIZE=1 $(SAN_BIN)/python -m pip install -q --no-compile ".[dev]"
	$(call compile_all,$(SAN_BIN))
	@touch $(SAN_STAMP)

sanitize: $(SAN_STAMP)
	@tools/ensure-speedscope-schema >/dev/null
	$(SAN_BIN)/python tools/sanitize_check.py -- $(SANITIZE_TESTS) \
		$(addprefix --deselect tests/,$(SANITIZE_DESELECT)) $(PYTEST_ARGS)

# Coverage-guided fuzzing of every reader (docs/fuzzing.md): FUZZ_SECONDS per target, or
# FUZZ_RUNS inputs per target (0: no limit); seeds, corpus and findings live in FUZZ_DIR, outside
# the repository.  Then the kept crashers and the corpus are replayed with the C core built with
# AddressSanitizer and UndefinedBehaviorSanitizer.
FUZZ_TARGET ?= all
FUZZ_SECONDS ?= 600
FUZZ_RUNS ?= 0
FUZZ_DIR ?= $(HOME)/.cache/leadline-fuzz
FUZZ_REPLAY ?= tests/fuzz/crashers $(FUZZ_DIR)/corpus

fuzz: build
	@tools/ensure-clang
	$(BIN)/python -m pip install -q --no-compile ".[fuzz]"
	$(call compile_all,$(BIN))
	$(BIN)/python tests/fuzz/run.py $(FUZZ_TARGET) --work $(FUZZ_DIR) --seconds $(FUZZ_SECONDS) --runs $(FUZZ_RUNS)
	$(BIN)/python tests/fuzz/run.py $(FUZZ_TARGET) --work $(FUZZ_DIR) --sanitize --replay $(FUZZ_REPLAY)

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

# The regression gate for leadline's own cost: trace against the bare empty hook and run at 1 kHz
# against the program alone, a few minutes, judged against bench/check-figures.json beyond the
# noise of the same run (bench/check.py; CHECK_ARGS="--update" stores new figures).
CHECK_ARGS ?=
bench-check: build
	$(BIN)/python bench/check.py $(CHECK_ARGS)

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
	rm -rf build build-sanitize .venv .venv-* demo-output src/*.egg-info

endif
