// --grad-groups G: one optimizer step's batch of B columns run as G groups of B/G columns, each
// group's forward and backward on its own, the gradients summed group by group in a fixed order.
// That is gradient accumulation (a group's activations are 1/G of the batch's), and it is what
// data-parallel training divides among processes: under `mpirun -np N` each process runs G/N whole
// groups, and the chain of mpi/processes.h adds the groups' gradients in the order one process
// adds them, so the weights are the same bits for every N dividing G (docs/distributed.md).
//
// Dimension legend: T time, B batch columns, G groups, H hidden, P all parameters' floats.
//
// Why the whole batch's numbers are kept: the loss is the mean over all T*B targets, so group g's
// loss is scaled by 1/G (equal groups); locked dropout draws each group's columns of the batch's
// mask (nn/dropout.h, ColumnGroupScope); embedding dropout and weight drop draw the same whole
// masks for every group (the dropout stream is rewound to the step's start before each group); the
// hidden state of column b is carried by the group holding b. A run with G = 1 is the plain step,
// bit for bit; G > 1 gives other bits than G = 1 (other sums), the same for any N.
#pragma once

#include <cstdint>
#include <vector>

#include "lm/batching.h"
#include "nn/gate_stats.h"
#include "nn/rnn_model.h"

namespace mg {

// Which of G groups this process runs: [first, first + count). All G when there is one process;
// G/N of them on each of N processes (N must divide G: checked before a run starts).
struct OwnedGroups {
  int64_t first = 0, count = 0;
};
OwnedGroups owned_groups(int64_t G);

// Columns [first, first + count) of a batch: input and target [T, count].
Batch batch_columns(const Batch& batch /*[T,B]*/, int64_t first, int64_t count);
// Rows [first, first + count) of every layer's (h, c) [B,H_l], detached copies.
Hidden hidden_columns(const Hidden& hidden, int64_t first, int64_t count);
// The parts of G groups ([B/G,H_l] each, in group order) joined into [B,H_l].
Hidden join_columns(const std::vector<Hidden>& parts);

// What one training step's forward and backward leave beside the gradient.
struct GroupedStep {
  double nll = 0;     // the batch's mean NLL (the groups' means, averaged in group order)
  Hidden hidden;      // every column's final state [B,H_l], to carry into the next segment
  ModelOutput first;  // the first group's outputs (G > 1: only when gate_stats; --log-stats
                      // reads its activations)
  std::vector<GateSaturation> gates;  // the first group's LSTM gates, when asked for
};

// Forward and backward of `batch` in G column groups, leaving in every parameter's .grad the
// gradient of the whole batch's regularised loss (loss + alpha AR + beta TAR, lm/train.h), summed
// over the groups in order; under MPI the same sum on every process. `hidden` is the state carried
// in [B,H_l] (detached). G = 1 with one process is the plain forward and backward.
GroupedStep grouped_forward_backward(RNNModel& model, const Batch& batch, const Hidden& hidden,
                                     int64_t G, float alpha, float beta, bool gate_stats);

// The groups validation runs in: G when it divides the validation batch (then shared among the
// processes as training's are), else 1 (the whole batch, computed by every process: the same bits
// for every N, without the parallel speed). Depends on G and the batch alone, never on N.
int64_t validation_groups(int64_t G, int64_t eval_batch_size);

// The summed NLL over `data`'s columns split into G groups, each evaluated on its own (all its
// segments, its hidden state carried), the groups' sums added in order; under MPI the groups are
// shared among the processes when N divides G, and every process gets the same total. G = 1 is
// lm/evaluate's plain pass. Returns {summed NLL, targets}.
std::pair<double, int64_t> grouped_eval_sums(RNNModel& model, const Batched& data /*[rows,B]*/,
                                             int64_t bptt, int64_t G);

}  // namespace mg
