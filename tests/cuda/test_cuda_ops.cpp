// The CUDA backend against the CPU, op by op: every op's output and the gradients of all its inputs
// (of sum(f(x) * R), R random) must match the CPU within 1e-5 relative (1e-4 for GEMMs and long
// reductions). Dropout masks must be bitwise equal; reductions and the embedding backward must give
// the same bits run to run. Without a GPU (or in a build without CUDA) these tests are skipped,
// visibly, except the ones that check the errors a user sees then.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <tuple>

#include "autograd/ops.h"
#include "cuda/backend.h"
#include "nn/dropout.h"
#include "nn/heads.h"
#include "nn/lstm.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Runs f on CPU leaves and on GPU copies of them; compares the outputs and every input gradient.
void expect_same_on_gpu(const std::string& name, const Fn& f, const std::vector<Tensor>& inputs,
                        double rtol = 1e-5, double atol = 1e-6) {
  SCOPED_TRACE(name);
  std::vector<Tensor> cpu_in, gpu_in;
  for (const Tensor& x : inputs) {
    cpu_in.push_back(copy_contiguous(x).requires_grad_());
    gpu_in.push_back(x.cuda().requires_grad_());
  }
  const Tensor y_cpu = f(cpu_in), y_gpu = f(gpu_in);
  ASSERT_TRUE(y_gpu.is_cuda()) << name << " returned a CPU tensor for GPU inputs";
  EXPECT_TENSOR_NEAR(y_gpu.cpu(), y_cpu, rtol, atol);
  Generator gen(7);
  const Tensor R = Tensor::uniform(y_cpu.shape(), -1.0f, 1.0f, gen);
  sum(mul(y_cpu, R)).backward();
  sum(mul(y_gpu, R.cuda())).backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    SCOPED_TRACE("gradient of input " + std::to_string(i));
    ASSERT_EQ(cpu_in[i].grad().defined(), gpu_in[i].grad().defined());
    if (!cpu_in[i].grad().defined()) continue;
    EXPECT_TRUE(gpu_in[i].grad().is_cuda());
    EXPECT_TENSOR_NEAR(gpu_in[i].grad().cpu(), cpu_in[i].grad(), rtol, atol);
  }
}

Tensor rand(const Shape& shape, uint64_t seed, float low = -2.0f, float high = 2.0f) {
  Generator gen(seed);
  return Tensor::uniform(shape, low, high, gen);
}

}  // namespace

// ---- what a user without a GPU sees (these run everywhere) ----

TEST(CudaErrors, MovingToTheGpuWithoutOneSaysWhy) {
  std::string why;
  if (cuda_is_available(&why)) GTEST_SKIP() << "a GPU is present: nothing to refuse";
  const std::string message = mgtest::error_of([] { Tensor::ones({2}).cuda(); });
  EXPECT_HAS(message, "--device cuda");
  if (cuda_is_built_in()) {  // the driver's reason: no usable driver, or no GPU
    EXPECT_TRUE(message.find("no usable CUDA driver or GPU") != std::string::npos ||
                message.find("found no GPU") != std::string::npos)
        << message;
  } else {
    EXPECT_HAS(message, "make CUDA=1");
  }
  EXPECT_EQ(parse_device("cpu"), Device::CPU);
  try {
    parse_device("gpu");
    FAIL() << "parse_device accepted 'gpu'";
  } catch (const std::invalid_argument& e) {
    EXPECT_HAS(std::string(e.what()), "choose cpu or cuda");
  }
}

TEST(CudaErrors, HostLoopsRefuseDeviceTensors) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor t = Tensor::ones({3}).cuda();
  try {
    t.data();
    FAIL() << "data() handed out a device pointer";
  } catch (const std::logic_error& e) {
    EXPECT_HAS(std::string(e.what()), "lives on cuda");
  }
}

TEST(CudaErrors, OpsRefuseInputsOnTwoDevices) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({2, 3}).cuda();
  for (const auto& op :
       std::vector<std::function<void()>>{[&] { add(a, b); }, [&] { matmul(a, b, false, true); },
                                          [&] {
                                            cat({a, b}, 0);
                                          }}) {
    try {
      op();
      FAIL() << "mixed devices were accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_HAS(std::string(e.what()), "different devices: cpu and cuda");
    }
  }
}

