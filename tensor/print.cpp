// numpy/PyTorch-style printing: nested brackets, long dims shortened with "...".
#include <cstdio>
#include <iostream>
#include <sstream>

#include "tensor/tensor.h"

namespace mg {

namespace {

GradFnNamer g_grad_fn_namer = nullptr;  // set by autograd/node.cpp

void print_dim(std::ostringstream& os, const Tensor& t, int d, int64_t pos, int max_per_dim,
               int indent) {
  const float* base = t.impl().storage->data;
  const int64_t n = t.shape()[d];
  const bool cut = n > max_per_dim;
  const int64_t head = cut ? max_per_dim / 2 : n;
  os << '[';
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == head) {
      os << (d == t.dim() - 1 ? "..., " : "...,\n" + std::string(indent + 1, ' '));
      i = n - max_per_dim / 2;
    }
    const int64_t p = pos + i * t.strides()[d];
    if (d == t.dim() - 1) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4g", base[p]);
      os << buf;
    } else {
      print_dim(os, t, d + 1, p, max_per_dim, indent + 1);
    }
    if (i + 1 < n) os << (d == t.dim() - 1 ? ", " : ",\n" + std::string(indent + 1, ' '));
  }
  os << ']';
}

}  // namespace

void set_grad_fn_namer(GradFnNamer namer) {
  g_grad_fn_namer = namer;
}

std::string Tensor::debug_string(int max_per_dim) const {
  if (!defined()) return "Tensor(undefined)";
  if (is_cuda()) {  // the numbers of a host copy (gdb's mg_print works on GPU tensors too)
    Tensor host = cpu();
    host.impl().requires_grad = requires_grad(), host.impl().grad_fn = grad_fn();
    std::string s = host.debug_string(max_per_dim);
    return s.insert(s.size() - 1, ", device=cuda");
  }
  std::ostringstream os;
  os << "tensor(";
  if (dim() == 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6g", impl().storage->data[impl().offset]);
    os << buf;
  } else if (numel() == 0) {
    os << "[]";
  } else {
    print_dim(os, *this, 0, impl().offset, std::max(2, max_per_dim), 7);
  }
  os << ", shape=" << shape_str(shape());
  if (!name().empty()) os << ", name=" << name();
  if (grad_fn())
    os << ", grad_fn=" << (g_grad_fn_namer ? g_grad_fn_namer(*grad_fn()) : "?");
  else if (requires_grad())
    os << ", requires_grad";
  os << ')';
  return os.str();
}

}  // namespace mg

extern "C" void mg_print(const mg::Tensor* t) {
  std::cerr << t->debug_string() << std::endl;
}
