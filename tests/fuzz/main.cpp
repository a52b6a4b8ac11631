// The libFuzzer entry of one target, chosen at compile time: make fuzz builds this file once per
// target with -DMGFUZZ_TARGET=<name> (tests/fuzz/targets.h).
#include "tests/fuzz/targets.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mgfuzz::MGFUZZ_TARGET(data, size);
  return 0;
}
