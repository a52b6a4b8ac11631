#include "tensor/tensor.h"

#include <cmath>
#include <cstring>

#include "cuda/backend.h"
#include "tensor/allocator.h"
#include "tensor/parallel.h"

namespace mg {

const char* device_name(Device device) {
  return device == Device::CPU ? "cpu" : "cuda";
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::CPU;
  if (name == "cuda") return Device::CUDA;
  throw std::invalid_argument("unknown device '" + name + "': choose cpu or cuda");
}

void require_cuda() {
  std::string why;
  if (!cuda_is_available(&why)) throw std::runtime_error("--device cuda: " + why);
}

Storage::Storage(size_t n, Device where)
    : data(where == Device::CPU ? allocate_floats(n)
                                : static_cast<float*>(cuda_allocate_bytes(n * sizeof(float)))),
      size(n),
      device(where) {}

Storage::~Storage() {
  if (device == Device::CPU)
    release_floats(data, size);
  else
    cuda_release_bytes(data, size * sizeof(float));
}

CudaLayout cuda_layout(const Tensor& t) {
  if (t.dim() > kCudaMaxDims)
    throw ShapeError("cuda: tensors of rank " + std::to_string(t.dim()) + " > " +
                     std::to_string(kCudaMaxDims) + " are not supported");
  CudaLayout l;
  l.rank = t.dim();
  for (int d = 0; d < l.rank; ++d) l.shape[d] = t.shape()[d], l.strides[d] = t.strides()[d];
  l.offset = t.impl().offset;
  return l;
}

TensorImpl& Tensor::impl() const {
  if (!impl_)
    throw std::logic_error("use of an undefined Tensor (default-constructed or moved-from)");
  return *impl_;
}

static Tensor make_contiguous(const Shape& shape, Device device = Device::CPU) {
  for (int64_t s : shape)
    if (s < 0) throw ShapeError("tensor: negative size in shape " + shape_str(shape));
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(static_cast<size_t>(numel_of(shape)), device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  return Tensor(std::move(impl));
}

Tensor Tensor::empty(const Shape& shape, Device device) {
  return make_contiguous(shape, device);
}
Tensor Tensor::zeros(const Shape& shape, Device device) {
  return full(shape, 0.0f, device);
}
Tensor Tensor::ones(const Shape& shape, Device device) {
  return full(shape, 1.0f, device);
}

Tensor Tensor::full(const Shape& shape, float value, Device device) {
  Tensor t = make_contiguous(shape, device);
  if (device == Device::CUDA) {
    cuda_fill(t.data_ptr(), t.numel(), value);
    return t;
  }
  float* p = t.data();
  parallel_for(t.numel(), 1 << 16, [&](int64_t b, int64_t e) { std::fill(p + b, p + e, value); });
  return t;
}

Tensor Tensor::scalar(float value) {
  return full({}, value);
}

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
      out[i] = mean + std * static_cast<float>(
                                philox_normal(gen.seed, first + 2 * static_cast<uint64_t>(i)));
    }
  });
  return t;
}

int64_t Tensor::size(int d) const {
  return impl().shape[normalize_dim("size", d, dim())];
}

