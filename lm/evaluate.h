// Perplexity with the AWD-LSTM convention, so numbers compare with the papers: the text is
// batchified into B columns, the hidden state is carried across segments, and every position of a
// column after its first is a target exactly once (PTB valid at B=10: 73,750 targets).
#pragma once

#include <string>

#include "lm/batching.h"
#include "nn/rnn_model.h"

namespace mg {

struct EvalResult {
  double loss = 0;      // mean NLL per target (nats)
  int64_t targets = 0;  // tokens scored
  double perplexity() const;
};

// Evaluates in eval mode without recording a graph; restores the model's previous mode.
// data: batchify(ids, B) with the evaluation batch size; segments of length bptt. groups > 1
// (training's --grad-groups; B divisible by it): each group of B/groups columns is evaluated on
// its own and their sums added in order, shared among the processes under mpirun (the same total,
// bit for bit, for every number of processes dividing groups).
EvalResult evaluate(RNNModel& model, const Batched& data /*[rows,B]*/, int64_t bptt,
                    int64_t groups = 1);

// ln(DBL_MAX), 709.78 nats: a mean loss above it has no finite perplexity exp(loss).
double max_finite_loss();

// A result a command prints must be a number: throws std::runtime_error unless `loss` and its
// perplexity exp(loss) are both finite (a loss above max_finite_loss() prints as "ppl inf"), so a
// script never records NaN or Inf as a success. The message is "<what> is not finite (loss ...,
// ppl ...): <cause>"; `cause` names what most likely made it (a flag and its value, or the model
// file), since the number alone says nothing about why.
void require_finite_perplexity(double loss, const std::string& what, const std::string& cause);

}  // namespace mg