TEST(CudaErrors, RunningOutOfGpuMemoryNamesTheSize) {
  MG_SKIP_WITHOUT_CUDA();
  try {
    Tensor::empty({int64_t{1} << 40}, Device::CUDA);  // 4 TiB
    FAIL() << "a 4 TiB tensor was allocated";
  } catch (const std::runtime_error& e) {
    EXPECT_HAS(std::string(e.what()), "out of GPU memory: a tensor of 4194304.0 MiB");
    EXPECT_HAS(std::string(e.what()), "free");
  }
  EXPECT_EQ(Tensor::ones({4}, Device::CUDA).cpu().to_vector(),
            std::vector<float>(4, 1.0f));  // still usable
}

// ---- copies and layout ----

TEST(CudaOps, CopiesRoundTripBitForBit) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor x = rand({5, 7, 3}, 1);
  EXPECT_EQ(mgtest::bits_of(x.cuda().cpu()), mgtest::bits_of(x));
  // Strided views copied on the GPU: a transpose and a narrow of a transpose.
  const Tensor t = transpose(x, 0, 2), n = narrow(transpose(x, 1, 2), 1, 1, 2);
  EXPECT_EQ(mgtest::bits_of(contiguous(t.cuda()).cpu()), mgtest::bits_of(contiguous(t)));
  EXPECT_EQ(mgtest::bits_of(contiguous(transpose(x.cuda(), 1, 2)).cpu()),
            mgtest::bits_of(contiguous(transpose(x, 1, 2))));
  EXPECT_EQ(mgtest::bits_of(n.cuda().cpu()), mgtest::bits_of(contiguous(n)));
  EXPECT_EQ(Tensor::full({3}, 2.5f, Device::CUDA).to_vector(), std::vector<float>(3, 2.5f));
  EXPECT_FLOAT_EQ(x.cuda().at({4, 6, 2}), x.at({4, 6, 2}));
}

// ---- every op, forward and backward, against the CPU ----

TEST(CudaOps, ElementwiseAndBroadcasting) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor a = rand({4, 5}, 1), b = rand({4, 5}, 2), row = rand({5}, 3), col = rand({4, 1}, 4);
  const Tensor pos = rand({4, 5}, 5, 0.5f, 3.0f);
  expect_same_on_gpu("add", [](auto& x) { return add(x[0], x[1]); }, {a, b});
  expect_same_on_gpu("add row", [](auto& x) { return add(x[0], x[1]); }, {a, row});
  expect_same_on_gpu("sub col", [](auto& x) { return sub(x[0], x[1]); }, {a, col});
  expect_same_on_gpu("mul col", [](auto& x) { return mul(x[1], x[0]); }, {a, col});
  expect_same_on_gpu("div", [](auto& x) { return div(x[0], x[1]); }, {a, pos});
  expect_same_on_gpu("scalar ops",
                     [](auto& x) { return neg(mul_scalar(add_scalar(x[0], 0.5f), 3.0f)); }, {a});
  expect_same_on_gpu("3-D broadcast", [](auto& x) { return mul(x[0], x[1]); },
                     {rand({3, 1, 5}, 6), rand({4, 1}, 7)});
  expect_same_on_gpu("transposed input", [](auto& x) { return add(transpose(x[0], 0, 1), x[1]); },
                     {rand({5, 4}, 8), a});
  expect_same_on_gpu("tanh", [](auto& x) { return tanh(x[0]); }, {a});
  expect_same_on_gpu("sigmoid", [](auto& x) { return sigmoid(x[0]); }, {mul_scalar(a, 20.0f)});
  expect_same_on_gpu("log_sigmoid", [](auto& x) { return log_sigmoid(x[0]); },
                     {mul_scalar(a, 30.0f)});
  expect_same_on_gpu("exp", [](auto& x) { return exp(x[0]); }, {a});
  expect_same_on_gpu("log", [](auto& x) { return log(x[0]); }, {pos});
  expect_same_on_gpu("relu", [](auto& x) { return relu(x[0]); }, {a});
  expect_same_on_gpu("square", [](auto& x) { return square(x[0]); }, {a});
}

