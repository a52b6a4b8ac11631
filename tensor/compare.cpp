#include "tensor/compare.h"

#include <cmath>
#include <sstream>

namespace mg {

std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return shape_str(idx);
}

std::string compare_tensors(const std::string& name, const Tensor& actual, const Tensor& expected,
                            double rtol, double atol) {
  if (actual.shape() != expected.shape())
    return name + ": shape " + shape_str(actual.shape()) + " but expected " +
           shape_str(expected.shape());
  const std::vector<float> a = actual.to_vector(), e = expected.to_vector();
  int64_t first_bad = -1, bad = 0;
  double max_diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(a[i]) - e[i]);
    const bool ok = diff <= atol + rtol * std::fabs(static_cast<double>(e[i]));
    if (!ok || std::isnan(diff)) {
      ++bad;
      if (first_bad < 0) first_bad = static_cast<int64_t>(i);
    }
    if (!std::isnan(diff)) max_diff = std::max(max_diff, diff);
  }
  if (first_bad < 0) return "";
  std::ostringstream os;
  os.precision(9);
  os << name << " " << shape_str(actual.shape()) << ": " << bad << " of " << a.size()
     << " elements differ; first bad index " << index_str(actual.shape(), first_bad) << ": got "
     << a[first_bad] << ", expected " << e[first_bad] << "; max |diff| " << max_diff << " (rtol "
     << rtol << ", atol " << atol << ")";
  return os.str();
}

}  // namespace mg
