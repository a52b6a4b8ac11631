// Shared by the test files: tensor comparison macros and the PyTorch fixture reader.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "cuda/backend.h"
#include "tensor/compare.h"
#include "tensor/tensor.h"

// Fails with the name, shape, first bad index, both values and the max difference.
#define EXPECT_TENSOR_NEAR(actual, expected, rtol, atol)                    \
  do {                                                                      \
    const std::string mg_report_ =                                          \
        mg::compare_tensors(#actual, (actual), (expected), (rtol), (atol)); \
    EXPECT_TRUE(mg_report_.empty()) << mg_report_;                          \
  } while (0)

#define EXPECT_GRADCHECK(name, fn, inputs)                                    \
  do {                                                                        \
    const mg::GradcheckResult mg_gc_ = mg::gradcheck((name), (fn), (inputs)); \
    EXPECT_TRUE(mg_gc_.ok) << mg_gc_.message;                                 \
  } while (0)

// Skips the test, saying why, unless a GPU can be used (a `make CUDA=1` build on a machine with
// one).
#define MG_SKIP_WITHOUT_CUDA()                                                   \
  do {                                                                           \
    std::string mg_why_;                                                         \
    if (!mg::cuda_is_available(&mg_why_)) GTEST_SKIP() << "no GPU: " << mg_why_; \
  } while (0)

// Fails unless `haystack` (a std::string) contains `needle`; prints the haystack.
#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE((haystack).find(needle), std::string::npos) << (haystack)

namespace mgtest {

// A fresh directory per test under testing::TempDir(), named after the test, removed at the end.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const;  // a path inside it
  std::string str() const;
  void write(const std::string& name, const std::string& bytes) const;

 private:
  std::string path_;
};

// The raw bit patterns of t's values: for bit-exact comparisons (NaN payloads, -0).
std::vector<uint32_t> bits_of(const mg::Tensor& t);

std::string read_bytes(const std::string& path);
void write_bytes(const std::string& path, const std::string& bytes);

// The temporary the next atomic save of `path` in this process will use (io/atomic_file.h names
// them "<path>.tmp.<pid>.<n>"): to plant something there and check that the save refuses it.
std::string next_tmp_path(const std::string& path);
// The temporaries an atomic save of `path` may leave: files beside it named <file>.tmp* (the
// unique <file>.tmp.<pid>.<n> and the old fixed <file>.tmp). Empty after every save or failure.
std::vector<std::string> temporaries_of(const std::string& path);
// A pid that no process has: a child that has exited and been reaped (for "a temporary of a
// process killed mid-save").
int dead_pid();

// The message of the exception of type E (std::runtime_error by default) that fn throws ("" when
// it throws none; another type propagates and fails the test).
template <typename E = std::runtime_error, typename Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// tests/fixtures/<file> in the source tree.
std::string fixture_path(const std::string& file);

// A fixture file written by tools/gen_fixtures.py: one tensor per line,
//   name rank d0 d1 ... : v0 v1 v2 ...
// ('#' lines are comments). Integers (token ids, targets) are stored as exact floats.
class Fixtures {
 public:
  explicit Fixtures(const std::string& file);
  const mg::Tensor& get(const std::string& name) const;  // throws naming the file when missing
  std::vector<int64_t> ints(const std::string& name) const;
  bool has(const std::string& name) const { return tensors_.count(name) > 0; }
  // A copy of the named tensor as a fresh leaf, optionally requiring grad.
  mg::Tensor leaf(const std::string& name, bool requires_grad = true) const;

 private:
  std::string file_;
  std::map<std::string, mg::Tensor> tensors_;
};

}  // namespace mgtest