// The formulas are written once (math/formulas.h) and both devices run them, vtanh included (the
// GPU had its own tanhf until 2026-11). Over 2^20 inputs per formula, forward and derivative, the
// GPU's numbers are the CPU's to a few ulp: what remains is the compilers' contraction of
// multiply-adds and, for exp/log/log1p, the two math libraries. The test prints the share that is
// bit-equal.
TEST(CudaOps, EachFormulaGivesTheCpusNumbersToAFewUlp) {
  MG_SKIP_WITHOUT_CUDA();
  const int64_t n = int64_t{1} << 20;
  const Tensor wide = rand({n}, 11, -40.0f, 40.0f), pos = rand({n}, 12, 1e-3f, 80.0f),
               g = rand({n}, 13, -1.0f, 1.0f);
  // Largest |gpu - cpu| beyond atol, in units of the CPU value's last place, and the share of
  // equal bits. The derivatives get atol = 2^-23, one ulp of 1: 1 - y² at a saturated tanh is a
  // difference of nearly equal numbers, whose relative error a one-ulp y makes as large as it
  // likes.
  auto compare = [](const Tensor& gpu_t, const Tensor& cpu_t, double atol) {
    const Tensor gc = gpu_t.cpu();
    const float* a = gc.data();
    const float* b = cpu_t.data();
    double worst = 0;
    int64_t same = 0;
    for (int64_t i = 0; i < cpu_t.numel(); ++i) {
      const float mag = std::max(std::fabs(b[i]), std::numeric_limits<float>::min());
      const float ulp = std::nextafter(mag, INFINITY) - mag;
      worst = std::max(worst, std::max(0.0, std::fabs(double(a[i]) - double(b[i])) - atol) / ulp);
      same += std::memcmp(&a[i], &b[i], sizeof(float)) == 0;
    }
    return std::make_pair(worst, double(same) / cpu_t.numel());
  };
  const std::vector<std::tuple<const char*, Tensor (*)(const Tensor&), Tensor, double>> cases = {
      {"tanh", mg::tanh, wide, 2},
      {"sigmoid", mg::sigmoid, wide, 4},
      {"log_sigmoid", mg::log_sigmoid, wide, 4},
      {"exp", mg::exp, wide, 4},
      {"log", mg::log, pos, 4},
      {"relu", mg::relu, wide, 0},
      {"square", mg::square, wide, 0}};
  for (const auto& [name, f, x, bound] : cases) {
    const Tensor x_cpu = copy_contiguous(x).requires_grad_(), x_gpu = x.cuda().requires_grad_();
    const Tensor y_cpu = f(x_cpu), y_gpu = f(x_gpu);
    sum(mul(y_cpu, g)).backward();
    sum(mul(y_gpu, g.cuda())).backward();
    const auto [fwd, fwd_same] = compare(y_gpu, y_cpu, 0.0);
    const auto [bwd, bwd_same] = compare(x_gpu.grad(), x_cpu.grad(), std::ldexp(1.0, -23));
    std::printf("%-12s forward %.1f ulp (%.1f%% bit-equal), derivative %.1f ulp (%.1f%%)\n", name,
                fwd, 100 * fwd_same, bwd, 100 * bwd_same);
    EXPECT_LE(fwd, bound) << name << " forward";
    EXPECT_LE(bwd, bound + 2) << name << " derivative";
  }
}

TEST(CudaOps, MatmulAndBmmWithEveryTranspose) {
  MG_SKIP_WITHOUT_CUDA();
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const Tensor a = ta ? rand({33, 17}, 1) : rand({17, 33}, 1),
                   b = tb ? rand({29, 33}, 2) : rand({33, 29}, 2);
      expect_same_on_gpu(
          "matmul", [ta, tb](auto& x) { return matmul(x[0], x[1], ta, tb); }, {a, b}, 1e-4, 1e-5);
      const Tensor ba = ta ? rand({3, 9, 7}, 3) : rand({3, 7, 9}, 3),
                   bb = tb ? rand({3, 5, 9}, 4) : rand({3, 9, 5}, 4);
      expect_same_on_gpu(
          "bmm", [ta, tb](auto& x) { return bmm(x[0], x[1], ta, tb); }, {ba, bb}, 1e-4, 1e-5);
    }
}

TEST(CudaOps, ReductionsAndSoftmax) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor x = rand({6, 10007}, 1, -30.0f, 30.0f);  // a vocabulary-sized line: block reductions
  const Tensor small = rand({3, 4, 5}, 2);
  expect_same_on_gpu(
      "sum", [](auto& v) { return sum(v[0]); }, {x}, 1e-4, 1e-4);
  expect_same_on_gpu("mean", [](auto& v) { return mean(v[0]); }, {small});
  for (int d = 0; d < 3; ++d) {
    expect_same_on_gpu("sum dim", [d](auto& v) { return sum(v[0], d, d == 1); }, {small});
    expect_same_on_gpu("mean dim", [d](auto& v) { return mean(v[0], d); }, {small});
    expect_same_on_gpu("logsumexp dim", [d](auto& v) { return logsumexp(v[0], d, true); }, {small});
    expect_same_on_gpu("softmax dim", [d](auto& v) { return softmax(v[0], d); }, {small});
    expect_same_on_gpu("log_softmax dim", [d](auto& v) { return log_softmax(v[0], d); }, {small});
  }
  expect_same_on_gpu(
      "sum rows", [](auto& v) { return sum(v[0], 0); }, {x}, 1e-4, 1e-4);
  expect_same_on_gpu(
      "sum V", [](auto& v) { return sum(v[0], 1); }, {x}, 1e-4, 1e-3);
  expect_same_on_gpu(
      "logsumexp V", [](auto& v) { return logsumexp(v[0], 1); }, {x}, 1e-5, 1e-5);
  expect_same_on_gpu(
      "log_softmax V", [](auto& v) { return log_softmax(v[0], 1); }, {x}, 1e-5, 1e-5);
  expect_same_on_gpu(
      "softmax V", [](auto& v) { return softmax(v[0], 1); }, {x}, 1e-5, 1e-7);
}

