# Cortex: top-level build.
#   make            library, cortex CLI, test tools          (build/)
#   make test       unit tests, reference checks, CLI checks
#   make sanitize   the same tests under ASan + UBSan         (build-san/)
#   make tsan       the threaded tests under ThreadSanitizer  (build-tsan/)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each      (build-fuzz/)
#   make bench      the default benchmark (see README)
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
# cortex-bench speaks HTTP to other servers (run --endpoint): libcurl, jansson.
HARNESS_PKGS  = libcurl jansson
HARNESS_CFLAGS := $(filter-out -I/usr/include%,$(shell pkg-config --cflags $(HARNESS_PKGS)))
HARNESS_LIBS  := $(shell pkg-config --libs $(HARNESS_PKGS))

BUILD_TYPE ?= release
ifeq ($(KNOBS),1)
override BUILD_TYPE := $(BUILD_TYPE)+knobs
endif
PAPI    ?= 0

# Sources are found in every subsystem folder (engine/src/kv/, harness/store/, ...).
ENGINE_SRC := $(sort $(shell find engine/src -name '*.c'))
ENGINE_HDR := $(shell find engine/include engine/src -name '*.h')
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

.PHONY: all test sanitize tsan fuzz bench clean FORCE
all: $(LIB) $(CLI) $(BENCH) $(TEST_BIN) $(TOOL_BIN)

$(BUILD)/%.o: %.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

