// Turning a token stream into training batches, the AWD-LSTM way (Merity et al. 2017, main.py).
//
// Dimension legend: B batch (columns), T time (rows of one segment), N = T*B, V vocabulary.
//
// The stream is cut into B equally long columns; column b holds one contiguous stretch of the text,
// and consecutive segments of rows continue each column where the previous segment stopped. That is
// what lets the hidden state be carried from one segment to the next (truncated BPTT):
//
//   ids = 0 1 2 3 4 5 6 7 8 9 10,  B = 2  ->  rows = 5 (token 10 is trimmed)
//        col0 col1
//   t=0    0    5
//   t=1    1    6
//   t=2    2    7
//   t=3    3    8
//   t=4    4    9
//
// A training epoch, as the trainer is expected to write it:
//   Batched data = batchify(corpus.train, B);
//   for (int64_t i = 0; i < data.rows - 1; ) {
//     const int64_t T = bptt_length(bptt, gen);       // variable length, see below
//     const Batch b = get_batch(data, i, T);          // b.seq_len <= T near the end
//     lr_step = lr * T / bptt;                        // T as drawn, before get_batch clips it
//                                                     // (AWD-LSTM's main.py); the caller's job
//     ... forward b.input [T, B], loss against b.target [N] ...
//     i += b.seq_len;
//   }
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tensor/philox.h"

namespace mg {

// A token stream laid out as [rows, B], row-major: element (t, b) is data[t * B + b].
struct Batched {
  std::vector<int64_t> data;  // rows * B token ids
  int64_t rows = 0;           // number of time steps (AWD-LSTM's nbatch)
  int64_t batch = 0;          // B, the number of columns
  // Element (t, b), bounds-checked; throws std::out_of_range.
  int64_t at(int64_t t, int64_t b) const;
};

// ids [n] -> [n / B, B]: drops the last n % B tokens, then column b = ids[b*rows, (b+1)*rows).
// Throws std::invalid_argument when B < 1 or when there are fewer than B tokens (no full row).
Batched batchify(const std::vector<int64_t>& ids, int64_t B);

// One segment of rows of a Batched stream.
struct Batch {
  std::vector<int64_t> input;  // [T, B] row-major: input[t*B + b] = data(i + t, b)
  std::vector<int64_t>
      target;           // [T, B] = [N] flat: target[t*B + b] = data(i + t + 1, b), the next token
  int64_t seq_len = 0;  // T, after clipping
  int64_t batch = 0;    // B
};

// The segment starting at row i: T = min(seq_len, rows - 1 - i) rows (the last row only serves as
// a target). Throws std::out_of_range when i is not in [0, rows - 1) (no target left) and
// std::invalid_argument when seq_len < 1.
Batch get_batch(const Batched& data, int64_t i, int64_t seq_len);

// AWD-LSTM's variable-length BPTT: a random segment length around `bptt`, so that segment borders
// fall at different places every epoch (every token gets to be deep inside a segment sometimes).
//   base    = bptt with probability 0.95, else bptt / 2
//   seq_len = min(max(5, round(Normal(base, 5))), bptt + max_seq_len_delta)
// (The upper clamp is from the MoS code of Yang et al. 2018 — it prevents a rare out-of-memory
// segment. AWD-LSTM truncates with int(); we round to the nearest integer.)
// Uses 3 positions of `gen` per call (one for the coin, two for Box-Muller), so a run restored
// from (seed, offset) draws the very same lengths.
// The caller scales the learning rate by seq_len / bptt for that step: a short segment contributes
// fewer tokens to the mean loss, so its gradient is scaled back up to the weight of a full one.
int64_t bptt_length(int64_t bptt, Generator& gen, int64_t max_seq_len_delta = 40);

// The number of tokens an evaluation pass scores: batchify into B columns, walk the segments with
// the hidden state carried across them; every row after the first is a target exactly once, so the
// count is (rows - 1) * B whatever the segment lengths. Divide the summed loss by this (or
// average per segment weighted by its N) to get the per-token loss / perplexity.
// E.g. PTB valid (73,760 tokens) at B = 10: 7,376 rows -> 73,750 targets.
int64_t eval_target_count(int64_t num_tokens, int64_t B);
int64_t eval_target_count(const Batched& data);

// No targets, no score: a pass over nothing would report perplexity 1. Throws std::invalid_argument
// when `num_tokens` tokens in B columns give no targets, naming `what` ("the test split of
// data/ptb"): "... has no targets at batch size 10 (5 tokens; each column needs at least 2)".
void require_eval_targets(int64_t num_tokens, int64_t B, const std::string& what);

}  // namespace mg
