// Shapes: the one small vocabulary every op uses to talk about sizes.
//
// Dimension legend used in comments across mosgrad:
//   B batch, T time, E embedding, H hidden, V vocabulary, K experts, N = T*B rows.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace mg {

using Shape = std::vector<int64_t>;

// "[20,400]" — the form used in every error message.
std::string shape_str(const Shape& shape);

// Product of the sizes; 1 for a rank-0 (scalar) shape.
int64_t numel_of(const Shape& shape);

// Row-major strides for a shape: the last dimension is contiguous.
Shape contiguous_strides(const Shape& shape);

// A contiguous tensor seen as [outer, n, inner] around dimension `dim` (n = size of dim): every
// reduction/softmax over `dim` is a loop over (outer, inner) pairs of length-n lines of stride
// inner.
struct DimSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline DimSplit split_at(const Shape& shape, int dim) {
  DimSplit s;
  for (int d = 0; d < static_cast<int>(shape.size()); ++d) {
    if (d < dim)
      s.outer *= shape[d];
    else if (d == dim)
      s.n = shape[d];
    else
      s.inner *= shape[d];
  }
  return s;
}

// numpy/PyTorch broadcasting: align from the right, sizes must match or be 1.
// Throws "op: cannot broadcast [a] with [b]".
Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b);

// Turns a possibly negative dim (-1 = last) into an index in [0, rank); throws with the op name.
int normalize_dim(const std::string& op, int dim, int rank);

// The error type of every shape/argument mistake: a std::invalid_argument whose message names the
// op.
struct ShapeError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

}  // namespace mg
