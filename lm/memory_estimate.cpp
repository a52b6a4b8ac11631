#include "lm/memory_estimate.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "nn/heads.h"
#include "tensor/allocator.h"

namespace mg {

namespace {

constexpr int64_t kFloat = 4;
constexpr int64_t kMiB = int64_t{1} << 20;

// The program, its libraries, the corpus as ids, OpenMP's threads.
constexpr int64_t kFixedBytes = 40 * kMiB;

// Saved activations are read again by backward, which makes their gradients alongside: each saved
// float counts twice.
constexpr int64_t kWithGradients = 2;

std::string mib(int64_t bytes) {
  std::ostringstream os;
  if (bytes >= 10 * 1024 * kMiB)
    os << bytes / (1024 * kMiB) << " GiB";
  else
    os << (bytes + kMiB - 1) / kMiB << " MiB";
  return os.str();
}

// The first number after `key` in a file such as /proc/meminfo ("MemAvailable:  123 kB"), or the
// whole file when key is empty (cgroup files hold one number, or "max"); -1 when absent.
int64_t number_in(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  if (!in) return -1;
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty() && line.rfind(key, 0) != 0) continue;
    std::istringstream words(key.empty() ? line : line.substr(key.size()));
    int64_t n = -1;
    if (!(words >> n)) return -1;  // "max": no limit
    return n;
  }
  return -1;
}

}  // namespace

MemoryEstimate estimate_training_memory(const TrainConfig& cfg, int64_t ntoken) {
  ModelConfig m = cfg.model;
  m.ntoken = ntoken;
  MemoryEstimate e;
  const int64_t P = m.parameter_count();
  e.parameters = P;
  const std::vector<int64_t> sizes = m.layer_sizes();
  int64_t dropped_hh = 0;  // weight drop's W_hh copy per layer, and its gradient
  for (int64_t H : sizes) dropped_hh += m.wdrop > 0 ? 2 * 4 * H * H : 0;
  e.weights = (2 * P + dropped_hh) * kFloat;
  e.optimizer = (cfg.optimizer == "adam" ? 2 * P : P) * kFloat;

  // One step of the longest segment, one column group at a time.
  const int64_t T = cfg.bptt + (cfg.variable_bptt ? cfg.max_seq_len_delta : 0);
  const int64_t B = (cfg.batch_size + cfg.grad_groups - 1) / cfg.grad_groups;
  const int64_t N = T * B;
  const int64_t K = is_mixture(m.head) ? m.n_experts : 1;
  int64_t per_token = 3 * m.emsize;  // embedding, its dropped copy, the dropped input
  for (int64_t H : sizes) per_token += 10 * H;  // 4H gates, c, tanh(c), h, dropped h, masks
  if (is_mixture(m.head)) per_token += 3 * K * m.emsize + 2 * K;  // latent, tanh, dropped; prior
  e.activations = kWithGradients * N * per_token * kFloat;
  const int64_t R = N * K, V = ntoken;
  const int64_t kept_cap = FusedLossOptions{}.keep_logits_floats;
  int64_t logit_floats = R * V <= kept_cap ? R * V : int64_t{16} << 20;
  if (!cfg.paths.fused_head) logit_floats = 6 * R * V;  // logits, log-probs, mixture, gradients
  e.logits = logit_floats * kFloat;  // backward turns the kept exponentials into dz in place
  e.fixed = kFixedBytes;
  return e;
}

int64_t memory_available_bytes() {
  const int64_t kib = number_in("/proc/meminfo", "MemAvailable:");
  int64_t avail = kib < 0 ? -1 : kib * 1024;
  // cgroup v2 (the process's own group, as /proc/self/cgroup names it), else v1.
  std::string group;
  {
    std::ifstream in("/proc/self/cgroup");
    for (std::string line; std::getline(in, line);)
      if (line.rfind("0::", 0) == 0) group = line.substr(3);
  }
  const std::string v2 = "/sys/fs/cgroup" + (group == "/" ? std::string() : group);
  int64_t limit = number_in(v2 + "/memory.max", ""), used = number_in(v2 + "/memory.current", "");
  if (limit < 0) {
    limit = number_in("/sys/fs/cgroup/memory/memory.limit_in_bytes", "");
    used = number_in("/sys/fs/cgroup/memory/memory.usage_in_bytes", "");
    if (limit >= (int64_t{1} << 60)) limit = -1;  // v1's "no limit" is a huge number
  }
  if (limit >= 0 && used >= 0) {
    const int64_t left = std::max<int64_t>(0, limit - used);
    avail = avail < 0 ? left : std::min(avail, left);
  }
  return avail;
}

void check_training_memory(const TrainConfig& cfg, int64_t ntoken, int64_t available) {
  if (available < 0) return;
  const MemoryEstimate e = estimate_training_memory(cfg, ntoken);
  if (e.total() <= available) return;
  // The largest term says which flags matter.
  std::string lower;
  if (e.logits >= e.weights && e.logits >= e.activations) {  // only flags this run reads
    std::vector<std::string> flags = {"--batch_size", "--bptt"};
    if (cfg.variable_bptt) flags.push_back("--max_seq_len_delta");
    if (cfg.model.reads("n_experts")) flags.push_back("--n_experts");
    for (size_t i = 0; i < flags.size(); ++i)
      lower += (i == 0 ? "" : i + 1 == flags.size() ? " or " : ", ") + flags[i];
    lower += cfg.model.reads("n_experts") ? " (the head's logits are B x T x K rows of V)"
                                          : " (the head's logits are B x T rows of V)";
  } else if (e.activations >= e.weights)
    lower = "--batch_size, --bptt or --nhid/--nhidlast (one step's activations), or split the "
            "batch with --grad_groups";
  else
    lower = "--nhid, --nhidlast, --emsize or --nlayers (the parameters)";
  throw std::invalid_argument(
      "this run needs about " + mib(e.total()) + " of memory: " + std::to_string(e.parameters) +
      " parameters with their gradients " + mib(e.weights) + ", the optimizer's state " +
      mib(e.optimizer) + ", one step's activations " + mib(e.activations) + " and the head's " +
      "logits " + mib(e.logits) + " (docs/training.md, \"Memory\"); this machine has " +
      mib(available) + " available to it: lower " + lower);
}

void fit_training_memory(const TrainConfig& cfg, int64_t ntoken) {
  const int64_t available = memory_available_bytes();
  check_training_memory(cfg, ntoken, available);
  if (available >= 0)
    set_cache_limit_bytes((available - estimate_training_memory(cfg, ntoken).total()) / 2);
}

}  // namespace mg
