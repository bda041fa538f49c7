# Cortex: top-level build.
#   make            library, cortex CLI, test tools          (build/)
#   make test       unit tests, reference checks, CLI checks
#   make sanitize   the same tests under ASan + UBSan         (build-san/)
#   make fuzz       libFuzzer targets, FUZZ_SECONDS each      (build-fuzz/)
#   make bench      the default benchmark (see README)
# CC=clang works everywhere; kernels never use -march=native.

CC      ?= cc
BUILD   ?= build
OPT     ?= -O2
CFLAGS  ?= $(OPT) -g
WARN     = -std=c11 -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wno-unused-parameter
CPPFLAGS = -D_GNU_SOURCE -Iengine/include
LDLIBS   = -lm -pthread
PY      ?= /usr/bin/python3
FUZZ_SECONDS ?= 60

ENGINE_SRC := $(wildcard engine/src/*.c engine/src/kernels/*.c)
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(BUILD)/%.o)
LIB        := $(BUILD)/libcortex.a
CLI        := $(BUILD)/cortex
TEST_SRC   := $(wildcard tests/unit/test_*.c)
TEST_BIN   := $(TEST_SRC:tests/unit/%.c=$(BUILD)/tests/%)
TOOL_SRC   := $(wildcard tests/tools/*.c)
TOOL_BIN   := $(TOOL_SRC:tests/tools/%.c=$(BUILD)/tests/%)

.PHONY: all test sanitize fuzz bench clean
all: $(LIB) $(CLI) $(TEST_BIN) $(TOOL_BIN)

$(BUILD)/%.o: %.c $(wildcard engine/include/*.h engine/src/*.h engine/src/kernels/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(WARN) $(CFLAGS) -c $< -o $@

$(LIB): $(ENGINE_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(CLI): $(BUILD)/engine/cli/cortex.o $(LIB)
	$(CC) $(CFLAGS) $(LDFLAGS) $^ -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/unit/%.c tests/unit/testing.h $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(WARN) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

$(BUILD)/tests/%: tests/tools/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Iengine/src $(WARN) $(CFLAGS) $(LDFLAGS) $< $(LIB) -o $@ $(LDLIBS)

test: all
	BUILD=$(BUILD) PY=$(PY) tests/run.sh

sanitize:
	$(MAKE) BUILD=build-san CC=clang OPT=-O1 \
	  CFLAGS="-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
	  LDFLAGS="-fsanitize=address,undefined" test

FUZZ_FLAGS = -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_TARGETS = $(patsubst tests/fuzz/%.c,build-fuzz/%,$(wildcard tests/fuzz/fuzz_*.c))
build-fuzz/%: tests/fuzz/%.c $(ENGINE_SRC) $(wildcard engine/src/*.h engine/include/*.h)
	@mkdir -p build-fuzz
	clang $(CPPFLAGS) -Iengine/src $(WARN) $(FUZZ_FLAGS) $< $(ENGINE_SRC) -o $@ -lm -pthread

fuzz: $(FUZZ_TARGETS)
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run.sh $(FUZZ_TARGETS)

bench: all
	BUILD=$(BUILD) ci/bench.sh

clean:
	rm -rf build build-san build-fuzz
