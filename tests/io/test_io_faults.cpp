// Every file operation of a save failing, one at a time (the practice of SQLite's I/O-error
// tests). For each way mosgrad changes a file that is already there, the test first counts the N
// operations the save makes (io/file_ops.h: open, write, fsync, close, rename, truncate), then runs
// it 2N more times in a fresh folder, the k-th operation failing with ENOSPC, then with EIO. Every
// run must end in an error naming the file and the errno's text, and leave each file byte for
// byte as it was or as the save that did not fail leaves it (never a mix, never gone), and no
// temporary behind (docs/reliability.md).
#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "io/file_ops.h"
#include "lm/metrics.h"
#include "lm/model_io.h"
#include "lm/train_state.h"
#include "reproduce/reproduce_results.h"
#include "tests/fuzz/model_seeds.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;
using mg::io_fault::FaultPlan;
using mg::io_fault::Scope;

namespace {

// The fuzz targets' small MoS run (tests/fuzz/model_seeds.h): a 5-word vocabulary, saved in
// milliseconds, so every operation of its saves can fail in turn.
mg::TrainConfig tiny_config() {
  return mgfuzz::fuzz_state_config();
}

mg::Vocab tiny_vocab() {
  return mgfuzz::fuzz_state_corpus().vocab;
}

// The training state a run of model seed `seed` at step `step` saves.
void save_tiny_state(const std::string& path, uint64_t seed, int64_t step) {
  const mg::TrainConfig cfg = tiny_config();
  mg::RNNModel model(cfg.model, seed);
  mg::Progress progress;
  progress.opt =
      std::make_unique<mg::Optimizer>(mg::OptimizerKind::SGD, model.named_parameters(), cfg.wdecay);
  progress.st.epoch = 1, progress.st.step = step, progress.st.tokens = step * 20;
  progress.hidden = model.init_hidden(cfg.batch_size);
  progress.bptt_gen = mg::Generator(11);
  mg::save_state(path, cfg, model, progress, tiny_vocab());
}

void save_tiny_model(const std::string& path, uint64_t seed, double val_loss) {
  mg::RNNModel model(tiny_config().model, seed);
  mg::save_model(path, model, tiny_vocab(), {{"val_loss", std::to_string(val_loss)}});
}

std::string epoch_line(int64_t epoch) {
  return "{\"kind\":\"epoch\",\"epoch\":" + std::to_string(epoch) +
         ",\"step\":" + std::to_string(10 * epoch) + ",\"val_loss\":5}\n";
}

// One way of changing files that exist: `before` writes them as they were, `save` changes them.
// A save whose only report can be no exception says so in `unreported`: the kind of operation
// whose failure it may pass over, and why (checked: the files are then the new ones).
struct Scenario {
  const char* name;
  std::vector<std::string> files;  // inside the folder; all of them exist before the save
  std::function<void(const std::string&)> before, save;  // given the folder
  const char* unreported = "";
};

std::vector<Scenario> scenarios() {
  return {
      {"checkpoint save over an existing one",
       {"checkpoint.ckpt"},
       [](const std::string& d) { save_tiny_state(d + "/checkpoint.ckpt", 1, 10); },
       [](const std::string& d) { save_tiny_state(d + "/checkpoint.ckpt", 2, 20); }},
      {"best-model replacement",
       {"best.ckpt"},
       [](const std::string& d) { save_tiny_model(d + "/best.ckpt", 1, 5.0); },
       [](const std::string& d) { save_tiny_model(d + "/best.ckpt", 2, 4.5); }},
      {"metrics append",
       {"metrics.jsonl"},
       [](const std::string& d) { mgtest::write_bytes(d + "/metrics.jsonl", epoch_line(1)); },
       [](const std::string& d) {
         mg::MetricsWriter w(d + "/metrics.jsonl");
         mg::EpochMetrics m;
         m.epoch = 2, m.step = 20, m.tokens = 400, m.train_loss = 5, m.val_loss = 4.9;
         m.optimizer = "sgd";
         w.write(m);
       },
       // The line is in the file once write(2) returned: a close that fails afterwards (in the
       // destructor, which cannot throw) loses nothing.
       "close"},
      {"metrics cut back to a checkpoint on --resume",
       {"metrics.jsonl"},
       [](const std::string& d) {
         mgtest::write_bytes(d + "/metrics.jsonl", epoch_line(1) + epoch_line(2) + epoch_line(3));
       },
       [](const std::string& d) { mg::drop_records_after(d + "/metrics.jsonl", 10); }},
      {"results.jsonl update",
       {"results.jsonl"},
       [](const std::string& d) {
         mgtest::write_bytes(d + "/results.jsonl",
                             "{\"plan\":\"quick\",\"run\":\"mos-s1\",\"head\":\"mos\","
                             "\"stage\":\"train\",\"valid_ppl\":150}\n");
       },
       [](const std::string& d) {
         mg::append_result(d + "/results.jsonl",
                           "{\"plan\":\"quick\",\"run\":\"mos-s1\",\"head\":\"mos\","
                           "\"stage\":\"finetune\",\"valid_ppl\":140}");
       }},
      {"safetensors export over an existing file",
       {"model.safetensors"},
       [](const std::string& d) {
         mg::export_safetensors(d + "/model.safetensors", mg::RNNModel(tiny_config().model, 1),
                                tiny_vocab());
       },
       [](const std::string& d) {
         mg::export_safetensors(d + "/model.safetensors", mg::RNNModel(tiny_config().model, 2),
                                tiny_vocab());
       }},
  };
}

std::map<std::string, std::string> contents(const std::string& dir,
                                            const std::vector<std::string>& files) {
  std::map<std::string, std::string> out;
  for (const std::string& f : files) out[f] = mgtest::read_bytes(dir + "/" + f);
  return out;
}

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

// The number of operations of the kinds `ops` that `s.save` makes (in a fresh folder).
int64_t count_ops(const Scenario& s, const std::string& dir, unsigned ops) {
  fs::remove_all(dir);
  fs::create_directories(dir);
  s.before(dir);
  Scope counting(FaultPlan{ops, 0, 0});
  s.save(dir);
  return counting.count();
}

}  // namespace

