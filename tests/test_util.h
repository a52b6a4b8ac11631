// Shared by the test files: tensor comparison macros and the PyTorch fixture reader.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <thread>
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
// As EXPECT_HAS, and returns from the test when it fails.
#define ASSERT_HAS(haystack, needle) \
  ASSERT_NE((haystack).find(needle), std::string::npos) << (haystack)

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

// Lets a call blocked in open(2) on the FIFO `fifo` go on, by opening the FIFO's other end: a
// reader gets a writer that leaves at once (it then reads the end of the file), a writer a reader
// that stays (a descriptor left open, in a test that has failed), so its writes raise no SIGPIPE.
void release_fifo(const std::string& fifo);

// As error_of, for a call that must not wait on the FIFO `fifo`: run on a thread of its own, it
// must end within `seconds`. One still waiting then is a failure of the test, not a hang of the
// suite: the FIFO is released (release_fifo) so that the call goes on, and "blocked" is returned.
template <typename E = std::runtime_error, typename Fn>
std::string error_without_waiting(const std::string& fifo, Fn fn, int seconds = 5) {
  auto result = std::make_shared<std::promise<std::string>>();
  std::future<std::string> done = result->get_future();
  std::thread([fn, result] {
    try {
      fn();
      result->set_value("");
    } catch (const E& e) {
      result->set_value(e.what());
    } catch (...) {  // another type: rethrown by get() below, as error_of lets it propagate
      result->set_exception(std::current_exception());
    }
  }).detach();
  if (done.wait_for(std::chrono::seconds(seconds)) == std::future_status::ready) return done.get();
  ADD_FAILURE() << "still waiting on the FIFO " << fifo << " after " << seconds << " s";
  release_fifo(fifo);
  if (done.wait_for(std::chrono::seconds(60)) == std::future_status::ready) (void)done.get();
  return "blocked";
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
