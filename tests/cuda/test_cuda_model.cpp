// The whole model and the trainer on the GPU against the CPU: loss and every parameter gradient of
// each head within 1e-4, 200 training steps of `tiny` within 1e-3 per step, exact resume on the
// GPU, checkpoints that move between devices, and PTB-valid perplexity equal on both devices; a
// step in column groups (--grad-groups) and its gate statistics (--log-stats) as on the CPU.
// Skipped, visibly, without a GPU.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "lm/batching.h"
#include "lm/column_groups.h"
#include "lm/dyneval.h"
#include "lm/evaluate.h"
#include "lm/generate.h"
#include "lm/model_io.h"
#include "lm/optim.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

ModelConfig model_config(HeadKind head) {
  ModelConfig c;
  c.ntoken = 97, c.emsize = 16, c.nhid = 24,
  c.nhidlast = head == HeadKind::Softmax || head == HeadKind::Sigsoftmax ? 16 : 20;
  c.nlayers = 2, c.n_experts = 3, c.tied = true, c.head = head;
  c.dropout = 0.3f, c.dropouth = 0.2f, c.dropouti = 0.1f, c.dropoute = 0.1f, c.dropoutl = 0.2f,
  c.wdrop = 0.3f;
  return c;
}

}  // namespace

TEST(CudaModel, LossAndEveryGradientMatchTheCpuForEveryHead) {
  MG_SKIP_WITHOUT_CUDA();
  const int64_t T = 9, B = 4;
  std::vector<int64_t> ids(T * B), targets(T * B);
  for (int64_t i = 0; i < T * B; ++i) ids[i] = (i * 31 + 5) % 97, targets[i] = (i * 17 + 3) % 97;
  for (HeadKind head :
       {HeadKind::Softmax, HeadKind::MoS, HeadKind::Sigsoftmax, HeadKind::MoSig, HeadKind::MoC})
    for (bool fused : {true, false}) {
      SCOPED_TRACE(head_kind_name(head) + (fused ? " fused" : " plain"));
      RNNModel cpu(model_config(head), 3), gpu(model_config(head), 3);
      gpu.to(Device::CUDA);
      ASSERT_EQ(gpu.device(), Device::CUDA);
      for (RNNModel* m : {&cpu, &gpu}) m->paths.fused_lstm = fused, m->paths.fused_head = fused;
      // Training mode: every dropout draws its mask, and both devices must draw the same ones.
      const Tensor loss_cpu = cpu.forward(ids, T, B, cpu.init_hidden(B), &targets).loss;
      const Tensor loss_gpu = gpu.forward(ids, T, B, gpu.init_hidden(B), &targets).loss;
      EXPECT_NEAR(loss_gpu.item(), loss_cpu.item(), 1e-4 * std::fabs(loss_cpu.item()));
      EXPECT_EQ(gpu.dropout_gen.offset, cpu.dropout_gen.offset);
      loss_cpu.backward();
      loss_gpu.backward();
      const auto pc = cpu.named_parameters(), pg = gpu.named_parameters();
      for (size_t i = 0; i < pc.size(); ++i) {
        SCOPED_TRACE(pc[i].first);
        ASSERT_TRUE(pg[i].second.grad().defined());
        EXPECT_TENSOR_NEAR(pg[i].second.grad().cpu(), pc[i].second.grad(), 1e-4, 1e-6);
      }
    }
}

