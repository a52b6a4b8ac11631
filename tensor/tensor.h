// The tensor: a float32, row-major, N-d view onto shared storage, plus the autograd fields.
//
// A Tensor is a cheap handle (a shared_ptr to a TensorImpl). Copying a Tensor copies the handle,
// not the numbers. Views (reshape, narrow, transpose) share storage with different
// shape/strides/offset; `contiguous()` copies only when the layout is not already row-major.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tensor/philox.h"
#include "tensor/shape.h"

namespace mg {

// Where the numbers live. CUDA tensors exist only in a `make CUDA=1` build on a machine with a GPU;
// every op runs where its inputs are (cuda/backend.h) and refuses inputs on two devices.
enum class Device { CPU, CUDA };
const char* device_name(Device device);
Device parse_device(const std::string& name);  // "cpu" | "cuda"; throws naming the choices
// Throws unless CUDA can be used here: "built without CUDA: rebuild with make CUDA=1", or the
// driver's reason when there is no GPU.
void require_cuda();

// The numbers themselves, shared by a tensor and all its views. Memory comes from the caching
// allocator (tensor/allocator.h) and is not initialised.
struct Storage {
  float* data = nullptr;
  size_t size = 0;  // in floats
  Device device = Device::CPU;
  explicit Storage(size_t n, Device where = Device::CPU);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;
};

struct Node;  // autograd/node.h: the op that produced a tensor.
class Tensor;

struct TensorImpl {
  std::shared_ptr<Storage> storage;
  int64_t offset = 0;  // index of element [0,...,0] in storage
  Shape shape;
  Shape strides;  // in elements

  bool requires_grad = false;
  std::shared_ptr<TensorImpl> grad;  // accumulated d(loss)/d(this) for leaves; same shape
  std::shared_ptr<Node> grad_fn;     // null for leaves and for tensors made without grad
  std::string name;                  // optional, e.g. "rnns.0.weight_hh"; shown in graph dumps
};

class Tensor {
 public:
  Tensor() = default;  // an "undefined" tensor (like at::Tensor()); defined() is false
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- creation (contiguous, requires_grad = false; CPU unless a device is given) ----
  static Tensor empty(const Shape& shape, Device device = Device::CPU);  // uninitialised numbers
  static Tensor zeros(const Shape& shape, Device device = Device::CPU);
  static Tensor ones(const Shape& shape, Device device = Device::CPU);
  static Tensor full(const Shape& shape, float value, Device device = Device::CPU);
  static Tensor scalar(float value);  // rank 0
  static Tensor arange(int64_t n);    // [n]: 0, 1, ..., n-1
  static Tensor from_vector(const std::vector<float>& values, const Shape& shape);
  // Uniform in [low, high) and normal(mean, std) from the counter-based generator: element i gets
  // the draw at position gen.offset + i (normal uses two positions per element).
  static Tensor uniform(const Shape& shape, float low, float high, Generator& gen);
  static Tensor normal(const Shape& shape, float mean, float std, Generator& gen);

  // ---- layout ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int dim() const { return static_cast<int>(impl().shape.size()); }
  int64_t size(int d) const;  // negative d counts from the end
  int64_t numel() const { return numel_of(impl().shape); }
  bool is_contiguous() const;
  Device device() const { return impl().storage->device; }

  // Raw access to the first element. Only meaningful for reading/writing a contiguous tensor
  // in index order; kernels call contiguous() first. CPU tensors only: on a CUDA tensor it throws
  // (a host loop over a device pointer would crash), use data_ptr() in GPU code.
  float* data();
  const float* data() const;
  // The first element's address on whichever device holds it (a device pointer for CUDA).
  float* data_ptr() const { return impl().storage->data + impl().offset; }
  // These three copy from the GPU first when the tensor lives there.
  float item() const;                                    // the value of a 1-element tensor
  float at(std::initializer_list<int64_t> index) const;  // strided read, bounds-checked
  std::vector<float> to_vector() const;                  // values in row-major order