bool Tensor::is_contiguous() const {
  const TensorImpl& t = impl();
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.strides[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

static void check_on_cpu(const Tensor& t) {
  if (t.device() != Device::CPU)
    throw std::logic_error("data(): tensor" +
                           (t.name().empty() ? std::string() : " '" + t.name() + "'") + " " +
                           shape_str(t.shape()) +
                           " lives on cuda; a host loop cannot read it (use .cpu(), or "
                           "data_ptr() in GPU code)");
}

float* Tensor::data() {
  check_on_cpu(*this);
  return impl().storage->data + impl().offset;
}
const float* Tensor::data() const {
  check_on_cpu(*this);
  return impl().storage->data + impl().offset;
}

float Tensor::item() const {
  if (numel() != 1)
    throw ShapeError("item: needs a tensor with exactly one element, got " + shape_str(shape()));
  if (is_cuda()) {
    float v;
    cuda_copy_to_host(&v, data_ptr(), sizeof v);
    return v;
  }
  return data()[0];
}

float Tensor::at(std::initializer_list<int64_t> index) const {
  if (is_cuda()) return cpu().at(index);
  if (static_cast<int>(index.size()) != dim())
    throw ShapeError("at: " + std::to_string(index.size()) + " indices for a tensor of shape " +
                     shape_str(shape()));
  int64_t pos = impl().offset, d = 0;
  for (int64_t i : index) {
    if (i < 0 || i >= shape()[d])
      throw ShapeError("at: index " + std::to_string(i) + " out of range in dim " +
                       std::to_string(d) + " of " + shape_str(shape()));
    pos += i * strides()[d++];
  }
  return impl().storage->data[pos];
}

std::vector<float> Tensor::to_vector() const {
  if (is_cuda()) return cpu().to_vector();
  Tensor c = is_contiguous() ? *this : copy_contiguous(*this);
  return std::vector<float>(c.data(), c.data() + c.numel());
}

Tensor Tensor::to(Device device) const {
  if (device == this->device()) return *this;
  if (device == Device::CUDA) require_cuda();
  const Tensor src = is_contiguous() ? *this : copy_contiguous(*this);  // on the source device
  Tensor out = make_contiguous(shape(), device);
  const size_t bytes = static_cast<size_t>(numel()) * sizeof(float);
  if (device == Device::CUDA)
    cuda_copy_to_device(out.data_ptr(), src.data_ptr(), bytes);
  else
    cuda_copy_to_host(out.data_ptr(), src.data_ptr(), bytes);
  out.impl().name = name();
  return out;
}

void copy_into(Tensor& dst, const Tensor& src) {
  if (dst.numel() != src.numel() || !dst.is_contiguous())
    throw ShapeError("copy_into: " + shape_str(src.shape()) + " into " + shape_str(dst.shape()) +
                     " (needs the same number of elements and a contiguous destination)");
  const Tensor s = src.to(dst.device());
  const Tensor c = s.is_contiguous() ? s : copy_contiguous(s);
  const size_t bytes = static_cast<size_t>(dst.numel()) * sizeof(float);
  if (dst.is_cuda())
    cuda_copy_on_device(dst.data_ptr(), c.data_ptr(), bytes);
  else if (bytes)
    std::memcpy(dst.data(), c.data(), bytes);
}

void copy_into(Tensor& dst, const std::vector<float>& host_values) {
  if (static_cast<int64_t>(host_values.size()) != dst.numel() || !dst.is_contiguous())
    throw ShapeError("copy_into: " + std::to_string(host_values.size()) + " values into " +
                     shape_str(dst.shape()));
  const size_t bytes = host_values.size() * sizeof(float);
  if (dst.is_cuda())
    cuda_copy_to_device(dst.data_ptr(), host_values.data(), bytes);
  else if (bytes)
    std::memcpy(dst.data(), host_values.data(), bytes);
}

Tensor Tensor::grad() const {
  return impl().grad ? Tensor(impl().grad) : Tensor();
}
void Tensor::zero_grad() {
  impl().grad.reset();
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

void check_rank(const std::string& op, const Tensor& t, int rank, const char* arg) {
  if (t.dim() != rank)
    throw ShapeError(op + ": " + arg + " must be " + std::to_string(rank) + "-D, got " +
                     shape_str(t.shape()));
}

void check_same_device(const std::string& op, const std::vector<Tensor>& tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    if (!t.defined()) continue;
    if (!first)
      first = &t;
    else if (t.device() != first->device())
      throw std::invalid_argument(
          op + ": inputs are on different devices: " + device_name(first->device()) + " and " +
          device_name(t.device()) + " (move them with .to(), or the model with --device)");
  }
}

void check_same_shape(const std::string& op, const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape())
    throw ShapeError(op + ": shapes differ: " + shape_str(a.shape()) + " vs " +
                     shape_str(b.shape()));
}

}  // namespace mg
