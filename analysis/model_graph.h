// `mosgrad graph`: the autograd graph of one training forward pass of a freshly built model (the
// usual model flags), as Graphviz DOT: op names and output shapes in boxes, parameters by name.
#pragma once

#include <string>

#include "lm/train_config.h"

namespace mg {

// One forward pass of a [bptt, batch_size] batch (token ids t·B + b mod V, each row's targets the
// next row's ids) in training mode, so the dropouts appear; the loss's graph as DOT. With values
// (`--values`, as micrograd draws its graphs), a backward pass too, and every box and parameter
// shows its value and the gradient of the loss with respect to it: the number itself when it is
// one, else mean and standard deviation (μ, σ) over its entries.
std::string model_graph_dot(const TrainConfig& config, bool values = false);

}  // namespace mg
