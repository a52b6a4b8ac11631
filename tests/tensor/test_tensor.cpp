// Tensor creation, views sharing storage, printing, the counter-based RNG and shape errors.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/ops.h"
#include "nn/dropout.h"
#include "tensor/parallel.h"
#include "tensor/shape.h"
#include "tests/test_util.h"

using namespace mg;

TEST(Tensor, CreationAndAccess) {
  EXPECT_EQ(Tensor::zeros({2, 3}).to_vector(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(Tensor::ones({4}).to_vector(), std::vector<float>(4, 1.0f));
  EXPECT_EQ(Tensor::full({2}, 2.5f).to_vector(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(Tensor::arange(4).to_vector(), (std::vector<float>{0, 1, 2, 3}));
  const Tensor s = Tensor::scalar(3.0f);
  EXPECT_EQ(s.dim(), 0);
  EXPECT_EQ(s.numel(), 1);
  EXPECT_FLOAT_EQ(s.item(), 3.0f);
  const Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_FLOAT_EQ(t.at({1, 2}), 6.0f);
  EXPECT_EQ(t.strides(), (Shape{3, 1}));
  EXPECT_TRUE(t.is_contiguous());
  const Tensor r4 = Tensor::zeros({2, 3, 4, 5});
  EXPECT_EQ(r4.numel(), 120);
  EXPECT_EQ(r4.size(-1), 5);
}

TEST(Tensor, ViewsShareStorage) {
  Tensor t = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor tt = transpose(t, 0, 1);  // [3,2] view
  EXPECT_FALSE(tt.is_contiguous());
  EXPECT_FLOAT_EQ(tt.at({2, 1}), 6.0f);
  Tensor row = narrow(t, 0, 1, 1);  // [1,3] view of the second row
  EXPECT_EQ(row.to_vector(), (std::vector<float>{4, 5, 6}));
  Tensor col = narrow(t, 1, 1, 1);  // [2,1] strided view
  EXPECT_EQ(col.to_vector(), (std::vector<float>{2, 5}));
  t.data()[4] = 50.0f;  // writes through to every view
  EXPECT_FLOAT_EQ(row.at({0, 1}), 50.0f);
  EXPECT_FLOAT_EQ(tt.at({1, 1}), 50.0f);
  Tensor flat = reshape(t, {6});
  EXPECT_EQ(flat.impl().storage, t.impl().storage);  // contiguous reshape is a view
  Tensor c = contiguous(tt);
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.impl().storage, t.impl().storage);  // a transposed view must be copied
  EXPECT_EQ(c.to_vector(), (std::vector<float>{1, 4, 2, 50, 3, 6}));
}

TEST(Tensor, TransposedCopiesMatchElementByElement) {
  // copy_contiguous copies a transposed matrix in 32 x 32 tiles: edges that are not whole tiles,
  // views with an offset and a row stride wider than the row, against at() element by element.
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 7},
                            {7, 1},
                            {8, 8},
                            {9, 9},
                            {32, 32},
                            {33, 65},
                            {100, 47},
                            {16, 200},
                            {201, 17}}) {
    const Tensor base = Tensor::arange((rows + 3) * (cols + 2));
    const Tensor m =
        narrow(narrow(reshape(base, {cols + 2, rows + 3}), 0, 1, cols), 1, 2, rows);  // [cols,rows]
    const Tensor t = transpose(m, 0, 1);  // [rows,cols], storage-column-major
    const Tensor c = copy_contiguous(t);
    ASSERT_TRUE(c.is_contiguous());
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        ASSERT_EQ(c.at({i, j}), m.at({j, i})) << rows << "x" << cols << " at " << i << "," << j;
  }
}

// transpose_rows on a range of rows that starts off the 8 x 8 blocks and the 32 x 32 tiles (as the
// fused head's d W asks for one thread's vocabulary rows), with the rows around it left alone.
TEST(Tensor, TransposeRowsWritesOnlyItsRows) {
  const int64_t C = 21, ld = 70, R = 67;  // src: C rows of ld floats, the first R of each used
  std::vector<float> src(static_cast<size_t>(C * ld)), dst(static_cast<size_t>(R * C), -1.0f);
  for (size_t k = 0; k < src.size(); ++k) src[k] = static_cast<float>(k);
  const int64_t i0 = 3, i1 = 58;
  transpose_rows(src.data(), ld, C, i0, i1, dst.data());
  for (int64_t i = 0; i < R; ++i)
    for (int64_t j = 0; j < C; ++j)
      ASSERT_EQ(dst[i * C + j], i >= i0 && i < i1 ? src[j * ld + i] : -1.0f) << i << "," << j;
}