TEST(IoFault, EveryOperationOfEverySaveFailingLeavesOldOrNewFilesAndAClearError) {
  mgtest::TempDir tmp;
  for (const Scenario& s : scenarios()) {
    SCOPED_TRACE(s.name);
    const std::string dir = tmp.file("run");
    // The files before, and after a save that does not fail.
    fs::remove_all(dir);
    fs::create_directories(dir);
    s.before(dir);
    const auto old_files = contents(dir, s.files);
    const std::set<std::string> names(s.files.begin(), s.files.end());
    int64_t n = 0;
    {
      Scope counting(FaultPlan{mg::io_fault::kAll, 0, 0});
      s.save(dir);
      n = counting.count();
      EXPECT_FALSE(counting.fired());
    }
    const auto new_files = contents(dir, s.files);
    ASSERT_NE(old_files, new_files) << "the save must change its file, or nothing is tested";
    EXPECT_EQ(entries(dir), names);
    ASSERT_GE(n, 2);
    std::cout << "[ IoFault  ] " << s.name << ": " << n << " file operations\n";

    for (const int err : {ENOSPC, EIO}) {
      for (int64_t k = 1; k <= n; ++k) {
        SCOPED_TRACE("operation " + std::to_string(k) + " of " + std::to_string(n) +
                     " fails with " + std::strerror(err));
        fs::remove_all(dir);
        fs::create_directories(dir);
        s.before(dir);
        std::string error, op;
        bool threw = false;
        {
          Scope fault(FaultPlan{mg::io_fault::kAll, k, err});
          try {
            s.save(dir);
          } catch (const std::exception& e) {
            threw = true, error = e.what();
          }
          ASSERT_TRUE(fault.fired()) << "the save made fewer operations than counted";
          op = fault.op_name();
        }
        SCOPED_TRACE(std::string("the failed operation: ") + op);
        const auto after = contents(dir, s.files);
        bool all_new = true;
        for (const std::string& f : s.files) {
          EXPECT_TRUE(after.at(f) == old_files.at(f) || after.at(f) == new_files.at(f))
              << f << " is neither the old file nor the new one (" << after.at(f).size()
              << " bytes; old " << old_files.at(f).size() << ", new " << new_files.at(f).size()
              << ")";
          all_new = all_new && after.at(f) == new_files.at(f);
        }
        EXPECT_EQ(entries(dir), names) << "a temporary was left behind, or a file is gone";
        if (threw) {
          EXPECT_HAS(error, std::strerror(err));
          bool names_file = false;
          for (const std::string& f : s.files)
            names_file |= error.find(dir + "/" + f) != error.npos;
          EXPECT_TRUE(names_file) << error;
        } else {
          EXPECT_EQ(op, s.unreported) << "a failed " << op << " passed unreported";
          EXPECT_TRUE(all_new) << "a save that reports no error must have saved";
        }
      }
    }
  }
}

// The hook sees each kind of operation an atomic save makes, so the test above fails each of them:
// the temporary's open, its writes, its fsync and close, the rename, the directory's fsync.
TEST(IoFault, TheHookSeesEveryKindOfOperationOfAnAtomicSave) {
  mgtest::TempDir tmp;
  const Scenario s = scenarios()[0];
  const std::string dir = tmp.file("run");
  EXPECT_EQ(count_ops(s, dir, mg::io_fault::kOpen), 1);
  EXPECT_GE(count_ops(s, dir, mg::io_fault::kWrite), 3);  // the writes and the flush
  EXPECT_EQ(count_ops(s, dir, mg::io_fault::kSync), 2);   // the file, then its directory
  EXPECT_EQ(count_ops(s, dir, mg::io_fault::kClose), 1);
  EXPECT_EQ(count_ops(s, dir, mg::io_fault::kRename), 1);
  EXPECT_EQ(count_ops(s, dir, mg::io_fault::kTruncate), 0);
  const Scenario metrics = scenarios()[2];  // open, one write(2), close
  EXPECT_EQ(count_ops(metrics, dir, mg::io_fault::kAll), 3);
  // Off unless armed: without a Scope nothing is counted or failed.
  EXPECT_NO_THROW(s.save(dir));
}

// A write that fills the disk part-way is cut back off: the metrics file keeps its whole lines
// (the short write, then the failed one, then the truncate; the test above fails each in turn).
TEST(IoFault, AMetricsLineCutShortByAFullDiskIsCutBackOff) {
  mgtest::TempDir tmp;
  const Scenario s = scenarios()[2];
  const std::string dir = tmp.file("run");
  fs::create_directories(dir);
  s.before(dir);
  const std::string before = mgtest::read_bytes(dir + "/metrics.jsonl");
  std::string error;
  {
    Scope fault(FaultPlan{mg::io_fault::kWrite, 1, ENOSPC});
    error = mgtest::error_of([&] { s.save(dir); });
    EXPECT_EQ(fault.count(), 2);  // the short write, then the one that failed
  }
  EXPECT_HAS(error, "No space left on device");
  EXPECT_HAS(error, "keeps its whole lines");
  EXPECT_EQ(mgtest::read_bytes(dir + "/metrics.jsonl"), before);
}