TEST(CudaOps, ShapeOpsIndexingAndLoss) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor a = rand({4, 6}, 1), b = rand({4, 6}, 2), c = rand({4, 2}, 3);
  expect_same_on_gpu("reshape+transpose",
                     [](auto& x) {
                       return contiguous(transpose(reshape(x[0], {3, 8}), 0, 1));
                     },
                     {a});
  expect_same_on_gpu("narrow", [](auto& x) { return narrow(x[0], 1, 2, 3); }, {a});
  expect_same_on_gpu("narrow of a transpose",
                     [](auto& x) { return narrow(transpose(x[0], 0, 1), 0, 1, 2); }, {a});
  expect_same_on_gpu("cat dim 1", [](auto& x) { return cat({x[0], x[1], x[2]}, 1); }, {a, b, c});
  expect_same_on_gpu("stack", [](auto& x) { return stack({x[0], x[1]}, 1); }, {a, b});
  const std::vector<int64_t> ids = {3, 0, 3, 9,
                                    1, 3, 0, 7};  // repeats: the scatter-add must sum them
  expect_same_on_gpu("index_select", [&](auto& x) { return index_select(x[0], ids); },
                     {rand({10, 5}, 4)});
  const std::vector<int64_t> cols = {2, 0, 5, 5};
  expect_same_on_gpu("gather_rows", [&](auto& x) { return gather_rows(x[0], cols); }, {a});
  expect_same_on_gpu("nll_loss", [&](auto& x) { return nll_loss(log_softmax(x[0], 1), cols); },
                     {a});
}

// Every GPU step path against the CPU: the persistent loop (Auto's first choice: units split over
// the multiprocessors; on a 132-SM GPU a last block with fewer units at H = 320 in the forward and
// H = 9, 620 in BPTT; scalar loads at H = 7, 9; BPTT's dG staged in one or two (B = 12, H = 960)
// column chunks; B = 33 falls back to the step kernels), the staged kernels (Staged forces the
// backward too) (batch passes of 16 rows: B = 3, 12, 17, 20, 32; float4 loads when H % 4 == 0,
// scalar loads for H = 7 and 9; a last block, and in the backward a last warp, with units past H;
// past the 48 KB of shared memory a kernel gets unasked: the forward at B = 16, H = 1024 (64 KB),
// the backward at B = 12, H = 320 (60 KB), while B = 16, H = 1024 is too big for the staged
// backward and takes cuBLAS), the per-unit kernels (batch buckets of 8, 16 and 32 rows) and cuBLAS
// + gate kernel (always for B = 33 > 32).
TEST(CudaOps, FusedLstmMatchesTheCpu) {
  MG_SKIP_WITHOUT_CUDA();
  const std::pair<CudaLstmSteps, const char*> paths[] = {{CudaLstmSteps::Auto, "auto"},
                                                         {CudaLstmSteps::Persistent, "persistent"},
                                                         {CudaLstmSteps::Staged, "staged"},
                                                         {CudaLstmSteps::PerUnit, "per-unit"},
                                                         {CudaLstmSteps::Gemm, "cuBLAS"}};
  for (const auto& [path, name] : paths)
    for (const auto& [T, B, in, H] : std::vector<std::array<int64_t, 4>>{{7, 3, 5, 8},
                                                                         {4, 5, 3, 7},
                                                                         {3, 33, 4, 8},
                                                                         {5, 20, 16, 64},
                                                                         {3, 12, 8, 12},
                                                                         {3, 17, 4, 9},
                                                                         {2, 32, 6, 16},
                                                                         {2, 16, 8, 1024},
                                                                         {2, 12, 8, 320},
                                                                         {4, 12, 8, 960},
                                                                         {3, 20, 8, 400},
                                                                         {3, 10, 6, 620}}) {
      cuda_lstm_set_steps(path);
      auto f = [&, T = T, B = B, H = H](auto& v) {
        const auto [y, state] = lstm_fused(v[0], {v[1], v[2]}, {v[3], v[4], v[5], v[6]});
        return cat({reshape(y, {T * B, H}), state.c}, 0);  // every h_t and c_T
      };
      const float k = H > 64 ? 0.05f : 0.4f;  // pre-activations of order 1 at every H
      expect_same_on_gpu(
          std::string(name) + " steps T=" + std::to_string(T) + " B=" + std::to_string(B) +
              " H=" + std::to_string(H),
          f,
          {rand({T, B, in}, 1), rand({B, H}, 2, -0.5f, 0.5f), rand({B, H}, 3, -0.5f, 0.5f),
           rand({4 * H, in}, 4, -k, k), rand({4 * H, H}, 5, -k, k), rand({4 * H}, 6, -k, k),
           rand({4 * H}, 7, -k, k)},
          1e-5, 1e-6);
      cuda_lstm_set_steps(CudaLstmSteps::Auto);
    }
}

