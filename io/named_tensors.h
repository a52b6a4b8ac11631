// Named tensors in a chosen order: what the checkpoint and safetensors formats store.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace mg {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

}  // namespace mg
