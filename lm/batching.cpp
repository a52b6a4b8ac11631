#include "lm/batching.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

namespace mg {

int64_t Batched::at(int64_t t, int64_t b) const {
  if (t < 0 || t >= rows || b < 0 || b >= batch)
    throw std::out_of_range("Batched::at: (" + std::to_string(t) + ", " + std::to_string(b) +
                            ") is outside [" + std::to_string(rows) + ", " + std::to_string(batch) +
                            "]");
  return data[static_cast<size_t>(t * batch + b)];
}

Batched batchify(const std::vector<int64_t>& ids, int64_t B) {
  if (B < 1)
    throw std::invalid_argument("batchify: batch size must be at least 1, got " +
                                std::to_string(B));
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n < B)
    throw std::invalid_argument("batchify: " + std::to_string(n) +
                                " tokens cannot fill one row of " + std::to_string(B) + " columns");
  Batched out;
  out.batch = B;
  out.rows = n / B;
  out.data.resize(static_cast<size_t>(out.rows * B));
  // Column b is the stretch ids[b*rows, (b+1)*rows): the transpose of AWD-LSTM's
  // data.view(B, -1).t().
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < out.rows; ++t)
      out.data[static_cast<size_t>(t * B + b)] = ids[static_cast<size_t>(b * out.rows + t)];
  return out;
}

Batch get_batch(const Batched& data, int64_t i, int64_t seq_len) {
  if (seq_len < 1)
    throw std::invalid_argument("get_batch: seq_len must be at least 1, got " +
                                std::to_string(seq_len));
  if (i < 0 || i >= data.rows - 1)
    throw std::out_of_range("get_batch: start row " + std::to_string(i) +
                            " has no target row after it (the data has " +
                            std::to_string(data.rows) + " rows, so i must be in [0, " +
                            std::to_string(std::max<int64_t>(data.rows - 1, 0)) + "))");
  Batch out;
  out.batch = data.batch;
  out.seq_len = std::min(seq_len, data.rows - 1 - i);
  const auto first = data.data.begin() + i * data.batch;
  const int64_t n = out.seq_len * data.batch;  // N = T*B
  out.input.assign(first, first + n);
  out.target.assign(first + data.batch, first + data.batch + n);  // one row later
  return out;
}

int64_t bptt_length(int64_t bptt, Generator& gen, int64_t max_seq_len_delta) {
  if (bptt < 1)
    throw std::invalid_argument("bptt_length: bptt must be at least 1, got " +
                                std::to_string(bptt));
  if (bptt + max_seq_len_delta < 1)
    throw std::invalid_argument("bptt_length: bptt + max_seq_len_delta must be at least 1, got " +
                                std::to_string(bptt + max_seq_len_delta));
  const uint64_t first = gen.advance(3);
  const double coin = philox_uniform(gen.seed, first);
  const double base = coin < 0.95 ? static_cast<double>(bptt) : bptt / 2.0;
  const double z = philox_normal(gen.seed, first + 1);  // uses positions first + 1 and first + 2
  const int64_t len = static_cast<int64_t>(std::llround(base + 5.0 * z));
  // Upper clamp last, as in MoS: when bptt + delta < 5 (tiny test settings) the cap wins, since
  // it is the one that protects memory.
  return std::min(std::max<int64_t>(5, len), bptt + max_seq_len_delta);
}

int64_t eval_target_count(int64_t num_tokens, int64_t B) {
  if (B < 1)
    throw std::invalid_argument("eval_target_count: batch size must be at least 1, got " +
                                std::to_string(B));
  const int64_t rows = num_tokens / B;
  return rows > 0 ? (rows - 1) * B : 0;
}

int64_t eval_target_count(const Batched& data) {
  return data.rows > 0 ? (data.rows - 1) * data.batch : 0;
}

void require_eval_targets(int64_t num_tokens, int64_t B, const std::string& what) {
  if (eval_target_count(num_tokens, B) > 0) return;
  throw std::invalid_argument(what + " has no targets at batch size " + std::to_string(B) + " (" +
                              std::to_string(num_tokens) + " tokens; each of the " +
                              std::to_string(B) + " columns needs at least 2)");
}

}  // namespace mg