TEST(Tensor, ReshapeInfersOneDim) {
  const Tensor t = Tensor::zeros({4, 6});
  EXPECT_EQ(reshape(t, {-1, 3}).shape(), (Shape{8, 3}));
  EXPECT_THROW(reshape(t, {5, -1}), ShapeError);
  EXPECT_THROW(reshape(t, {-1, -1}), ShapeError);
}

// Broadcasting aligns shapes from the right; a missing or size-1 dim takes the other's size (the
// course's task 1.1, checked on shapes and on add's forward values alone, before any backward).
TEST(Tensor, BroadcastShapesAlignFromTheRight) {
  EXPECT_EQ(broadcast_shapes("add", {2, 3}, {3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes("add", {3}, {2, 3}), (Shape{2, 3}));
  EXPECT_EQ(broadcast_shapes("add", {4, 1, 3}, {2, 1}), (Shape{4, 2, 3}));
  EXPECT_EQ(broadcast_shapes("add", {}, {5}), (Shape{5}));
  EXPECT_EQ(broadcast_shapes("add", {1, 1}, {}), (Shape{1, 1}));
  EXPECT_HAS(mgtest::error_of<ShapeError>([] {
               broadcast_shapes("mul", {2, 3}, {2});
             }),
             "mul: cannot broadcast [2,3] with [2]");
  EXPECT_HAS(mgtest::error_of<ShapeError>([] {
               broadcast_shapes("add", {4, 2}, {3, 1});
             }),
             "add: cannot broadcast [4,2] with [3,1]");
  EXPECT_EQ(broadcast_shapes("add", {4, 2}, {3, 1, 1}), (Shape{3, 4, 2}));
  const Tensor m = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(add(m, Tensor::from_vector({10, 20, 30}, {3})).to_vector(),
            (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ(add(m, Tensor::from_vector({100, 200}, {2, 1})).to_vector(),
            (std::vector<float>{101, 102, 103, 204, 205, 206}));
}

TEST(Tensor, ShapeErrorsNameTheOpAndBothShapes) {
  const Tensor a = Tensor::zeros({20, 400}), b = Tensor::zeros({200, 1600});
  try {
    matmul(a, b);
    FAIL() << "matmul accepted mismatched shapes";
  } catch (const ShapeError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[20,400]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("[200,1600]"), std::string::npos) << msg;
  }
  try {
    add(Tensor::zeros({3, 4}), Tensor::zeros({5}));
    FAIL() << "add accepted unbroadcastable shapes";
  } catch (const ShapeError& e) {
    EXPECT_NE(std::string(e.what()).find("add: cannot broadcast [3,4] with [5]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(index_select(Tensor::zeros({3, 2}), {0, 3}), ShapeError);
  EXPECT_THROW(nll_loss(Tensor::zeros({2, 3}), {0, 7}), ShapeError);
  EXPECT_THROW(Tensor::zeros({2}).item(), ShapeError);
  EXPECT_THROW(Tensor().shape(), std::logic_error);
}

TEST(Tensor, PrintingLikeNumpy) {
  const Tensor t = Tensor::from_vector({1, 2.5f, -3, 4}, {2, 2});
  EXPECT_EQ(t.debug_string(), "tensor([[1, 2.5],\n        [-3, 4]], shape=[2,2])");
  const std::string big = Tensor::arange(100).debug_string();
  EXPECT_NE(big.find("..."), std::string::npos) << big;
  EXPECT_NE(big.find("99"), std::string::npos) << big;
  EXPECT_EQ(big.find("50"), std::string::npos) << big;
  EXPECT_EQ(Tensor::scalar(2).debug_string(), "tensor(2, shape=[])");
}

TEST(Philox, LanesMatchOneAtATime) {
  // philox_uniforms computes eight blocks in SIMD lanes; every position must equal philox_uniform,
  // for starts and lengths that are and are not multiples of the 32-number group, and near 2^32
  // blocks (the counter's high word).
  for (uint64_t first : {uint64_t{0}, uint64_t{1}, uint64_t{31}, uint64_t{32}, uint64_t{1000003},
                         (uint64_t{1} << 34) - 37})
    for (int64_t n : {0, 1, 5, 32, 33, 100, 1027}) {
      std::vector<float> fast(static_cast<size_t>(n) + 1, -1.0f);
      philox_uniforms(77, first, n, fast.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(fast[i], philox_uniform(77, first + static_cast<uint64_t>(i)))
            << "first " << first << " i " << i;
      EXPECT_EQ(fast[n], -1.0f) << "wrote past the end";
    }
}

TEST(Philox, MatchesKnownAnswer) {
  // Known-answer test from the Random123 distribution (kat_vectors: philox4x32_10, all-ones input).
  const auto out =
      philox4x32({0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffffffffffull);
  EXPECT_EQ(out[0], 0x408f276du);
  EXPECT_EQ(out[1], 0x41c83b0eu);
  EXPECT_EQ(out[2], 0xa20bc7c6u);
  EXPECT_EQ(out[3], 0x6d5451fdu);
}

TEST(Philox, DrawsDependOnlyOnSeedAndPosition) {
  Generator g1(42), g2(42);
  const Tensor a = Tensor::uniform({1000}, 0, 1, g1);
  const Tensor b = Tensor::uniform({1000}, 0, 1, g2);
  EXPECT_EQ(a.to_vector(), b.to_vector());
  // Two draws of 500 continue the same stream as one draw of 1000.
  Generator g3(42);
  const Tensor first = Tensor::uniform({500}, 0, 1, g3), second = Tensor::uniform({500}, 0, 1, g3);
  EXPECT_EQ(first.to_vector()[499], a.to_vector()[499]);
  EXPECT_EQ(second.to_vector()[0], a.to_vector()[500]);
  // Independent of the thread count.
  const int threads = num_threads();
  set_num_threads(1);
  Generator g4(42);
  const Tensor one_thread = Tensor::uniform({100000}, -1, 1, g4);
  set_num_threads(2);
  Generator g5(42);
  const Tensor two_threads = Tensor::uniform({100000}, -1, 1, g5);
  set_num_threads(threads);
  EXPECT_EQ(one_thread.to_vector(), two_threads.to_vector());
}

TEST(Philox, UniformAndNormalMoments) {
  Generator gen(7);
  const std::vector<float> u = Tensor::uniform({200000}, -2, 2, gen).to_vector();
  const std::vector<float> n = Tensor::normal({200000}, 1.0f, 3.0f, gen).to_vector();
  double su = 0, sn = 0, sn2 = 0;
  float lo = 1e9f, hi = -1e9f;
  for (float v : u) {
    su += v;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  for (float v : n) {
    sn += v;
    sn2 += static_cast<double>(v) * v;
  }
  const double mu = sn / n.size(), var = sn2 / n.size() - mu * mu;
  EXPECT_NEAR(su / u.size(), 0.0, 0.02);
  EXPECT_GE(lo, -2.0f);
  EXPECT_LT(hi, 2.0f);
  EXPECT_NEAR(mu, 1.0, 0.03);
  EXPECT_NEAR(std::sqrt(var), 3.0, 0.03);
}

TEST(Tensor, DropoutMaskScalesAndIsSeeded) {
  Generator gen(3);
  const Tensor m = dropout_mask({100000}, 0.4f, gen);
  const std::vector<float> v = m.to_vector();
  int64_t kept = 0;
  double total = 0;
  for (float x : v) {
    EXPECT_TRUE(x == 0.0f || std::fabs(x - 1.0f / 0.6f) < 1e-6f) << x;
    kept += x != 0.0f;
    total += x;
  }
  EXPECT_NEAR(static_cast<double>(kept) / v.size(), 0.6, 0.01);
  EXPECT_NEAR(total / v.size(), 1.0, 0.02);  // inverted dropout keeps the expectation
  EXPECT_THROW(dropout_mask({3}, 1.0f, gen), std::invalid_argument);
}

TEST(Tensor, ReductionsAreThreadCountIndependent) {
  Generator gen(5);
  const Tensor x = Tensor::uniform({300, 1000}, -1, 1, gen);
  const int threads = num_threads();
  set_num_threads(1);
  const float s1 = sum(x).item();
  const std::vector<float> r1 = sum(x, 0).to_vector(), l1 = log_softmax(x, 1).to_vector();
  set_num_threads(2);
  const float s2 = sum(x).item();
  const std::vector<float> r2 = sum(x, 0).to_vector(), l2 = log_softmax(x, 1).to_vector();
  set_num_threads(threads);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(l1, l2);
}

TEST(Tensor, DropoutMaskIsDefinedByPosition) {
  // Drawn block-wise for speed, the mask must still be exactly "position i of the stream" (what a
  // CUDA kernel computes independently per element), also from an offset inside a Philox block.
  Generator gen(11);
  gen.advance(3);
  const std::vector<float> m = dropout_mask({1001}, 0.3f, gen).to_vector();
  for (size_t i = 0; i < m.size(); ++i) {
    const bool keep = philox_uniform(11, 3 + i) >= 0.3f;
    ASSERT_EQ(m[i], keep ? 1.0f / 0.7f : 0.0f) << "position " << i;
  }
  EXPECT_EQ(gen.offset, 1004u);
}