// --grad-groups and --log-stats on the GPU: a step in G column groups (each group's locked-dropout
// columns of the whole mask, the gradients added on the device in group order) gives the CPU's
// loss, gradients, final state and gate saturation counts, for G = 1 and 2.
TEST(CudaModel, AStepInColumnGroupsAndItsGateStatsFollowTheCpu) {
  MG_SKIP_WITHOUT_CUDA();
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("cuda_groups"));
  const TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("cuda_groups"));
  ModelConfig mc = cfg.model;  // every dropout on
  mc.ntoken = corpus.vocab.size();
  const Batch batch = get_batch(batchify(corpus.train, cfg.batch_size), 0, cfg.bptt);
  ASSERT_EQ(cfg.batch_size % 2, 0);
  for (int64_t G : {1, 2}) {
    SCOPED_TRACE("G " + std::to_string(G));
    RNNModel cpu(mc, cfg.seed), gpu(mc, cfg.seed);
    // LSTM weights 8 times their initial size, so that gates saturate and the counts compared below
    // are not all zero (at the initial weights none of this model's gates saturate).
    for (RNNModel* m : {&cpu, &gpu})
      for (auto& [name, p] : m->named_parameters())
        if (name.rfind("rnns.", 0) == 0)
          for (int64_t i = 0; i < p.numel(); ++i) p.data()[i] *= 8.0f;
    gpu.to(Device::CUDA);
    cpu.train(), gpu.train();
    const GroupedStep sc = grouped_forward_backward(cpu, batch, cpu.init_hidden(cfg.batch_size), G,
                                                    cfg.alpha, cfg.beta, /*gate_stats=*/true);
    const GroupedStep sg = grouped_forward_backward(gpu, batch, gpu.init_hidden(cfg.batch_size), G,
                                                    cfg.alpha, cfg.beta, /*gate_stats=*/true);
    EXPECT_NEAR(sg.nll, sc.nll, 1e-4 * sc.nll);
    EXPECT_EQ(gpu.dropout_gen.offset, cpu.dropout_gen.offset);
    const auto pc = cpu.named_parameters(), pg = gpu.named_parameters();
    for (size_t i = 0; i < pc.size(); ++i) {
      SCOPED_TRACE(pc[i].first);
      ASSERT_TRUE(pg[i].second.grad().defined());
      EXPECT_TENSOR_NEAR(pg[i].second.grad().cpu(), pc[i].second.grad(), 1e-4, 1e-6);
    }
    ASSERT_EQ(sg.hidden.size(), sc.hidden.size());
    for (size_t l = 0; l < sc.hidden.size(); ++l) {
      ASSERT_TRUE(sg.hidden[l].h.is_cuda());
      EXPECT_TENSOR_NEAR(sg.hidden[l].h.cpu(), sc.hidden[l].h, 1e-5, 1e-6);
      EXPECT_TENSOR_NEAR(sg.hidden[l].c.cpu(), sc.hidden[l].c, 1e-5, 1e-6);
    }
    ASSERT_EQ(sg.gates.size(), sc.gates.size());
    ASSERT_FALSE(sc.gates.empty());
    int64_t saturated = 0;
    for (const GateSaturation& s : sc.gates)
      for (int gate = 0; gate < 4; ++gate) saturated += s.saturated[gate];
    ASSERT_GT(saturated, 20) << "too few saturated gates for the counts to test anything";
    for (size_t l = 0; l < sc.gates.size(); ++l) {
      EXPECT_EQ(sg.gates[l].values, sc.gates[l].values);
      for (int gate = 0; gate < 4; ++gate)  // a gate right at the threshold may fall either way
        EXPECT_NEAR(sg.gates[l].saturated[gate], sc.gates[l].saturated[gate],
                    2 + sc.gates[l].values / 1000)
            << "layer " << l << " gate " << gate;
    }
  }
}

TEST(CudaModel, OptimizerStepsAndClippingMatchTheCpu) {
  MG_SKIP_WITHOUT_CUDA();
  for (OptimizerKind kind : {OptimizerKind::SGD, OptimizerKind::ASGD, OptimizerKind::Adam}) {
    SCOPED_TRACE(optimizer_kind_name(kind));
    Generator gen(4);
    const Tensor w0 = Tensor::uniform({300, 7}, -1, 1, gen),
                 g0 = Tensor::uniform({300, 7}, -1, 1, gen);
    Tensor wc = copy_contiguous(w0).requires_grad_(), wg = w0.cuda().requires_grad_();
    Optimizer oc(kind, {{"w", wc}}, 0.01f), og(kind, {{"w", wg}}, 0.01f);
    for (int step = 0; step < 3; ++step) {
      sum(mul(wc, g0)).backward();
      sum(mul(wg, g0.cuda())).backward();
      EXPECT_NEAR(clip_grad_norm({wg}, 5.0), clip_grad_norm({wc}, 5.0), 1e-6 * 30);
      oc.step(0.1f), og.step(0.1f);
      oc.zero_grad(), og.zero_grad();
    }
    EXPECT_TENSOR_NEAR(wg.cpu(), wc, 1e-5, 1e-6);
    oc.swap_in_average(), og.swap_in_average();
    EXPECT_TENSOR_NEAR(wg.cpu(), wc, 1e-5, 1e-6);
  }
}

