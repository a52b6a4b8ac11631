// Perplexity with the AWD-LSTM convention, so numbers compare with the papers: the text is
// batchified into B columns, the hidden state is carried across segments, and every position of a
// column after its first is a target exactly once (PTB valid at B=10: 73,750 targets).
#pragma once

#include "lm/batching.h"
#include "nn/rnn_model.h"

namespace mg {

struct EvalResult {
  double loss = 0;      // mean NLL per target (nats)
  int64_t targets = 0;  // tokens scored
  double perplexity() const;
};

// Evaluates in eval mode without recording a graph; restores the model's previous mode.
// data: batchify(ids, B) with the evaluation batch size; segments of length bptt.
EvalResult evaluate(RNNModel& model, const Batched& data, int64_t bptt);

}  // namespace mg
