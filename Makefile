# Cortex: top-level build.
#   make            library, cortex CLI, test tools          (build/)
#   make test       unit tests, reference checks, CLI checks
#   make sanitize   the same tests under ASan + UBSan         (build-san/)
#   make tsan       the threaded tests under ThreadSanitizer  (build-tsan/)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each      (build-fuzz/)
#   make bench      the default benchmark (see README)
#   make python     the Python module `cortex` (engine/python/)     (build/python/lib)
#   make python-asan  its tests with the module under ASan + UBSan    (build/python-asan)
# CC=clang works everywhere; kernels never use -march=native.

CC      ?= cc
# make KNOBS=1: engine test knobs compiled in (CORTEX_SLOWDOWN_PCT, see
# engine/src/forward.c), built into build-knob/ so knob and release objects never mix.
KNOBS   ?= 0
ifeq ($(KNOBS),1)
BUILD      ?= build-knob
endif
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
# -ffp-contract=off: no compiler-made FMAs, so scalar and SIMD tails round alike on gcc
# and clang (clang contracts a*b-c*d by default once -mfma is on).
WARN     = -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter -ffp-contract=off
CPPFLAGS = -D_GNU_SOURCE -Iengine/include
LDLIBS   = -lm -lz -pthread $(shell pkg-config --libs libpcre2-8 jansson)
ifeq ($(KNOBS),1)
CPPFLAGS += -DCORTEX_TEST_KNOBS
endif
PY      ?= /usr/bin/python3
FUZZ_SECONDS ?= 60
# cortex-bench speaks HTTP to other servers (run --endpoint): libcurl, jansson;
# its results store may be a PostgreSQL server: libpq.
HARNESS_PKGS  = libcurl jansson libpq
HARNESS_CFLAGS := $(filter-out -I/usr/include -I/usr/include/x86_64%,$(shell pkg-config --cflags $(HARNESS_PKGS)))
HARNESS_LIBS  := $(shell pkg-config --libs $(HARNESS_PKGS))

BUILD_TYPE ?= release
ifeq ($(KNOBS),1)
override BUILD_TYPE := $(BUILD_TYPE)+knobs
endif
PAPI    ?= 0

