// The two rules of AWD-LSTM's recipe (Merity et al. 2017) that are plain functions: the loss a
// step minimises (AR and TAR on top of the NLL) and when NT-ASGD starts averaging. The trainer
// (lm/column_groups.cpp, lm/train_run.cpp) and bench/bench_train.cpp call them; lab 7 of the
// course writes them.
#pragma once

#include <cstdint>
#include <vector>

#include "nn/rnn_model.h"

namespace mg {

// The training loss of AWD-LSTM: the mean NLL plus AR, alpha * mean(dropped last-layer output^2),
// and TAR, beta * mean((h_t - h_{t-1})^2) over the last layer's raw output [T,B,H] (Merity et al.
// 2017, §4.6). Shared by the trainer and bench/bench_train.cpp.
Tensor regularised_loss(const ModelOutput& out, float alpha, float beta);

// NT-ASGD's test (AWD-LSTM §3): val_loss is worse than the best of the validation losses before it
// (history, oldest first) but the last `nonmono`; false while there are at most nonmono.
bool non_monotone(const std::vector<double>& history, double val_loss, int64_t nonmono);

}  // namespace mg
