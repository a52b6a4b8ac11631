// How the program ends when it cannot go on or is told to stop. Running out of memory is an error
// a student understands: a tensor's allocation names the tensor (tensor/allocator.cpp,
// Reliability.OutOfMemoryIsAClearErrorNotAnAbort); any other allocation, a file read whole or a
// matrix of the rank command, is turned by the program into the same kind of error, not the bare
// "std::bad_alloc" of the standard library. A stop signal during training's final test ends the
// program at once, every file already saved. Output that cannot be written is an error.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cli/commands.h"
#include "cli/run_commands.h"
#include "lm/train.h"
#include "lm/training_stop.h"
#include "tests/test_trainer_util.h"
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

// SIGTERM while the final test runs (batch size 1: minutes on a real preset) ends the program then,
// saying so, instead of being noted for a training step that never comes. The test split here is
// long enough (160k words) that the test takes a while; a thread sends the signal once it begins.
TEST(ProgramErrors, AStopSignalDuringTheFinalTestEndsTheProgramAtOnce) {
  const std::string data = mgtest::write_synthetic_corpus("stop_in_test");
  {
    std::ofstream test(data + "/ptb.test.txt", std::ios::app);
    for (int i = 0; i < 40000; ++i) test << "the cat sees a car\n";
  }
  mg::TrainConfig cfg = mgtest::small_config(data, mgtest::temp_dir("stop_in_test_run"));
  cfg.epochs = 1, cfg.test_at_end = true;
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [&] {
    const mg::Corpus corpus = mg::load_corpus(data);
    mg::stop_cleanly_on_signals();
    std::thread signaller([&cfg] {
      while (!mg::stop_at_once()) std::this_thread::yield();
      // "every file was saved": the test begins after the last save
      if (!std::filesystem::exists(cfg.save + "/best.ckpt") ||
          !std::filesystem::exists(cfg.save + "/checkpoint.ckpt"))
        std::_Exit(3);
      ::kill(::getpid(), SIGTERM);
    });
    signaller.detach();
    mg::train_lm(cfg, corpus);
    std::exit(0);  // the test ran to its end: the signal was not acted on
  };
  EXPECT_EXIT(run(), testing::KilledBySignal(SIGTERM), "stopped during the final test");
}

// A stop asked before the test begins (during the last validation or saves; here, before a resume
// of a finished run, which goes straight to its test) skips the test; the run counts as
// interrupted.
TEST(ProgramErrors, AStopAskedBeforeTheFinalTestSkipsIt) {
  const mg::Corpus corpus = mg::load_corpus(mgtest::write_synthetic_corpus("stop_before_test"));
  mg::TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("stop_before_test_run"));
  cfg.epochs = 1;
  mg::train_lm(cfg, corpus);
  cfg.resume = true, cfg.test_at_end = true;
  mg::request_training_stop();
  mg::TrainResult r;
  const std::string e = mgtest::error_of([&] { r = mg::train_lm(cfg, corpus); });
  mg::clear_training_stop();
  EXPECT_EQ(e, "");
  EXPECT_FALSE(r.tested);
  EXPECT_EQ(r.stop_reason, mg::kInterruptedReason);
}

namespace {

// `mosgrad presets` in a fresh process (a death test) whose standard output `redirect` changed;
// prints run_mosgrad's error (or "no error") to stderr and exits 0 when it starts with `want`.
void presets_with_stdout(void (*redirect)(), const std::string& want) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto run = [&] {
    redirect();
    std::vector<std::string> words = {"mosgrad", "presets"};
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    std::string e = mgtest::error_of<std::exception>(
        [&] { mg::run_mosgrad(static_cast<int>(argv.size()), argv.data()); });
    if (e.empty()) e = "no error";
    // A file opened now must not get standard output's number (1): the lines printed would go
    // into it.
    const int fd = ::open("/dev/null", O_RDONLY);
    std::fprintf(stderr, "%s (next file: %d)\n", e.c_str(), fd);
    std::exit(e.rfind(want, 0) == 0 && fd != 1 ? 0 : 1);
  };
  std::string pattern;  // `want` as a regular expression
  for (char c : want) pattern += (c == '(' || c == ')' ? "\\" : "") + std::string(1, c);
  EXPECT_EXIT(run(), testing::ExitedWithCode(0), pattern);
}

}  // namespace

// Results printed into a full disk are lost: the command fails, saying so, instead of exiting 0
// with a truncated or empty file (`mosgrad help --markdown > docs/cli.md`, `eval > result.txt`).
TEST(ProgramErrors, OutputThatCannotBeWrittenIsAnError) {
  presets_with_stdout(
      [] {
        const int full = ::open("/dev/full", O_WRONLY);
        if (full < 0 || ::dup2(full, 1) != 1) std::exit(2);
      },
      "could not write to standard output (No space left on device)");
}

// `mosgrad train | head`: train ignores SIGPIPE so that training goes on when the reader leaves
// (its results are files); the output that went nowhere then is no error.
TEST(ProgramErrors, AReaderThatLeftWhileSigpipeWasIgnoredIsNoError) {
  presets_with_stdout(
      [] {
        int ends[2];
        if (::pipe(ends) != 0 || ::dup2(ends[1], 1) != 1) std::exit(2);
        ::close(ends[0]), ::close(ends[1]);
        std::signal(SIGPIPE, SIG_IGN);
      },
      "no error");
}

// A closed standard output (`mosgrad presets >&-`) is refused before any work, and its number is
// held, so no file mosgrad opens can take it.
TEST(ProgramErrors, AClosedStandardOutputIsRefused) {
  presets_with_stdout([] { ::close(1); }, "standard output is closed");
}
