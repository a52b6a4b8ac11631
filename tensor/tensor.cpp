#include "tensor/tensor.h"

#include <cmath>
#include <cstring>

#include "autograd/engine.h"
#include "tensor/allocator.h"
#include "tensor/parallel.h"

namespace mg {

const char* device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

Storage::Storage(size_t n) : data(allocate_floats(n)), size(n) {}
Storage::~Storage() { release_floats(data, size); }

TensorImpl& Tensor::impl() const {
  if (!impl_) throw std::logic_error("use of an undefined Tensor (default-constructed or moved-from)");
  return *impl_;
}

static Tensor make_contiguous(const Shape& shape) {
  for (int64_t s : shape)
    if (s < 0) throw ShapeError("tensor: negative size in shape " + shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(numel_of(shape)));
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape) { return make_contiguous(shape); }
Tensor Tensor::zeros(const Shape& shape) { return full(shape, 0.0f); }
Tensor Tensor::ones(const Shape& shape) { return full(shape, 1.0f); }

Tensor Tensor::full(const Shape& shape, float value) {
  Tensor t = make_contiguous(shape);
  float* p = t.data();
  parallel_for(t.numel(), 1 << 16, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, value); });
  return t;
}

Tensor Tensor::scalar(float value) { return full({}, value); }

Tensor Tensor::arange(int64_t n) {
  Tensor t = make_contiguous({n});
  for (int64_t i = 0; i < n; ++i) t.data()[i] = static_cast<float>(i);
  return t;
}

Tensor Tensor::from_vector(const std::vector<float>& values, const Shape& shape) {
  if (static_cast<int64_t>(values.size()) != numel_of(shape))
    throw ShapeError("from_vector: " + std::to_string(values.size()) +
                     " values cannot fill shape " + shape_str(shape));
  Tensor t = make_contiguous(shape);
  std::copy(values.begin(), values.end(), t.data());
  return t;
}

Tensor Tensor::uniform(const Shape& shape, float low, float high, Generator& gen) {
  Tensor t = make_contiguous(shape);
  const int64_t n = t.numel();
  const uint64_t first = gen.advance(static_cast<uint64_t>(n));
  float* out = t.data();
  parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    philox_uniforms(gen.seed, first + static_cast<uint64_t>(begin), end - begin, out + begin);
    for (int64_t i = begin; i < end; ++i) out[i] = low + (high - low) * out[i];
  });
  return t;
}

Tensor Tensor::normal(const Shape& shape, float mean, float std, Generator& gen) {
  Tensor t = make_contiguous(shape);
  const int64_t n = t.numel();
  const uint64_t first = gen.advance(2 * static_cast<uint64_t>(n));
  float* out = t.data();
  parallel_for(n, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      // Box-Muller; 1 - u keeps the log argument in (0, 1].
      const double u1 = 1.0 - philox_uniform(gen.seed, first + 2 * static_cast<uint64_t>(i));
      const double u2 = philox_uniform(gen.seed, first + 2 * static_cast<uint64_t>(i) + 1);
      out[i] = mean + std * static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2));
    }
  });
  return t;
}

int64_t Tensor::size(int d) const { return impl().shape[normalize_dim("size", d, dim())]; }

bool Tensor::is_contiguous() const {
  const TensorImpl& t = impl();
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

float* Tensor::data() { return impl().storage->data + impl().offset; }
const float* Tensor::data() const { return impl().storage->data + impl().offset; }

float Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: needs a tensor with exactly one element, got " + shape_str(shape()));
  return data()[0];
}

float Tensor::at(std::initializer_list<int64_t> index) const {
  if (static_cast<int>(index.size()) != dim())
    throw ShapeError("at: " + std::to_string(index.size()) + " indices for a tensor of shape " +
                     shape_str(shape()));
  int64_t pos = impl().offset, d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape()[d])
      throw ShapeError("at: index " + std::to_string(i) + " out of range in dim " + std::to_string(d) +
                       " of " + shape_str(shape()));
    pos += i * strides()[d++];
  }
  return impl().storage->data[pos];
}

std::vector<float> Tensor::to_vector() const {
  Tensor c = is_contiguous() ? *this : copy_contiguous(*this);
  return std::vector<float>(c.data(), c.data() + c.numel());
}

Tensor& Tensor::requires_grad_(bool on) {
  if (on && !is_leaf())
    throw std::logic_error("requires_grad_: only leaves (parameters, inputs) can be marked; "
                           "this tensor was computed by '" + node_op(*impl().grad_fn) + "'");
  impl().requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl().grad ? Tensor(impl().grad) : Tensor(); }