# SIMD kernels: only files named *_avx2.c get the AVX2 instruction set, only
# *_avxvnni.c that plus AVX-VNNI, only *_avx512.c the AVX-512 one (F/BW/VL/DQ,
# VNNI), only *_avx512bf16.c that plus AVX-512 BF16; the dispatcher (engine/src/kernels/dispatch.c) calls them only
# after CPUID says so, so one binary runs on any x86-64.
ISA_AVX2 = -mavx2 -mfma -mf16c
ISA_AVXVNNI = $(ISA_AVX2) -mavxvnni
ISA_AVX512 = -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mfma -mf16c
ISA_AVX512BF16 = $(ISA_AVX512) -mavx512bf16
# The ISA-specific files, which the fuzz build compiles apart with their flags.
ISA_SRC_PATTERNS = %_avx2.c %_avxvnni.c %_avx512.c %_avx512bf16.c
$(BUILD)/%_avx2.o: %_avx2.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX2) -c $< -o $@
$(BUILD)/%_avxvnni.o: %_avxvnni.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVXVNNI) -c $< -o $@
$(BUILD)/%_avx512.o: %_avx512.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX512) -c $< -o $@
$(BUILD)/%_avx512bf16.o: %_avx512bf16.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) $(ISA_AVX512BF16) -c $< -o $@

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
$(SRV_OBJ): $(wildcard engine/server/*.h)
$(SLIB): $(SRV_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The cortex command: every engine/cli/*.c, rebuilt when its headers change.
CLI_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(sort $(wildcard engine/cli/*.c)))
$(CLI_OBJ): CPPFLAGS += -Iengine/server
$(CLI_OBJ): $(wildcard engine/cli/*.h engine/server/*.h)
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

$(BUILD)/harness/%.o: harness/%.c $(HARNESS_HDR) $(wildcard engine/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

# Harness *_avx2.c (cortex-bench hw's kernels): AVX2 flags too (this rule's shorter stem wins over the one above).
$(BUILD)/harness/%_avx2.o: harness/%_avx2.c $(HARNESS_HDR) $(wildcard engine/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(WARN) $(CFLAGS) $(ISA_AVX2) -c $< -o $@

$(BUILD)/harness/%_avx512.o: harness/%_avx512.c $(HARNESS_HDR) $(wildcard engine/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(WARN) $(CFLAGS) $(ISA_AVX512) -c $< -o $@

$(HLIB): $(HARNESS_OBJ)
	@rm -f $@
	ar rcs $@ $^

# Only the files that record the build's provenance depend on version.h.
$(BUILD)/harness/run/run_cmd.o $(BUILD)/harness/gate/gate_cmd.o: $(BUILD)/harness/%.o: harness/%.c $(VERSION_H) $(HARNESS_HDR) $(wildcard engine/include/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) -I$(BUILD)/gen $(WARN) $(CFLAGS) -c $< -o $@

$(BENCH): $(BUILD)/harness/bench_main.o $(HLIB) $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ -lsqlite3 $(HARNESS_LIBS) $(LDLIBS)

$(BUILD)/tests/test_%: test_%.c $(wildcard tests/unit/*.h) $(LIB) $(HLIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(HARNESS_INC) $(HARNESS_CFLAGS) -Itests/unit $(WARN) $(CFLAGS) $(LDFLAGS) $< $(HLIB) $(LIB) -o $@ -lsqlite3 $(HARNESS_LIBS) $(LDLIBS)

# The server's unit tests (test_srv_*) link its library and libraries too.
$(BUILD)/tests/test_srv_%: test_srv_%.c $(wildcard tests/unit/*.h) $(SLIB) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src -Iengine/server -Itests/unit $(SRV_CFLAGS) $(WARN) $(CFLAGS) $(LDFLAGS) $< $(SLIB) $(LIB) -o $@ $(LDLIBS) $(SRV_LIBS)

$(BUILD)/tests/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(WARN) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

# The knob build (injected slowdowns) is part of the tests: the gate must catch them.
test: all
	$(MAKE) --no-print-directory KNOBS=1 BUILD=$(BUILD)-knob $(BUILD)-knob/cortex-bench >/dev/null
	BUILD=$(BUILD) KNOB_BENCH=$(BUILD)-knob/cortex-bench PY=$(PY) tests/run.sh

sanitize:
	$(MAKE) BUILD=build-san CC=clang OPT=-O1 BUILD_TYPE=sanitize \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

# ThreadSanitizer over the tests whose code runs on several threads (the
# scheduler's run thread with submitters, the batch's and pool's workers).
TSAN_TESTS = test_sched test_batch test_forward
tsan:
	$(MAKE) --no-print-directory BUILD=build-tsan CC=clang OPT=-O1 BUILD_TYPE=tsan \
	  CFLAGS="-O1 -g -fsanitize=thread" LDFLAGS="-fsanitize=thread" $(TSAN_TESTS:%=build-tsan/tests/%)
	@set -e; for t in $(TSAN_TESTS); do TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" build-tsan/tests/$$t | tail -1; done

FUZZ_FLAGS = -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS = $(patsubst tests/fuzz/%.c,build-fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
# The SIMD kernel files need their ISA flags, so they are compiled apart.
FUZZ_AVX2_OBJ = $(patsubst %.c,build-fuzz/obj/%.o,$(filter $(ISA_SRC_PATTERNS),$(ENGINE_SRC)))
build-fuzz/obj/%_avx2.o: %_avx2.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(WARN) $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS)) $(ISA_AVX2) -c $< -o $@
build-fuzz/obj/%_avx512.o: %_avx512.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(WARN) $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS)) $(ISA_AVX512) -c $< -o $@
build-fuzz/obj/%_avxvnni.o: %_avxvnni.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(WARN) $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS)) $(ISA_AVXVNNI) -c $< -o $@
build-fuzz/obj/%_avx512bf16.o: %_avx512bf16.c $(ENGINE_HDR)
	@mkdir -p $(dir $@)
	clang $(CPPFLAGS) $(WARN) $(subst fuzzer,fuzzer-no-link,$(FUZZ_FLAGS)) $(ISA_AVX512BF16) -c $< -o $@
build-fuzz/%: tests/fuzz/%.c $(ENGINE_SRC) $(FUZZ_AVX2_OBJ) $(ENGINE_HDR)
	@mkdir -p build-fuzz
	clang $(CPPFLAGS) -Iengine/src $(WARN) $(FUZZ_FLAGS) $< $(filter-out $(ISA_SRC_PATTERNS),$(ENGINE_SRC)) $(FUZZ_AVX2_OBJ) -o $@ -lm -lz -pthread $(shell pkg-config --libs libpcre2-8 jansson)

# The workload fuzzer needs the harness's parsers (and jansson) rather than the engine.
build-fuzz/fuzz_jsonl: tests/fuzz/fuzz_jsonl.c $(HARNESS_ALL) $(HARNESS_HDR)
	@mkdir -p build-fuzz
	clang $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) $(WARN) $(FUZZ_FLAGS) $< harness/util/jsonx.c harness/run/workload.c harness/util/sha256.c harness/run/trace_gen.c harness/util/rng.c -o $@ -lm $(shell pkg-config --libs jansson)

# The server-response fuzzer: SSE framing, OpenAI bodies (jansson), Prometheus text.
build-fuzz/fuzz_sse: tests/fuzz/fuzz_sse.c harness/run/sse.c harness/run/oai.c harness/run/prom.c $(HARNESS_HDR)
	@mkdir -p build-fuzz
	clang $(CPPFLAGS) $(HARNESS_INC) $(HARNESS_CFLAGS) $(WARN) $(FUZZ_FLAGS) $< harness/run/sse.c harness/run/oai.c harness/run/prom.c -o $@ $(shell pkg-config --libs jansson)

# The request-body fuzzer needs the server's parser and chat templates (harmony's in the library), and jansson.
build-fuzz/fuzz_srv_body: tests/fuzz/fuzz_srv_body.c engine/server/srv_parse.c engine/server/srv_chat.c engine/src/harmony.c engine/src/util.c engine/server/srv.h
	@mkdir -p build-fuzz
	clang $(CPPFLAGS) -Iengine/server -Iengine/src $(SRV_CFLAGS) $(WARN) $(FUZZ_FLAGS) $< engine/server/srv_parse.c engine/server/srv_chat.c engine/src/harmony.c engine/src/util.c -o $@ $(shell pkg-config --libs jansson)

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
