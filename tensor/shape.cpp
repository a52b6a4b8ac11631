#include "tensor/shape.h"
#include "tensor/not_implemented.h"

#include <sstream>

namespace mg {

std::string shape_str(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << ']';
  return os.str();
}

int64_t numel_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

Shape contiguous_strides(const Shape& shape) {
  Shape strides(shape.size());
  int64_t stride = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    strides[i] = stride;
    stride *= shape[i];
  }
  return strides;
}

Shape broadcast_shapes(const std::string& op, const Shape& a, const Shape& b) {
  // TASK 1.1: align the shapes from the right (a missing dim is 1); equal sizes or a 1 broadcast
  const size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align from the right: missing leading dims count as 1.
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      throw ShapeError(op + ": cannot broadcast " + shape_str(a) + " with " + shape_str(b));
    out[i] = da == 1 ? db : da;
  }
  return out;
  // END TASK 1.1
}

int normalize_dim(const std::string& op, int dim, int rank) {
  const int d = dim < 0 ? dim + rank : dim;
  if (d < 0 || d >= rank)
    throw ShapeError(op + ": dim " + std::to_string(dim) + " is out of range for a rank-" +
                     std::to_string(rank) + " tensor");
  return d;
}

}  // namespace mg
