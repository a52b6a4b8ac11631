// Running out of memory is an error a student understands. A tensor's allocation names the tensor
// (tensor/allocator.cpp, Reliability.OutOfMemoryIsAClearErrorNotAnAbort); any other allocation,
// a file read whole or a matrix of the rank command, is turned by the program into the same kind
// of error, not the bare "std::bad_alloc" of the standard library.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tests/test_util.h"

namespace {

// This process's address space now, in bytes (VmSize in /proc/self/status), or -1.
long long address_space_bytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmSize:", 0) == 0) return std::atoll(line.c_str() + 7) * 1024;
  return -1;
}

}  // namespace

// A corpus whose training text is 2 GB (a sparse file: no disk is used) read under an address
// space limit 512 MB above what the process holds: the program says it ran out of memory, and
// what to do. In a fresh process (a death test re-runs this binary), so the limit touches no
// other test.
TEST(ProgramErrors, OutOfMemoryOutsideATensorIsNamedAsSuch) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reports a failed allocation itself";
#endif
  const mgtest::TempDir dir;
  { std::ofstream(dir.file("ptb.train.txt")); }
  std::filesystem::resize_file(dir.file("ptb.train.txt"), 2ull << 30);
  for (const char* split : {"ptb.valid.txt", "ptb.test.txt"})
    std::ofstream(dir.file(split)) << "a b\n";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [&] {
    const long long now = address_space_bytes();
    if (now < 0) std::exit(2);
    const rlimit limit{static_cast<rlim_t>(now + (512ll << 20)),
                       static_cast<rlim_t>(now + (512ll << 20))};
    if (setrlimit(RLIMIT_AS, &limit) != 0) std::exit(3);
    std::vector<std::string> words = {
        "mosgrad",       "train",     "--data", dir.str(),     "--save",
        dir.file("run"), "--threads", "1",      "--max-steps", "1"};
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    const std::string e = mgtest::error_of<std::exception>(
        [&] { mg::run_mosgrad(static_cast<int>(argv.size()), argv.data()); });
    std::fprintf(stderr, "%s\n", e.c_str());
    std::exit(e.rfind("out of memory: mosgrad train needed more memory than this machine", 0) == 0
                  ? 0
                  : 1);
  };
  EXPECT_EXIT(run(), testing::ExitedWithCode(0), "out of memory: mosgrad train");
  EXPECT_FALSE(std::filesystem::exists(dir.file("run")));
}
