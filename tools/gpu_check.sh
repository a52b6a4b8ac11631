#!/usr/bin/env bash
# The GPU checks of the CUDA backend, in one go on a machine with an NVIDIA GPU (see docs/gpu.md):
# build with CUDA=1, run the whole test suite (the GPU tests included), compute-sanitizer's memcheck
# over the GPU tests and racecheck and synccheck over the kernel tests (the three at once, beside
# the suite), and a short training run of small-mos on the GPU.
#   MOSGRAD_DATA   Penn Treebank folder (default data/ptb)
#   GTEST_SRC      googletest's source (googletest/{include,src}) when the machine has no libgtest
#   BIN            a folder holding run_tests and mosgrad built elsewhere with `make CUDA=1` (the
#                  tests find their fixtures at the source folder they were built in): no build here
#   STEPS          training steps of the run (default 300; 0 skips it)
#   GTEST_FLAGS    passed to the suite (e.g. --gtest_filter='Cuda*'); SANITIZER_FILTER picks its tests
set -uo pipefail
cd "$(dirname "$0")/.."
export MOSGRAD_DATA="${MOSGRAD_DATA:-data/ptb}"
JOBS=$(nproc)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

if [ -n "${GTEST_SRC:-}" ]; then  # build googletest once into build/gtest and point the compiler at it
  mkdir -p build/gtest
  if [ ! -f build/gtest/libgtest.a ]; then
    g++ -std=c++17 -O2 -isystem "$GTEST_SRC/include" -I"$GTEST_SRC" -c "$GTEST_SRC/src/gtest-all.cc" -o build/gtest/gtest-all.o &
    g++ -std=c++17 -O2 -isystem "$GTEST_SRC/include" -I"$GTEST_SRC" -c "$GTEST_SRC/src/gtest_main.cc" -o build/gtest/gtest_main.o
    wait
    ar rcs build/gtest/libgtest.a build/gtest/gtest-all.o && ar rcs build/gtest/libgtest_main.a build/gtest/gtest_main.o
  fi
  export CPATH="$GTEST_SRC/include${CPATH:+:$CPATH}" LIBRARY_PATH="$PWD/build/gtest${LIBRARY_PATH:+:$LIBRARY_PATH}"
fi

status=0
mkdir -p build
B="${BIN:-build/release-cuda}"
if [ -z "${BIN:-}" ]; then
  rm -f build/release-cuda/run_tests build/release-cuda/mosgrad  # never run a stale binary
  if ! make CUDA=1 -j"$JOBS" build/release-cuda/run_tests build/release-cuda/mosgrad >build/gpu_check_build.log 2>&1; then
    grep -E "error" build/gpu_check_build.log | head -20
    echo "gpu_check: the build failed (build/gpu_check_build.log)"
    exit 1
  fi
fi
pids=()
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer, in the background: memcheck over the GPU tests (not the out-of-memory test:"
  echo "   its failed cudaMalloc is the point), racecheck and synccheck over the kernel tests"
  CS="compute-sanitizer --error-exitcode 3"
  $CS --tool memcheck --leak-check full "$B/run_tests" --gtest_brief=1 \
    --gtest_filter="${SANITIZER_FILTER:-Cuda*}:-CudaErrors.RunningOutOfGpuMemory*" >build/gpu_check_memcheck.log 2>&1 &
  pids+=($!)
  for tool in racecheck synccheck; do
    $CS --tool $tool "$B/run_tests" --gtest_brief=1 --gtest_filter='CudaOps*' >build/gpu_check_$tool.log 2>&1 &
    pids+=($!)
  done
fi
echo "== the whole suite, CUDA build"
"$B/run_tests" ${GTEST_FLAGS:-} || status=1
for i in "${!pids[@]}"; do
  log=(memcheck racecheck synccheck)
  if wait "${pids[$i]}"; then echo "${log[$i]}: clean"; else
    echo "${log[$i]}: FAILED (build/gpu_check_${log[$i]}.log)"; tail -5 "build/gpu_check_${log[$i]}.log"; status=1
  fi
done
if [ "${STEPS:-300}" != 0 ] && [ -f "$MOSGRAD_DATA/ptb.train.txt" ]; then
  echo "== small-mos on the GPU, ${STEPS:-300} steps"
  "$B/mosgrad" train --preset small-mos --device cuda --data "$MOSGRAD_DATA" --save build/gpu_run \
    --max-steps "${STEPS:-300}" --log-interval 100 --test-at-end false || status=1
fi
exit $status
