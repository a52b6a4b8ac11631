#include "tests/autograd/ops_case.h"

#include "autograd/ops.h"
#include "tests/test_util.h"

namespace mgtest {

namespace {
const Fixtures& fixtures() {
  static const Fixtures f("ops.txt");  // read once for the whole suite
  return f;
}
}  // namespace

OpsCase::OpsCase(const std::string& name, std::initializer_list<const char*> inputs) : name_(name) {
  for (const char* key : inputs) {
    keys_.push_back(key);
    leaves_[key] = fixtures().leaf(name + "." + key);
  }
}

const mg::Tensor& OpsCase::operator[](const std::string& key) const {
  auto it = leaves_.find(key);
  if (it == leaves_.end())
    throw std::runtime_error("case " + name_ + " has no input '" + key + "'");
  return it->second;
}

std::vector<int64_t> OpsCase::ints(const std::string& key) const {
  return fixtures().ints(name_ + "." + key);
}

void OpsCase::check(const mg::Tensor& out, double rtol, double atol) const {
  SCOPED_TRACE("fixture case '" + name_ + "' in tests/fixtures/ops.txt");
  const mg::Tensor& expected_out = fixtures().get(name_ + ".out");
  EXPECT_TENSOR_NEAR(out, expected_out, rtol, atol);
  if (out.shape() != expected_out.shape())
    return;  // the gradients would only repeat the shape error

  const mg::Tensor R = fixtures().get(name_ + ".R");  // [out's shape]
  // d(sum(out * R))/d(out) = R, handed to backward as is: through sum and mul, a wrong mul
  // backward would fail every op's case, not only mul's (the course grades each op on its own).
  out.backward(R);
  for (const std::string& key : keys_) {
    SCOPED_TRACE("gradient " + name_ + ".grad." + key);
    const mg::Tensor grad = operator[](key).grad();
    ASSERT_TRUE(grad.defined()) << "backward never reached input '" << key << "'";
    EXPECT_TENSOR_NEAR(grad, fixtures().get(name_ + ".grad." + key), rtol, atol);
  }
}

}  // namespace mgtest
