// Comparing tensors the way every numeric test in mosgrad reports a failure: the name, the shape,
// the first bad index, both values and the largest difference.
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace mg {

// Passes where |actual - expected| <= atol + rtol * |expected| for every element (NaN never
// passes). Returns "" when all pass, else a one-paragraph report.
std::string compare_tensors(const std::string& name, const Tensor& actual, const Tensor& expected,
                            double rtol, double atol);

// Row-major multi-index of flat position i in shape, as "[1,2,0]".
std::string index_str(const Shape& shape, int64_t flat);

}  // namespace mg