# Sources are found in every subsystem folder (engine/src/kv/, harness/store/, ...).
ENGINE_SRC := $(sort $(shell find engine/src -name '*.c'))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
LIB        := $(BUILD)/libcortex.a
CLI        := $(BUILD)/cortex
HARNESS_ALL := $(sort $(shell find harness -name '*.c'))
HARNESS_HDR := $(shell find harness -name '*.h')
# One -I per harness subsystem folder (harness/run/, harness/store/, ...): a
# harness header is included by its name, whichever folder includes it.
HARNESS_INC := $(patsubst %/,-I%,$(sort $(dir $(HARNESS_ALL) $(HARNESS_HDR))))
HARNESS_SRC := $(filter-out %/bench_main.c %/counters_papi.c,$(HARNESS_ALL))
ifeq ($(PAPI),1)
HARNESS_SRC += $(filter %/counters_papi.c,$(HARNESS_ALL))
CPPFLAGS    += -DCORTEX_PAPI $(shell pkg-config --cflags papi)
LDLIBS      += $(shell pkg-config --libs papi)
endif
HARNESS_OBJ := $(HARNESS_SRC:%.c=$(BUILD)/%.o)
HLIB       := $(BUILD)/libcortexbench.a
BENCH      := $(BUILD)/cortex-bench
VERSION_H  := $(BUILD)/gen/version.h
# Unit tests live in tests/unit/ and its subfolders; each builds to build/tests/NAME.
TEST_SRC   := $(sort $(shell find tests/unit -name 'test_*.c'))
TEST_BIN   := $(addprefix $(BUILD)/tests/,$(basename $(notdir $(TEST_SRC))))
vpath test_%.c $(sort $(dir $(TEST_SRC)))
TOOL_SRC   := $(wildcard tests/tools/*.c)
TOOL_BIN   := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/%)

# Header dependencies: every compile writes TARGET.d (-MMD: the user headers it
# read; -MP: an empty rule per header, so a deleted header is no error), and
# those files are included at the end of this Makefile. So editing a header
# rebuilds exactly the objects and tests that include it. -MT names the target
# for the rules that compile and link in one command (tests, tools).
DEPFLAGS = -MMD -MP -MF $@.d -MT $@

.PHONY: all test sanitize tsan fuzz bench clean python python-lib python-asan FORCE
all: $(LIB) $(CLI) $(BENCH) $(TEST_BIN) $(TOOL_BIN)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# SIMD kernels: only files named *_avx2.c get the AVX2 instruction set, only
# *_avxvnni.c that plus AVX-VNNI, only *_avx512.c the AVX-512 one (F/BW/VL/DQ,
# VNNI), only *_avx512bf16.c that plus AVX-512 BF16; the dispatcher (engine/src/kernels/dispatch.c) hands them out
# only after CPUID says so (engine/src/kernels/cpu.c: no ISA flags, like every file not named so), so one
# binary runs on any x86-64.
ISA_AVX2 = -mavx2 -mfma -mf16c
ISA_AVXVNNI = $(ISA_AVX2) -mavxvnni
ISA_AVX512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
ISA_AVX512BF16 = $(ISA_AVX512) -mavx512bf16
$(BUILD)/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX2) $(DEPFLAGS) -c $< -o $@
$(BUILD)/%_avxvnni.o: %_avxvnni.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVXVNNI) $(DEPFLAGS) -c $< -o $@
$(BUILD)/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX512) $(DEPFLAGS) -c $< -o $@
$(BUILD)/%_avx512bf16.o: %_avx512bf16.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX512BF16) $(DEPFLAGS) -c $< -o $@

$(LIB): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The HTTP server (engine/server/, `cortex serve`): libmicrohttpd and jansson
# are linked into the cortex command (and the server's unit tests) only.
SRV_PKGS   := libmicrohttpd jansson
SRV_CFLAGS := $(shell pkg-config --cflags $(SRV_PKGS))
SRV_LIBS   := $(shell pkg-config --libs $(SRV_PKGS))
SRV_OBJ    := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard engine/server/*.c)))
SLIB       := $(BUILD)/libcortexsrv.a
$(SRV_OBJ): CPPFLAGS += $(SRV_CFLAGS)
$(SLIB): $(SRV_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The cortex command: every engine/cli/*.c.
CLI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard engine/cli/*.c)))
$(CLI_OBJ): CPPFLAGS += -Iengine/server
$(CLI): $(CLI_OBJ) $(SLIB) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS) $(SRV_LIBS)

# Build provenance for cortex-bench: rewritten only when it changes.
GIT_COMMIT = $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_DIRTY  = $(shell test -n "$$(git status --porcelain --untracked-files=no 2>/dev/null)" && echo 1 || echo 0)
CC_VERSION = $(shell $(CC) --version 2>/dev/null | head -1)
$(VERSION_H): FORCE
	@mkdir -p $(dir $@)
	@printf '#define CORTEX_GIT_COMMIT "%s"\n#define CORTEX_GIT_DIRTY %s\n#define CORTEX_BUILD_TYPE "%s"\n#define CORTEX_BUILD_FLAGS "%s"\n#define CORTEX_SRC_DIR "%s"\n' \
	  "$(GIT_COMMIT)" "$(GIT_DIRTY)" "$(BUILD_TYPE)" "$(CC_VERSION) $(CFLAGS)" "$(CURDIR)" >$@.tmp
	@cmp -s $@.tmp $@ && rm -f $@.tmp || mv $@.tmp $@

$(BUILD)/harness/%.o: harness/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) $(WARN) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

# Harness *_avx2.c (cortex-bench hw's kernels): AVX2 flags too (this rule's shorter stem wins over the one above).
$(BUILD)/harness/%_avx2.o: harness/%_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(WARN) $(CFLAGS) $(ISA_AVX2) $(DEPFLAGS) -c $< -o $@

$(BUILD)/harness/%_avx512.o: harness/%_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(WARN) $(CFLAGS) $(ISA_AVX512) $(DEPFLAGS) -c $< -o $@

$(HLIB): $(HARNESS_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Only the files that record the build's provenance include version.h; it is
# named here as well as in their .d files because it must exist (it is made)
# before their first compile.
$(BUILD)/harness/run/run_cmd.o $(BUILD)/harness/gate/gate_cmd.o: $(BUILD)/harness/%.o: harness/%.c $(VERSION_H)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) -I$(BUILD)/gen $(WARN) $(CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BENCH): $(BUILD)/harness/bench_main.o $(HLIB) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lsqlite3 $(HARNESS_LIBS) $(LDLIBS)

$(BUILD)/tests/test_%: test_%.c $(LIB) $(HLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(HARNESS_INC) $(HARNESS_CFLAGS) -Itests/unit $(WARN) $(CFLAGS) $(DEPFLAGS) $(LDFLAGS) $< $(HLIB) $(LIB) -o $@ -lsqlite3 $(HARNESS_LIBS) $(LDLIBS)

# The server's unit tests (test_srv_*) link its library and libraries too.
$(BUILD)/tests/test_srv_%: test_srv_%.c $(SLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src -Iengine/server -Itests/unit $(SRV_CFLAGS) $(WARN) $(CFLAGS) $(DEPFLAGS) $(LDFLAGS) $< $(SLIB) $(LIB) -o $@ $(LDLIBS) $(SRV_LIBS)

$(BUILD)/tests/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(WARN) $(CFLAGS) $(DEPFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

# The Python module (engine/python/, docs/python.md): the engine compiled
# position-independent (its symbols hidden) into build/python/obj, then the
# extension built by setuptools into build/python/lib (PYTHONPATH for tests).
# Its own folder whatever BUILD is: a sanitizer build cannot load into python.
PY_OBJ  = build/python/obj
PY_LIB  = build/python/lib
python-lib:
	@$(MAKE) --no-print-directory BUILD=$(PY_OBJ) KNOBS=0 CFLAGS="$(OPT) -g -fPIC -fvisibility=hidden" $(PY_OBJ)/libcortex.a
python: python-lib
	cd engine/python && CORTEX_PY_NO_MAKE=1 CORTEX_WERROR=1 CORTEX_PY_LIBDIR=$(CURDIR)/$(PY_OBJ) \
	  $(PY) setup.py -q build --build-base $(CURDIR)/build/python/tmp --build-lib $(CURDIR)/$(PY_LIB) >/dev/null

# The module with ASan + UBSan (build/python-asan), its tests run with the
# sanitizer runtime preloaded into /usr/bin/python3 (PYTHONMALLOC=malloc, so
# ASan sees Python's allocations; CPython's own leaks are not ours to report).
PYASAN_FLAGS = -O1 -g -fPIC -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
python-asan:
	@$(MAKE) --no-print-directory BUILD=build/python-asan/obj KNOBS=0 CFLAGS="$(PYASAN_FLAGS)" build/python-asan/obj/libcortex.a
	cd engine/python && CORTEX_PY_NO_MAKE=1 CORTEX_WERROR=1 CORTEX_PY_LIBDIR=$(CURDIR)/build/python-asan/obj \
	  CFLAGS="$(PYASAN_FLAGS)" LDFLAGS="-fsanitize=address,undefined" \
	  $(PY) setup.py -q build --build-base $(CURDIR)/build/python-asan/tmp --build-lib $(CURDIR)/build/python-asan/lib >/dev/null
	PY_LIB=$(CURDIR)/build/python-asan/lib PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0 CORTEX_ASAN=1 \
	  LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
	  $(PY) -m pytest -q -p no:cacheprovider tests/python

# The knob build (injected slowdowns) is part of the tests: the gate must catch them.
# PYTHON_TESTS=0 leaves out the Python module's suites (sanitizer builds).
PYTHON_TESTS ?= 1
test: all $(if $(filter 1,$(PYTHON_TESTS)),python)
	$(MAKE) --no-print-directory KNOBS=1 BUILD=$(BUILD)-knob $(BUILD)-knob/cortex-bench >/dev/null
	BUILD=$(BUILD) KNOB_BENCH=$(BUILD)-knob/cortex-bench PY=$(PY) PYTHON_TESTS=$(PYTHON_TESTS) PY_LIB=$(CURDIR)/$(PY_LIB) tests/run.sh

sanitize:
	$(MAKE) BUILD=build-san CC=clang OPT=-O1 BUILD_TYPE=sanitize PYTHON_TESTS=0 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

# ThreadSanitizer over the tests whose code runs on several threads (the
# scheduler's run thread with submitters, the batch's and pool's workers).
TSAN_TESTS = test_sched test_sched_progress test_spec_sched test_batch test_forward test_placement test_spec test_threadpool
tsan:
	$(MAKE) --no-print-directory BUILD=build-tsan CC=clang OPT=-O1 BUILD_TYPE=tsan \
	  CFLAGS="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" $(TSAN_TESTS:%=build-tsan/tests/%)
	@set -e; for t in $(TSAN_TESTS); do TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/$$t | tail -1; done

# libFuzzer targets. Every source is compiled once into build-fuzz/obj/ with
# the fuzzer's instrumentation (fuzzer-no-link), one rule for all (the header
# names of engine/src, engine/server and harness/ do not collide), the SIMD
# kernel files with their ISA flags; each target links what it needs.
FUZZ_FLAGS = -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_CFLAGS = $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS))
FUZZ_INC = -Iengine/src -Iengine/server $(HARNESS_INC) $(HARNESS_CFLAGS) $(SRV_CFLAGS)
FUZZ_LIBS = -lm -lz -pthread $(shell pkg-config --libs libpcre2-8 jansson)
FUZZ_TARGETS = $(patsubst tests/fuzz/%.c,build-fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
fuzz_obj = $(patsubst %.c,build-fuzz/obj/%.o,$(1))
FUZZ_ENGINE_OBJ = $(call fuzz_obj,$(ENGINE_SRC))
FUZZ_OBJ = $(call fuzz_obj,$(ENGINE_SRC) $(HARNESS_ALL) $(wildcard engine/server/*.c) $(wildcard tests/fuzz/fuzz_*.c))
build-fuzz/obj/%.o: %.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_INC) $(WARN) $(FUZZ_CFLAGS) $(DEPFLAGS) -c $< -o $@
build-fuzz/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_INC) $(WARN) $(FUZZ_CFLAGS) $(ISA_AVX2) $(DEPFLAGS) -c $< -o $@
build-fuzz/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_INC) $(WARN) $(FUZZ_CFLAGS) $(ISA_AVX512) $(DEPFLAGS) -c $< -o $@
build-fuzz/obj/%_avxvnni.o: %_avxvnni.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_INC) $(WARN) $(FUZZ_CFLAGS) $(ISA_AVXVNNI) $(DEPFLAGS) -c $< -o $@
build-fuzz/obj/%_avx512bf16.o: %_avx512bf16.c
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(FUZZ_INC) $(WARN) $(FUZZ_CFLAGS) $(ISA_AVX512BF16) $(DEPFLAGS) -c $< -o $@
# Objects named only by the link rules below would be intermediate files, which
# make deletes after the build: keep them.
.SECONDARY: $(FUZZ_OBJ)

# The engine's targets link the whole engine.
build-fuzz/fuzz_%: build-fuzz/obj/tests/fuzz/fuzz_%.o $(FUZZ_ENGINE_OBJ)
	clang $(FUZZ_FLAGS) $^ -o $@ $(FUZZ_LIBS)

# The workload fuzzer needs the harness's parsers rather than the engine.
build-fuzz/fuzz_jsonl: build-fuzz/obj/tests/fuzz/fuzz_jsonl.o $(call fuzz_obj,harness/util/jsonx.c harness/run/workload.c harness/util/sha256.c harness/run/trace_gen.c harness/util/rng.c harness/util/hx_err.c)
	clang $(FUZZ_FLAGS) $^ -o $@ $(FUZZ_LIBS)

# The server-response fuzzer: SSE framing, OpenAI bodies (jansson), Prometheus text, builds (results.c).
build-fuzz/fuzz_sse: build-fuzz/obj/tests/fuzz/fuzz_sse.o $(call fuzz_obj,harness/run/sse.c harness/run/oai.c harness/run/prom.c harness/run/results.c harness/util/hx_err.c)
	clang $(FUZZ_FLAGS) $^ -o $@ $(FUZZ_LIBS)

# The judge's sample lines (cortex-bench judge).
build-fuzz/fuzz_judge: build-fuzz/obj/tests/fuzz/fuzz_judge.o $(call fuzz_obj,harness/gate/judge.c harness/util/hx_err.c)
	clang $(FUZZ_FLAGS) $^ -o $@ $(FUZZ_LIBS)

# The request-body fuzzer needs the server's parser, the library's chat templates (chat.c, which links the
# engine: cx_chat_init tokenizes), and jansson.
build-fuzz/fuzz_srv_body: build-fuzz/obj/tests/fuzz/fuzz_srv_body.o $(call fuzz_obj,engine/server/srv_parse.c engine/server/srv_error.c) $(FUZZ_ENGINE_OBJ)
	clang $(FUZZ_FLAGS) $^ -o $@ $(FUZZ_LIBS)

fuzz: $(FUZZ_TARGETS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

# The main job: synthesize the default model once (stories15m's shape with a
# 2048-token context, so every standard prompt fits), then run the standard
# prompt set and a short Zipf trace through cortex-bench into reports/cortex.db.
BENCH_MODEL ?= models/stories15m-2k-q8_0.gguf
BENCH_TRACE ?= prompts/traces/zipf-smoke.jsonl
BENCH_ARGS  ?=
bench: $(CLI) $(BENCH)
	@mkdir -p models
	@test -f $(BENCH_MODEL) || $(CLI) synth --shape stories15m --type q8_0 -c 2048 -o $(BENCH_MODEL)
	$(BENCH) run --model $(BENCH_MODEL) --workload standard --reps 3 --warmup 1 $(BENCH_ARGS)
	$(BENCH) run --model $(BENCH_MODEL) --workload trace:$(BENCH_TRACE) --reps 2 --warmup 0 $(BENCH_ARGS)

clean:
	rm -rf build build-san build-tsan build-fuzz build-knob

# Every target that gets a dependency file (DEPFLAGS), and those files. A
# target built before it had one (a build tree from before they existed) is
# rebuilt once, so no header change is missed.
DEP_TARGETS := $(ENGINE_OBJ) $(SRV_OBJ) $(CLI_OBJ) $(HARNESS_ALL:%.c=$(BUILD)/%.o) $(TEST_BIN) $(TOOL_BIN) $(FUZZ_OBJ)
$(filter-out $(patsubst %.d,%,$(wildcard $(DEP_TARGETS:=.d))),$(wildcard $(DEP_TARGETS))): FORCE
-include $(wildcard $(DEP_TARGETS:=.d))
