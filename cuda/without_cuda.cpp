// The CUDA backend's other sibling: in a build without CUDA (plain `make`), every entry point of
// cuda/backend.h is defined here as a stub that throws, so the CPU code that calls them links
// unchanged. `make CUDA=1` links cuda/*.cu in this file's place. The list is backend.h's own:
// MG_CUDA_API is defined as a stub's definition before the header expands it.
#include <stdexcept>
#include <string>

namespace mg {

[[noreturn]] static void throw_built_without_cuda() {
  throw std::runtime_error(
      "this mosgrad was built without CUDA: rebuild with `make CUDA=1` to use --device cuda");
}

}  // namespace mg

#pragma GCC diagnostic ignored "-Wunused-parameter"
#define MG_CUDA_API(...)        \
  __VA_ARGS__ {                 \
    throw_built_without_cuda(); \
  }
#include "cuda/backend.h"

namespace mg {

bool cuda_is_available(std::string* why) {
  if (why) *why = "this mosgrad was built without CUDA (rebuild with `make CUDA=1`)";
  return false;
}

bool cuda_is_built_in() {
  return false;
}

}  // namespace mg
