// `mosgrad graph`: the autograd graph of one training forward pass of a freshly built model (the
// usual model flags), as Graphviz DOT: op names and output shapes in boxes, parameters by name.
#pragma once

#include <string>

#include "lm/train_config.h"

namespace mg {

// One forward pass of a [bptt, batch_size] batch (token ids t·B + b mod V, each row's targets the
// next row's ids) in training mode, so the dropouts appear; the loss's graph as DOT.
std::string model_graph_dot(const TrainConfig& config);

}  // namespace mg
