// One case of tests/fixtures/ops.txt (written by tools/gen_fixtures.py): its differentiable inputs
// as fresh leaves, and the check of an op's output and input gradients against PyTorch's. Shared by
// tests/autograd/test_ops_fixtures.cpp (arithmetic, unary, matmul, reductions) and
// tests/autograd/test_ops_fixtures_layout.cpp (softmax, shape and layout, indexing, loss).
//
// Tolerances: the reference is float64 on the same float32 inputs, so the error measured is
// mosgrad's float32 arithmetic alone; rtol 1e-5 is ~80 float32 ulps. The atol covers results that
// cancel to near 0 (a sum of O(1) terms keeps an absolute error of a few ulps of the terms).
#pragma once

#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace mgtest {

constexpr double kOpsRtol = 1e-5;
constexpr double kOpsAtol = 1e-6;

class OpsCase {
 public:
  OpsCase(const std::string& name, std::initializer_list<const char*> inputs);
  const mg::Tensor& operator[](const std::string& key) const;  // the leaf NAME.<key>
  std::vector<int64_t> ints(const std::string& key) const;     // indices/targets NAME.<key>
  // Compares out with NAME.out, backpropagates sum(out * NAME.R) and compares every input's
  // gradient with NAME.grad.<key>.
  void check(const mg::Tensor& out, double rtol = kOpsRtol, double atol = kOpsAtol) const;

 private:
  std::string name_;
  std::vector<std::string> keys_;
  std::map<std::string, mg::Tensor> leaves_;
};

}  // namespace mgtest