// At the preset's lr 20 training is chaotic: two correct CPU runs, the fused LSTM against the
// step-by-step one, differ by 1.2e-4 at step 17, 1.6e-3 at step 29 and 7.7e-2 at step 37 on PTB
// (measured), and so does the GPU. So the 200 steps run at lr 2, where those two CPU runs stay
// within 1.4e-6 of each other; and the first 20 steps at lr 20.
TEST(CudaModel, TwoHundredTinyStepsFollowTheCpuLossTrajectory) {
  MG_SKIP_WITHOUT_CUDA();
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const Corpus corpus = load_corpus(dir);
  for (const auto& [lr, steps] : std::vector<std::pair<float, int64_t>>{{2.0f, 200}, {20.0f, 20}}) {
    TrainConfig cfg = preset_config("tiny");
    cfg.data = corpus.dir, cfg.max_steps = steps, cfg.lr = lr, cfg.epochs = 1000,
    cfg.test_at_end = false;
    cfg.log_interval = 1000, cfg.save = mgtest::temp_dir("cuda_tiny_cpu");
    const std::vector<double> on_cpu = mgtest::run_collecting(cfg, corpus);
    cfg.device = Device::CUDA, cfg.save = mgtest::temp_dir("cuda_tiny_gpu");
    const std::vector<double> on_gpu = mgtest::run_collecting(cfg, corpus);
    ASSERT_EQ(on_cpu.size(), static_cast<size_t>(steps));
    ASSERT_EQ(on_gpu.size(), on_cpu.size());
    double worst = 0;
    // lr 2: 1.4e-6 measured on an H100, so 1e-5 catches a real regression; lr 20, where float
    // rounding grows through MoS's trajectory (docs/gpu.md): 1e-3.
    const double tolerance = lr < 5 ? 1e-5 : 1e-3;
    for (size_t i = 0; i < on_cpu.size(); ++i) {
      EXPECT_NEAR(on_gpu[i], on_cpu[i], tolerance) << "lr " << lr << ", step " << i + 1;
      worst = std::max(worst, std::fabs(on_gpu[i] - on_cpu[i]));
    }
    std::printf(
        "tiny, lr %g, %lld steps: first loss %.6f, last %.6f (CPU %.6f); largest per-step "
        "difference %.2e\n",
        lr, static_cast<long long>(steps), on_gpu[0], on_gpu.back(), on_cpu.back(), worst);
  }
}

TEST(CudaModel, ResumeOnTheGpuIsExactAndCheckpointsMoveBetweenDevices) {
  MG_SKIP_WITHOUT_CUDA();
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("cuda_resume"));
  TrainConfig straight = mgtest::small_config(corpus.dir, mgtest::temp_dir("cuda_straight"));
  straight.device = Device::CUDA;
  const std::vector<double> expected = mgtest::run_collecting(straight, corpus);
  ASSERT_GT(expected.size(), 20u);
  // Interrupted mid-epoch and in a later epoch, resumed each time, on the GPU: the same bits.
  TrainConfig part = mgtest::small_config(corpus.dir, mgtest::temp_dir("cuda_parts"));
  part.device = Device::CUDA;
  std::vector<double> got;
  for (int64_t stop : {int64_t{7}, static_cast<int64_t>(expected.size()) - 5, int64_t{0}}) {
    part.max_steps = stop;
    const std::vector<double> piece = mgtest::run_collecting(part, corpus);
    got.insert(got.end(), piece.begin(), piece.end());
    part.resume = true;
  }
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) ASSERT_EQ(got[i], expected[i]) << "step " << i + 1;

  // A GPU checkpoint resumed on the CPU continues the same trajectory, to float rounding, which
  // compounds from step to step: 1e-3 for the first 50 steps after the move, 5e-3 after (on an
  // H200 in 2026-11 the CPU's vtanh against the GPU's own tanhf had drifted 1.4e-3 by step 274).
  TrainConfig moved = mgtest::small_config(corpus.dir, mgtest::temp_dir("cuda_moved"));
  moved.device = Device::CUDA, moved.max_steps = 7;
  mgtest::run_collecting(moved, corpus);
  moved.device = Device::CPU, moved.max_steps = 0, moved.resume = true;
  const std::vector<double> rest = mgtest::run_collecting(moved, corpus);
  ASSERT_EQ(rest.size(), expected.size() - 7);
  for (size_t i = 0; i < rest.size(); ++i)
    EXPECT_NEAR(rest[i], expected[i + 7], i < 50 ? 1e-3 : 5e-3) << "step " << i + 8;

  // The best model saved by the GPU run evaluates to the same perplexity on both devices.
  LoadedModel best = load_model(straight.save + "/best.ckpt");
  const Batched valid = batchify(corpus.valid, 4);
  const double on_cpu = evaluate(*best.model, valid, 10).loss;
  best.model->to(Device::CUDA);
  const double on_gpu = evaluate(*best.model, valid, 10).loss;
  EXPECT_NEAR(on_gpu, on_cpu, 1e-4 * on_cpu);
}