void Tensor::zero_grad() { impl().grad.reset(); }

void Tensor::backward() const {
  if (numel() != 1)
    throw ShapeError("backward: needs a scalar loss (or an explicit gradient), got shape " +
                     shape_str(shape()));
  run_backward(*this, Tensor::ones(shape()));
}

void Tensor::backward(const Tensor& grad_output) const {
  check_same_shape("backward", *this, grad_output);
  run_backward(*this, grad_output);
}

Tensor Tensor::detach() const {
  Tensor v = make_view(*this, shape(), strides(), impl().offset);
  v.impl().name = impl().name;
  return v;
}

Tensor& Tensor::set_name(const std::string& name) {
  impl().name = name;
  return *this;
}

Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = base.impl().storage;
  impl->shape = shape;
  impl->strides = strides;
  impl->offset = offset;
  return Tensor(std::move(impl));
}

namespace {

constexpr int64_t kTransposeTile = 32;

// dst[i, j] = src[j * ld + i] for rows i in [i0, i1) of dst [.., C], in kTransposeTile squares.
// Sizes by value and restrict pointers: through a lambda's by-reference captures GCC reloaded them
// after every store, and the copy ran 6x slower.
void transpose_rows(const float* __restrict src, int64_t ld, int64_t C, int64_t i0, int64_t i1,
                    float* __restrict dst) {
  for (int64_t ib = i0; ib < i1; ib += kTransposeTile) {
    const int64_t ie = std::min(i1, ib + kTransposeTile);
    for (int64_t jb = 0; jb < C; jb += kTransposeTile) {
      const int64_t je = std::min(C, jb + kTransposeTile);
      for (int64_t i = ib; i < ie; ++i)
        for (int64_t j = jb; j < je; ++j) dst[i * C + j] = src[j * ld + i];
    }
  }
}

}  // namespace

Tensor copy_contiguous(const Tensor& t) {
  Tensor out = make_contiguous(t.shape());
  const int rank = t.dim();
  const int64_t n = out.numel();
  if (n == 0) return out;
  const float* src = t.impl().storage->data;
  float* dst = out.data();
  if (rank == 2 && t.strides()[0] == 1 && t.shape()[0] > 1) {
    // A transposed matrix (the view's rows are the storage's columns). Row by row, each output row
    // would read a whole column of the source, one cache line per element; tiles read and write
    // whole lines instead (the fused LSTM's W_hh^T and the head's d W are 0.6M-2M floats).
    const int64_t R = t.shape()[0], C = t.shape()[1];
    parallel_for((R + kTransposeTile - 1) / kTransposeTile, 4, [&](int64_t b0, int64_t b1) {
      transpose_rows(src + t.impl().offset, t.strides()[1], C, b0 * kTransposeTile,
                     std::min(R, b1 * kTransposeTile), dst);
    });
    return out;
  }
  // Walk the output in row-major order; the innermost dim is copied with its own stride.
  const int64_t inner = rank ? t.shape()[rank - 1] : 1;
  const int64_t inner_stride = rank ? t.strides()[rank - 1] : 1;
  const int64_t rows = n / inner;
  parallel_for(rows, 64, [&](int64_t begin, int64_t end) {
    // Local copies of the captured sizes: the compiler may keep locals in registers across the
    // stores to dst, but not values it reaches through references.
    const int64_t in = inner, step = inner_stride;
    for (int64_t r = begin; r < end; ++r) {
      int64_t pos = t.impl().offset, rem = r;
      for (int d = rank - 2; d >= 0; --d) {
        pos += (rem % t.shape()[d]) * t.strides()[d];
        rem /= t.shape()[d];
      }
      const float* from = src + pos;
      float* to = dst + r * in;
      if (step == 1) std::copy(from, from + in, to);
      else for (int64_t i = 0; i < in; ++i) to[i] = from[i * step];
    }
  });
  return out;
}

void check_rank(const std::string& op, const Tensor& t, int rank, const char* arg) {
  if (t.dim() != rank)
    throw ShapeError(op + ": " + arg + " must be " + std::to_string(rank) + "-D, got " +
                     shape_str(t.shape()));
}

void check_same_shape(const std::string& op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ShapeError(op + ": shapes differ: " + shape_str(a.shape()) + " vs " + shape_str(b.shape()));
}

}  // namespace mg