  // ---- devices ----
  // A contiguous copy on `device`, cut from the graph (a new leaf, requires_grad false); the
  // tensor itself when it is already there.
  Tensor to(Device device) const;
  Tensor cpu() const { return to(Device::CPU); }
  Tensor cuda() const { return to(Device::CUDA); }
  bool is_cuda() const { return device() == Device::CUDA; }

  // ---- autograd ----
  // requires_grad_ and backward need the graph, so they are defined in autograd/tensor_autograd.cpp
  // (tensor/ includes nothing of autograd/); the rest are plain field accesses.
  bool requires_grad() const { return impl().requires_grad; }
  Tensor& requires_grad_(bool on = true);
  Tensor grad() const;  // undefined until a backward reaches this leaf
  void zero_grad();     // drops the accumulated gradient
  const std::shared_ptr<Node>& grad_fn() const { return impl().grad_fn; }
  bool is_leaf() const { return impl().grad_fn == nullptr; }
  // Backpropagates from this scalar (or from this tensor with an explicit output gradient).
  void backward() const;
  void backward(const Tensor& grad_output) const;
  // Same numbers (shared storage), cut from the graph: the truncation point of BPTT.
  Tensor detach() const;

  const std::string& name() const { return impl().name; }
  Tensor& set_name(const std::string& name);

  // ---- printing (numpy style). From gdb: `call mg_print(&t)`, or `p t.debug_string(6)`: gdb does
  // not fill in default arguments, so `p t.debug_string()` fails ----
  std::string debug_string(int max_per_dim = 6) const;

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool same_as(const Tensor& other) const { return impl_ == other.impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// A tensor whose layout is a view of `base` (shares storage), with no autograd fields set.
Tensor make_view(const Tensor& base, const Shape& shape, const Shape& strides, int64_t offset);

// Copies a strided tensor into a fresh contiguous one (no autograd; the op `contiguous` wraps it).
Tensor copy_contiguous(const Tensor& t);
// t itself when its data is already row-major and contiguous, else copy_contiguous(t): what a
// kernel reads through a raw pointer.
inline Tensor contiguous_data(const Tensor& t) {
  return t.is_contiguous() ? t : copy_contiguous(t);
}
// Rows [i0, i1) of the transpose of a matrix stored as C rows of ld floats:
// dst[i * C + j] = src[j * ld + i] (dst [.., C], row-major). Tiled, with 8 x 8 AVX2 blocks where the
// CPU has them; copy_contiguous of a transposed view runs it in parallel.
void transpose_rows(const float* src, int64_t ld, int64_t C, int64_t i0, int64_t i1, float* dst);

// Throws ShapeError "op: <what> expects ..., got [a]" when the rank differs.
void check_rank(const std::string& op, const Tensor& t, int rank, const char* arg = "input");
void check_same_shape(const std::string& op, const Tensor& a, const Tensor& b);
// Throws "op: inputs are on different devices: cpu and cuda" (undefined tensors are ignored).
void check_same_device(const std::string& op, const std::vector<Tensor>& tensors);

// dst's numbers = src's (same number of elements, either device, any layout of src; dst
// contiguous). No autograd: loading weights, optimizer state, checkpoints.
void copy_into(Tensor& dst, const Tensor& src);
void copy_into(Tensor& dst, const std::vector<float>& host_values);

// t's shape, strides and offset for a CUDA kernel (cuda/backend.h; rank <= kCudaMaxDims).
struct CudaLayout;
CudaLayout cuda_layout(const Tensor& t);

// How debug_string names a tensor's grad_fn ("grad_fn=matmul"). Node's fields are out of tensor/'s
// sight, so autograd/node.cpp installs its node_op here at start-up; node.cpp is linked into every
// program that can make a Node, so any tensor with a grad_fn prints its op's name.
using GradFnNamer = const std::string& (*)(const Node&);
void set_grad_fn_namer(GradFnNamer namer);

}  // namespace mg

// For gdb: `call mg_print(&t)` prints t to stderr.
extern "C" void mg_print(const mg::Tensor* t);
