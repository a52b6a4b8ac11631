#!/usr/bin/env bash
# The GPU checks of the CUDA backend, in one go on a machine with an NVIDIA GPU (see README, "CUDA"):
# build with CUDA=1, run the whole test suite (the GPU tests included), compute-sanitizer's memcheck
# over the GPU tests, and a short training run of small-mos on the GPU.
#   MOSGRAD_DATA   Penn Treebank folder (default data/ptb)
#   GTEST_SRC      googletest's source (googletest/{include,src}) when the machine has no libgtest
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
rm -f build/release-cuda/run_tests build/release-cuda/mosgrad  # never run a stale binary
if ! make CUDA=1 -j"$JOBS" build/release-cuda/run_tests build/release-cuda/mosgrad >build/gpu_check_build.log 2>&1; then
  grep -E "error" build/gpu_check_build.log | head -20
  echo "gpu_check: the build failed (build/gpu_check_build.log)"
  exit 1
fi
echo "== the whole suite, CUDA build"
./build/release-cuda/run_tests ${GTEST_FLAGS:-} || status=1
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck over the GPU tests (not the out-of-memory test: its failed cudaMalloc is the point)"
  compute-sanitizer --tool memcheck --leak-check full --error-exitcode 3 \
    ./build/release-cuda/run_tests --gtest_filter="${SANITIZER_FILTER:-Cuda*}:-CudaErrors.RunningOutOfGpuMemory*" --gtest_brief=1 || status=1
fi
if [ "${STEPS:-300}" != 0 ] && [ -f "$MOSGRAD_DATA/ptb.train.txt" ]; then
  echo "== small-mos on the GPU, ${STEPS:-300} steps"
  ./build/release-cuda/mosgrad train --preset small-mos --device cuda --data "$MOSGRAD_DATA" --save build/gpu_run \
    --max-steps "${STEPS:-300}" --log-interval 100 --test-at-end false || status=1
fi
exit $status
