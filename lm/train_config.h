// Everything a training run is configured by: the model's flags and the reference scripts' training
// flags, with named presets that set them all (explicit flags override a preset).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "io/flags.h"
#include "nn/rnn_model.h"
#include "tensor/gemm.h"

namespace mg {

// The flags that choose the compute paths, as typed: compute_paths() turns them into the checked
// ComputePaths (nn/compute_paths.h) a command applies.
struct PathFlags {
  bool fused_lstm = true;          // --fused-lstm: false, the step-by-step LSTM built from ops
  bool fused_head = true;          // --fused-head: false, nll_loss(log_prob(h))
  std::string gemm = "fast";       // --gemm fast|reference
  std::string precision = "fp32";  // --precision fp32|bf16: the operands of the CPU GEMMs
};

struct TrainConfig {
  ModelConfig model;
  std::string preset;             // the preset this config started from ("" = none)
  std::string data;               // --data (resolved with resolve_data_dir)
  std::string save = "runs/run";  // run directory: checkpoints, metrics.jsonl, curves.svg
  std::string optimizer = "sgd";  // sgd | adam (NT-ASGD switches sgd -> asgd)
  float lr = 20, clip = 0.25f, alpha = 2, beta = 1, wdecay = 1.2e-6f;
  int64_t epochs = 40, batch_size = 20, bptt = 35, eval_batch_size = 10, test_batch_size = 1;
  int64_t max_seq_len_delta = 40;  // cap of the variable BPTT length: bptt + delta
  int64_t nonmono = 5, log_interval = 200;
  int64_t asgd_epoch = 0;  // > 0: SGD -> ASGD at the start of this epoch (a fixed budget's schedule)
  int64_t grad_groups = 1;  // --grad-groups G: the batch's columns in G groups (lm/column_groups.h)
  uint64_t seed = 1;
  int threads = 0;  // --threads, 0: OpenMP's default. Applied once by the command line (cli/
                    // commands.cpp run_mosgrad); train_lm runs on the threads it is given
  Device device = Device::CPU;  // --device cpu|cuda: where the model trains (not saved: a run
                                // resumes on either)
  bool tf32 = false;  // --tf32: cuBLAS may use TF32 tensor cores (faster, ~1e-3 relative GEMMs)
  double max_minutes = 0;        // > 0: stop cleanly (saving the checkpoint) after this long
  int64_t max_steps = 0;         // > 0: stop cleanly after this many optimizer steps in total
  int64_t max_train_tokens = 0;  // > 0: train on the first N tokens only (quick runs, tests)
  int64_t max_eval_tokens = 0;   // > 0: validate on the first N tokens only
  bool resume = false;           // continue from <save>/checkpoint.ckpt
  bool test_at_end = true;       // evaluate the best model on test (batch size 1) at the end
  bool detect_anomaly = false;   // --detect-anomaly: name the first op making a NaN/Inf (slow)
  bool log_stats = false;        // --log-stats: training-health statistics (lm/health_stats.h)
  bool variable_bptt = true;     // AWD-LSTM's random segment lengths (false: always bptt)
  PathFlags paths;               // --fused-lstm, --fused-head, --gemm, --precision (compute_paths)

  std::map<std::string, std::string> to_map() const;  // for checkpoints; includes model.* keys
  // Applies "--name value" flags (names as in the reference scripts, '-' or '_' alike); throws
  // std::invalid_argument naming an unknown flag or a bad value and what is allowed.
  void set(const std::string& name, const std::string& value);
  // Every flag of train/finetune, bound to this config's fields: parsing, checking and --help.
  FlagTable flag_table();
};

// The GEMM that --gemm names: "fast" or "reference" (tensor/gemm.h). The reference one is the
// CPU's; on --device cuda every GEMM is cuBLAS's, so "reference" there is refused, not ignored.
GemmPath gemm_path_for(const std::string& gemm, Device device);
// The rows of the three run-time switches between the fast paths and the readable references
// (--fused-lstm, --fused-head, --gemm), bound to `flags`; shared by train, finetune, graph,
// gradcheck, eval, dyneval and pointer (generate, which scores no targets, takes --fused-lstm and
// --gemm; all of those take --precision too).
FlagTable reference_path_flags(PathFlags& flags);

// --precision fp32|bf16 (tensor/gemm.h): bf16 rounds the operands of every CPU GEMM to bfloat16
// and accumulates in FP32; weights, gradients, optimizer state and the loss stay FP32.
Flag precision_flag(std::string& precision);
// The GemmPrecision that --precision names, checked against the other flags and the CPU before
// any work starts: bf16 is refused, with the reason, on --device cuda, with --gemm reference and
// on a CPU without AVX512_BF16 (never a silent FP32 run).
GemmPrecision gemm_precision_for(const std::string& precision, const std::string& gemm,
                                 Device device);
// The paths the flags name, checked (as gemm_path_for and gemm_precision_for do) before any work
// starts; a command applies them once, with a ComputePathsScope (nn/compute_paths.h).
ComputePaths compute_paths(const PathFlags& flags, Device device);

// The named configurations (`mosgrad presets`, docs/training.md; the speedrun budgets ptb-1h and
// ptb-3h in docs/speedrun.md). Throws listing the names for an unknown one.
TrainConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace mg