TEST(CudaOps, FusedHeadLossMatchesTheCpuForEveryKindAndPath) {
  MG_SKIP_WITHOUT_CUDA();
  const int64_t N = 6, E = 8;
  // V = 300: rows staged in shared memory with float4 loads; 301: staged element by element; the
  // longest this GPU stages plus 4 (58,016 on an H100): read twice from global memory.
  const int64_t too_long = (cuda_head_row_stats_staged_max_v() / 4 + 1) * 4;
  for (int64_t V : {int64_t{300}, int64_t{301}, too_long})
    for (int64_t K : {1, 3})
      for (bool sig : {false, true})
        for (bool stream : {false, true}) {
          FusedLossOptions options;
          if (stream) {  // ragged chunks of 5 rows
            options.keep_logits_floats = 0;
            options.stream_chunk_rows = 5;
          }
          const std::vector<int64_t> targets = {0, V - 1, 17, 17, 150, 3};  // a row's last word
          std::vector<Tensor> in = {rand({N * K, E}, 1), rand({V, E}, 2, -0.5f, 0.5f),
                                    rand({V}, 3)};
          if (K > 1) in.push_back(log_softmax(rand({N, K}, 4), 1));
          expect_same_on_gpu(
              "fused_mixture_nll V=" + std::to_string(V) + " K=" + std::to_string(K) +
                  (sig ? " sig" : "") + (stream ? " streamed" : ""),
              [&](auto& v) {
                return fused_mixture_nll(v[0], v[1], v[2], K > 1 ? v[3] : Tensor(), targets, K, sig,
                                         options);
              },
              in, 1e-5, 1e-6);
        }
}

// ---- determinism ----

TEST(CudaOps, DropoutMasksAreTheCpusBitForBit) {
  MG_SKIP_WITHOUT_CUDA();
  for (const Shape& shape : std::vector<Shape>{{1}, {7}, {33, 17}, {1, 20, 400}, {10000, 1}}) {
    for (uint64_t start : {0ull, 3ull, 1ull << 34}) {
      Generator cpu(11), gpu(11);
      cpu.offset = gpu.offset = start;
      const Tensor m_cpu = dropout_mask(shape, 0.3f, cpu),
                   m_gpu = dropout_mask(shape, 0.3f, gpu, Device::CUDA);
      EXPECT_EQ(mgtest::bits_of(m_gpu.cpu()), mgtest::bits_of(m_cpu))
          << shape_str(shape) << " from " << start;
      EXPECT_EQ(cpu.offset, gpu.offset);
    }
  }
}

TEST(CudaOps, ReductionsAndEmbeddingBackwardGiveTheSameBitsEveryRun) {
  MG_SKIP_WITHOUT_CUDA();
  const Tensor x = rand({1 << 20}, 1).cuda(), table = rand({50, 16}, 2).cuda();
  std::vector<int64_t> ids(4000);
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<int64_t>((i * 7919) % 13);  // heavy repeats
  auto run = [&] {
    Tensor t = copy_contiguous(table).requires_grad_();
    sum(mul(index_select(t, ids), index_select(t, ids))).backward();
    return std::make_pair(mgtest::bits_of(sum(x).cpu()), mgtest::bits_of(t.grad().cpu()));
  };
  const auto first = run();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(run(), first);
}
