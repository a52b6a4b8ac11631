// A FIFO (named pipe) or a device where a run, a loader or the plot expects a regular file:
// refused at once, naming the file and what it is, and left where it was. Opening a FIFO used to
// block until another process opened its other end, and a first Ctrl-C only asked training to stop
// cleanly, so the run hung until a second one. Each call that could wait on a FIFO runs under
// mgtest::error_without_waiting: a regression fails the test instead of hanging the suite.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "io/read_file.h"
#include "io/run_lock.h"
#include "lm/corpus.h"
#include "lm/learning_curves.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

std::string make_fifo(const std::string& path) {
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << path << ": " << std::strerror(errno);
  return path;
}

std::string fifo_refused(const std::string& what, const std::string& path) {
  return what + " " + path + " is a FIFO (named pipe), not a regular file";
}

// A FIFO at `name` in a run folder: train refuses it, naming it, before it takes the folder.
void expect_train_refuses_fifo_at(const std::string& dir, const std::string& name) {
  const std::string fifo = make_fifo(dir + "/" + name);
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("fifo_" + name));
  const TrainConfig cfg = mgtest::small_config(corpus.dir, dir);
  EXPECT_HAS(mgtest::error_without_waiting<std::invalid_argument>(
                 fifo, [&] { train_lm(cfg, corpus, {}); }),
             fifo_refused("run file", fifo));
  EXPECT_FALSE(fs::exists(RunLock::file_in(dir)));  // refused before the run took its folder
}

}  // namespace

TEST(SpecialFiles, AFifoAtMetricsJsonlIsRefusedBeforeAnyWork) {
  const mgtest::TempDir dir;
  expect_train_refuses_fifo_at(dir.str(), "metrics.jsonl");
  const std::string fifo = dir.file("metrics.jsonl");
  // Each reader and writer of the metrics file refuses it too, should a FIFO come later.
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { MetricsWriter w(fifo); }),
             fifo_refused("metrics file", fifo));
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { drop_records_after(fifo, 0); }),
             fifo_refused("metrics file", fifo));
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { stop_validated(fifo, 0); }),
             fifo_refused("metrics file", fifo));
  EXPECT_TRUE(fs::is_fifo(fifo));  // the user's FIFO is never removed or replaced
}

TEST(SpecialFiles, AResumeRefusesAFifoAtMetricsJsonlAndKeepsItsCheckpoint) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("resume_fifo"));
  const std::string save = mgtest::temp_dir("resume_fifo_run");
  TrainConfig cfg = mgtest::small_config(corpus.dir, save);
  cfg.epochs = 1;
  mgtest::run_collecting(cfg, corpus);
  const std::string state = save + "/checkpoint.ckpt";
  const std::string saved = read_file(state, "state");
  fs::remove(save + "/metrics.jsonl");
  const std::string fifo = make_fifo(save + "/metrics.jsonl");
  cfg.resume = true, cfg.epochs = 2;
  EXPECT_HAS(mgtest::error_without_waiting<std::invalid_argument>(
                 fifo, [&] { train_lm(cfg, corpus, {}); }),
             fifo_refused("run file", fifo));
  EXPECT_EQ(read_file(state, "state"), saved);
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST(SpecialFiles, AFifoAtTheLockIsRefusedWithoutWaiting) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(RunLock::file_in(dir.str()));
  // Asking who holds the lock opened it to read, which waited for a writer.
  EXPECT_EQ(mgtest::error_without_waiting(fifo, [&] { (void)RunLock::holder(dir.str()); }), "");
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { RunLock lock(dir.str(), "mosgrad train"); }),
             fifo_refused("the run directory's lock", fifo));
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("lock_fifo"));
  const TrainConfig cfg = mgtest::small_config(corpus.dir, dir.str());
  EXPECT_HAS(mgtest::error_without_waiting<std::invalid_argument>(
                 fifo, [&] { train_lm(cfg, corpus, {}); }),
             fifo_refused("run file", fifo));
  EXPECT_FALSE(fs::exists(dir.file("metrics.jsonl")));
  EXPECT_TRUE(fs::is_fifo(fifo));
}

// `generate --model FIFO`, `import --in FIFO`, a FIFO at best.ckpt; `eval --model /dev/zero` said
// the device was "empty (0 bytes)".
TEST(SpecialFiles, AModelThatIsAFifoOrADeviceIsRefusedByName) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(dir.file("model.ckpt"));
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { load_model(fifo); }),
             fifo_refused("checkpoint", fifo));
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { import_safetensors(fifo); }),
             fifo_refused("safetensors file", fifo));
  // /dev/null first: read, it ends at once, where /dev/zero would fill the memory.
  ASSERT_HAS(mgtest::error_of([] { load_model("/dev/null"); }), "is a character device");
  const std::string zero = mgtest::error_of([] { load_model("/dev/zero"); });
  EXPECT_HAS(zero, "checkpoint /dev/zero is a character device, not a regular file");
  EXPECT_EQ(zero.find("empty"), std::string::npos) << zero;

  expect_train_refuses_fifo_at(dir.str(), "best.ckpt");
}

TEST(SpecialFiles, ACorpusFileThatIsAFifoOrADeviceIsRefusedByName) {
  const std::string data = mgtest::write_synthetic_corpus("corpus_fifo");
  const std::string valid = data + "/ptb.valid.txt";
  fs::remove(valid);
  make_fifo(valid);
  EXPECT_HAS(mgtest::error_without_waiting(valid, [&] { load_corpus(data); }),
             fifo_refused("corpus file", valid));
  fs::remove(valid);
  // /dev/null first: read, it ends at once, where /dev/zero would fill the memory.
  fs::create_symlink("/dev/null", valid);
  ASSERT_HAS(mgtest::error_of([&] { load_corpus(data); }), "is a character device");
  fs::remove(valid);
  fs::create_symlink("/dev/zero", valid);
  const std::string e = mgtest::error_of([&] { load_corpus(data); });
  EXPECT_HAS(e, "corpus file " + valid + " is a character device, not a regular file");
  EXPECT_EQ(e.find("empty"), std::string::npos) << e;
}

// `mosgrad plot DIR` read DIR/metrics.jsonl, and waited on a FIFO there.
TEST(SpecialFiles, PlotRefusesAFifoAtMetricsJsonlAndDrawsNothing) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(dir.file("metrics.jsonl"));
  EXPECT_HAS(mgtest::error_without_waiting(
                 fifo, [&] { plot_learning_curves(fifo, dir.file("curves.svg")); }),
             fifo_refused("metrics file", fifo));
  EXPECT_FALSE(fs::exists(dir.file("curves.svg")));
}
