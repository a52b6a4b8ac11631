// Shared by the test files: tensor comparison macros and the PyTorch fixture reader.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tensor/compare.h"
#include "tensor/tensor.h"

// Fails with the name, shape, first bad index, both values and the max difference.
#define EXPECT_TENSOR_NEAR(actual, expected, rtol, atol)                                  \
  do {                                                                                     \
    const std::string mg_report_ = mg::compare_tensors(#actual, (actual), (expected), (rtol), (atol)); \
    EXPECT_TRUE(mg_report_.empty()) << mg_report_;                                         \
  } while (0)

#define EXPECT_GRADCHECK(name, fn, inputs)                              \
  do {                                                                  \
    const mg::GradcheckResult mg_gc_ = mg::gradcheck((name), (fn), (inputs)); \
    EXPECT_TRUE(mg_gc_.ok) << mg_gc_.message;                           \
  } while (0)

namespace mgtest {

// tests/fixtures/<file> in the source tree.
std::string fixture_path(const std::string& file);

// A fixture file written by tools/gen_fixtures.py: one tensor per line,
//   name rank d0 d1 ... : v0 v1 v2 ...
// ('#' lines are comments). Integers (token ids, targets) are stored as exact floats.
class Fixtures {
 public:
  explicit Fixtures(const std::string& file);
  const mg::Tensor& get(const std::string& name) const;  // throws naming the file when missing
  std::vector<int64_t> ints(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // A copy of the named tensor as a fresh leaf, optionally requiring grad.
  mg::Tensor leaf(const std::string& name, bool requires_grad = true) const;

 private:
  std::string file_;
  std::map<std::string, mg::Tensor> tensors_;
};

}  // namespace mgtest
