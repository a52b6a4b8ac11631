# mosgrad build. Plain GNU make, no configure step.
#
#   make            optimized library + the `mosgrad` command (build/release/)
#   make test       build and run the GoogleTest suite (optimized, OpenMP)
#   make debug      -O0 -g, no OpenMP: for stepping through a backward pass in gdb (build/debug/)
#   make asan       Address + UndefinedBehavior sanitizer build of the tests, and run them
#   make bench      benchmarks (bench/), side by side with PyTorch when it is installed
#   make clean
#
# Variables: ARCH (default -march=native), CXX, MODE (release|debug|asan), CUDA=1 (cuda/ backend).

CXX      ?= g++
MODE     ?= release
ARCH     ?= -march=native
BUILD    := build/$(MODE)
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
WARN     := -Wall -Wextra -Wno-unused-parameter
CXXFLAGS_COMMON := -std=c++17 $(WARN) -I. -MMD -MP -DMOSGRAD_SOURCE_DIR=\"$(CURDIR)\"

ifeq ($(MODE),release)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O3 $(ARCH) -fopenmp -DNDEBUG
  LDFLAGS  := -fopenmp
else ifeq ($(MODE),debug)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O0 -g3 -fno-omit-frame-pointer
  LDFLAGS  :=
else ifeq ($(MODE),asan)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fopenmp
  LDFLAGS  := -fsanitize=address,undefined -fopenmp
else
  $(error MODE must be release, debug or asan)
endif

LIB_SRCS  := $(wildcard tensor/*.cpp autograd/*.cpp nn/*.cpp lm/*.cpp)
TEST_SRCS := $(wildcard tests/*.cpp)
TOOL_SRCS := $(wildcard tools/*.cpp)
BENCH_SRCS:= $(wildcard bench/*.cpp)
BENCH_BINS:= $(BENCH_SRCS:bench/%.cpp=$(BUILD)/bench/%)

LIB_OBJS  := $(LIB_SRCS:%.cpp=$(BUILD)/%.o)
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/%.o)
LIB       := $(BUILD)/libmosgrad.a
TESTS     := $(BUILD)/run_tests
MOSGRAD   := $(BUILD)/mosgrad

ifeq ($(CUDA),1)
  NVCC      ?= /usr/local/cuda/bin/nvcc
  CUDA_SRCS := $(wildcard cuda/*.cu)
  LIB_OBJS  += $(CUDA_SRCS:%.cu=$(BUILD)/%.o)
  CXXFLAGS  += -DMOSGRAD_CUDA
  LDFLAGS   += -L/usr/local/cuda/lib64 -lcudart -lcublas
endif

.PHONY: all test debug asan bench clean data run
all: $(LIB) $(if $(TOOL_SRCS),$(MOSGRAD))

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 -I. -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(TESTS): $(TEST_OBJS) $(LIB)
	$(CXX) $(TEST_OBJS) $(LIB) -o $@ $(LDFLAGS) -lgtest -lgtest_main -pthread

$(MOSGRAD): $(TOOL_SRCS:%.cpp=$(BUILD)/%.o) $(LIB)
	$(CXX) $^ -o $@ $(LDFLAGS)

# Each bench/NAME.cpp is its own program build/release/bench/NAME; bench/run.sh runs them all
# (and the PyTorch peers when torch is importable) and prints one table.
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(LIB)
	$(CXX) $^ -o $@ $(LDFLAGS)

bench:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(BENCH_SRCS:bench/%.cpp=build/release/bench/%) $(if $(TOOL_SRCS),build/release/mosgrad)
	bash bench/run.sh

# The suite; GTEST_FLAGS passes options through, e.g. make test GTEST_FLAGS=--gtest_filter='Ops*'
test:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/run_tests
	./build/release/run_tests $(GTEST_FLAGS)

debug:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=debug build/debug/libmosgrad.a build/debug/run_tests $(if $(TOOL_SRCS),build/debug/mosgrad)

asan:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=asan build/asan/run_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/asan/run_tests $(GTEST_FLAGS)

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(BENCH_SRCS:%.cpp=$(BUILD)/%.d) $(TOOL_SRCS:%.cpp=$(BUILD)/%.d)