TEST(CudaModel, PtbValidPerplexityIsTheSameOnBothDevices) {
  MG_SKIP_WITHOUT_CUDA();
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const Corpus corpus = load_corpus(dir);
  const LoadedModel loaded = import_safetensors(mgtest::fixture_path("ptb_eval_model.safetensors"));
  ASSERT_EQ(loaded.model->config.ntoken, corpus.vocab.size());
  const Batched data = batchify(corpus.valid, 10);
  const EvalResult cpu = evaluate(*loaded.model, data, 70);
  loaded.model->to(Device::CUDA);
  const EvalResult gpu = evaluate(*loaded.model, data, 70);
  std::printf("PTB valid (%lld targets): ppl %.6f on the CPU, %.6f on the GPU\n",
              static_cast<long long>(cpu.targets), cpu.perplexity(), gpu.perplexity());
  EXPECT_EQ(gpu.targets, cpu.targets);
  EXPECT_NEAR(gpu.perplexity(), cpu.perplexity(), 1e-4 * cpu.perplexity());
}

// The other commands on the GPU, against the CPU: a CPU checkpoint resumed on the GPU, finetuning,
// dynamic evaluation and sampling from one trained model.
TEST(CudaModel, CpuCheckpointsFinetuneDynevalAndGenerateOnTheGpu) {
  MG_SKIP_WITHOUT_CUDA();
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("cuda_commands"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("cuda_commands"));
  cfg.epochs = 1, cfg.max_steps = 5;
  mgtest::run_collecting(cfg, corpus);  // stopped on the CPU after 5 steps...
  cfg.max_steps = 0, cfg.resume = true, cfg.device = Device::CUDA;
  const std::vector<double> rest =
      mgtest::run_collecting(cfg, corpus);  // ...and finished on the GPU
  ASSERT_FALSE(rest.empty());
  EXPECT_TRUE(std::isfinite(rest.back()));
  cfg.resume = false, cfg.epochs = 1;
  const TrainResult tuned = train_lm(cfg, corpus, {}, true);  // finetune on the GPU
  EXPECT_TRUE(std::isfinite(tuned.best_val_loss));

  std::vector<int64_t> text;
  for (int rep = 0; rep < 10; ++rep)
    for (const char* w : {"the", "fish", "buys", "N", "shares", "<eos>"})
      text.push_back(corpus.vocab.id(w));
  DynevalConfig d;
  d.max_stat_batches = 5, d.stat_batch_size = 4, d.lr = 0.01f;
  LoadedModel on_cpu = load_model(cfg.save + "/best.ckpt"),
              on_gpu = load_model(cfg.save + "/best.ckpt");
  on_gpu.model->to(Device::CUDA);
  const double dyn_cpu = dynamic_evaluate(*on_cpu.model, corpus.train, text, d).loss;
  const double dyn_gpu = dynamic_evaluate(*on_gpu.model, corpus.train, text, d).loss;
  EXPECT_NEAR(dyn_gpu, dyn_cpu, 1e-4 * dyn_cpu);

  LoadedModel g_cpu = load_model(cfg.save + "/best.ckpt"),
              g_gpu = load_model(cfg.save + "/best.ckpt");
  g_gpu.model->to(Device::CUDA);
  GenerateConfig g;
  g.words = 20, g.seed = 3, g.prompt = "the cat";
  EXPECT_EQ(generate(*g_gpu.model, g_gpu.vocab, g), generate(*g_cpu.model, g_cpu.vocab, g));
}
