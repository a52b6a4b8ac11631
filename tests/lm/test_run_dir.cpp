// The run directory is the user's result: one training at a time writes into it (a lock that names
// the other process), a resumed run continues the same run (its defining flags cannot change), and
// diverged weights, even finite ones, are never kept.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "cuda/backend.h"
#include "io/checkpoint.h"
#include "io/read_file.h"
#include "io/run_lock.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

TEST(RunDirectory, ASecondLockIsRefusedNamingTheHolder) {
  const mgtest::TempDir dir;
  {
    const RunLock first(dir.str(), "mosgrad train --save x");
    const std::string e =
        mgtest::error_of([&] { RunLock second(dir.str(), "mosgrad train --save x"); });
    EXPECT_HAS(e, "run directory " + dir.str() + " is in use by process " +
                      std::to_string(::getpid()) + " (mosgrad train --save x), started ");
    EXPECT_HAS(e, "choose another --save");
  }
  EXPECT_EQ(mgtest::error_of([&] { RunLock again(dir.str(), "mosgrad train"); }),
            "");  // released with its holder
}

// Asking who holds a lock (RunLock::holder, as reproduce does before a stage) takes a shared lock
// for an instant: a run that starts in that instant waits for it, and is not told the folder is
// in use by whoever held it last.
TEST(RunDirectory, ALockBeingAskedAboutIsTakenAMomentLater) {
  const mgtest::TempDir dir;
  { const RunLock earlier(dir.str(), "mosgrad train"); }  // the file is there, nobody holds it
  const int asker = ::open(RunLock::file_in(dir.str()).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(asker, 0);
  ASSERT_EQ(::flock(asker, LOCK_SH | LOCK_NB), 0);
  std::thread done_asking([asker] {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::close(asker);
  });
  EXPECT_EQ(mgtest::error_of([&] { RunLock lock(dir.str(), "mosgrad train"); }), "");
  done_asking.join();
}

TEST(RunDirectory, ASymlinkAtTheLocksNameIsAnError) {
  const mgtest::TempDir dir;
  const std::string target = dir.file("elsewhere");
  std::filesystem::create_symlink(target, RunLock::file_in(dir.str()));
  EXPECT_HAS(mgtest::error_of([&] { RunLock lock(dir.str(), "mosgrad train"); }),
             "it is a symlink");
  EXPECT_FALSE(std::filesystem::exists(target));  // nothing was created through the link
}

// A file of the user's that happens to be named mosgrad.lock is not written over (mosgrad's own
// hold nothing or the holder's line); an empty one, a lock whose note was never written, is
// mosgrad's.
TEST(RunDirectory, AUsersFileAtTheLocksNameIsNeverWrittenOver) {
  const mgtest::TempDir dir;
  const std::string lock = RunLock::file_in(dir.str());
  mgtest::write_bytes(lock, "my notes on this run\n");
  const std::string e = mgtest::error_of([&] { RunLock l(dir.str(), "mosgrad train", "--out"); });
  EXPECT_HAS(e, lock + " is not a lock mosgrad wrote");
  EXPECT_HAS(e, "choose another --out");
  EXPECT_EQ(mgtest::read_bytes(lock), "my notes on this run\n");
  mgtest::write_bytes(lock, "");
  EXPECT_EQ(mgtest::error_of([&] { RunLock l(dir.str(), "mosgrad train"); }), "");
}

// `cp -al run copy` hard-links every file, the lock too. While the original's run holds the
// shared file, the copy's refusal says why and what to do; a run in either folder when none holds
// it gives that folder a lock file of its own (the other's note stays as it was), so the two
// folders then lock apart.
TEST(RunDirectory, AHardLinkedCopysLockBecomesItsOwn) {
  const mgtest::TempDir original, copy;
  const std::string lock = RunLock::file_in(original.str()), copied = RunLock::file_in(copy.str());
  {
    const RunLock running(original.str(), "mosgrad train --save original");
    std::filesystem::create_hard_link(lock, copied);  // copied while its run goes on
    const std::string e = mgtest::error_of([&] { RunLock l(copy.str(), "mosgrad train"); });
    EXPECT_HAS(e, "is in use by process");
    EXPECT_HAS(e, copied + " is a hard link shared with another folder, as cp -al makes");
    EXPECT_HAS(RunLock::holder(copy.str()), "hard link shared with another folder");
  }
  const std::string note = mgtest::read_bytes(lock);
  {
    const RunLock in_copy(copy.str(), "mosgrad train --save copy");
    EXPECT_EQ(std::filesystem::hard_link_count(lock), 1u);
    EXPECT_EQ(std::filesystem::hard_link_count(copied), 1u);
    EXPECT_EQ(mgtest::read_bytes(lock), note);
    EXPECT_HAS(mgtest::read_bytes(copied), "(mosgrad train --save copy)");
    EXPECT_EQ(mgtest::error_of([&] { RunLock l(original.str(), "mosgrad train"); }), "");
    EXPECT_HAS(mgtest::error_of([&] { RunLock l(copy.str(), "mosgrad train"); }),
               "is in use by process");
  }
  for (const auto& e : std::filesystem::directory_iterator(copy.str()))  // no temporary left
    EXPECT_EQ(e.path().filename(), "mosgrad.lock");
}

// Two runs start in a hard-linked copy at once. The first holds the shared file for an instant,
// gives the copy a locked file of its own and lets the shared one go; the second, which opened
// the shared file before that and takes it once let go, must see that it is no longer the lock at
// the name, and be refused by the one that is.
TEST(RunDirectory, ALockFileThatLeftTheNameIsNotTheLock) {
  const mgtest::TempDir original, copy;
  const std::string lock = RunLock::file_in(original.str()), copied = RunLock::file_in(copy.str());
  { const RunLock first(original.str(), "mosgrad train --save original"); }
  std::filesystem::create_hard_link(lock, copied);
  const int shared = ::open(copied.c_str(), O_RDWR | O_CLOEXEC);  // the first run, on the old file
  ASSERT_GE(shared, 0);
  ASSERT_EQ(::flock(shared, LOCK_EX | LOCK_NB), 0);
  std::string second_error = "(not run)";
  std::thread second([&] {
    second_error = mgtest::error_of([&] { RunLock l(copy.str(), "mosgrad train --save copy"); });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // it waits on the shared file
  const std::string own = copied + ".own";  // the first run's file of its own, locked
  mgtest::write_bytes(own, "");
  const int own_fd = ::open(own.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(own_fd, 0);
  ASSERT_EQ(::flock(own_fd, LOCK_EX | LOCK_NB), 0);
  std::filesystem::rename(own, copied);
  ::close(shared);  // the shared file let go
  second.join();
  EXPECT_HAS(second_error, "is in use by");
  ::close(own_fd);
}

TEST(RunDirectory, TrainingRefusesADirectoryAnotherRunHolds) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("locked"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("locked"));
  cfg.max_steps = 1;
  const RunLock other(cfg.save, "mosgrad train --save " + cfg.save);
  EXPECT_HAS(mgtest::error_of([&] { train_lm(cfg, corpus); }), "is in use by process");
  EXPECT_FALSE(std::filesystem::exists(cfg.save + "/checkpoint.ckpt"));
}

// The other run has not saved yet: "no checkpoint to continue from" would send the user to start
// a second run in the same folder; the folder is named as busy instead.
TEST(RunDirectory, AResumeIntoAFolderAnotherRunHoldsNamesThatRun) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("locked_resume"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("locked_resume"));
  cfg.max_steps = 1, cfg.resume = true;
  std::filesystem::create_directories(cfg.save);
  {
    const RunLock other(cfg.save, "mosgrad train --save " + cfg.save);
    EXPECT_HAS(mgtest::error_of([&] { train_lm(cfg, corpus); }),
               "is in use by process " + std::to_string(::getpid()) + " (mosgrad train --save ");
  }
  // Once that run ends, the same command gets the usual answer.
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(cfg, corpus); }),
             "there is no ");
}

// A kill between a finished run's last checkpoint and its plot: the resume trains nothing and
// draws the plot. A kill between the first best.ckpt and the first checkpoint: --resume says what
// works (a new run there is refused too, to keep that model).
TEST(RunDirectory, AResumeAfterAKillBetweenTwoSavesFinishesOrExplains) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("between_saves"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("between_saves"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  const std::string curves = cfg.save + "/curves.svg";
  ASSERT_TRUE(std::filesystem::remove(curves));
  TrainConfig resume = cfg;
  resume.resume = true;
  train_lm(resume, corpus);
  EXPECT_TRUE(std::filesystem::exists(curves));
  ASSERT_TRUE(std::filesystem::remove(cfg.save + "/checkpoint.ckpt"));
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(resume, corpus); }),
             "a run stopped before its first checkpoint left " + cfg.save +
                 "/best.ckpt: move it away and start a new run without --resume");
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(cfg, corpus); }),
             "already holds a model");
}

TEST(RunDirectory, ResumeRefusesFlagsThatDefineTheRun) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("resume_flags"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("resume_flags"));
  cfg.max_steps = 2;
  train_lm(cfg, corpus);
  cfg.resume = true, cfg.max_steps = 3;
  TrainConfig adam = cfg;
  adam.optimizer = "adam";
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(adam, corpus); }),
             "was made with --optimizer sgd; it cannot continue with --optimizer adam (give "
             "--optimizer sgd, as the run was made,");
  TrainConfig wider = cfg;
  wider.model.nhid += 1;
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(wider, corpus); }),
             "--nhid 12; it cannot continue with --nhid 13");
  TrainConfig batch = cfg;
  batch.batch_size += 1;
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(batch, corpus); }),
             "--batch_size");
  // The same words in another text (its training file grown by lines of its own): every batch
  // would differ, so the run would not continue. The same text in another folder is the corpus.
  const std::string grown = mgtest::temp_dir("resume_flags_grown"),
                    moved = mgtest::temp_dir("resume_flags_moved");
  for (const char* split : {"train", "valid", "test"})
    for (const std::string& dir : {grown, moved})
      std::filesystem::copy_file(corpus.dir + "/ptb." + split + ".txt",
                                 dir + "/ptb." + split + ".txt");
  const std::string train_text = mgtest::read_bytes(grown + "/ptb.train.txt");
  mgtest::write_bytes(grown + "/ptb.train.txt",
                      train_text + train_text.substr(0, train_text.find('\n', 200) + 1));
  const Corpus other_text = load_corpus(grown);
  ASSERT_EQ(other_text.vocab.words(), corpus.vocab.words());
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>([&] { train_lm(cfg, other_text); }),
             "--resume: the run in " + cfg.save + "/checkpoint.ckpt trains on " +
                 corpus_fingerprint(corpus) + ", and the corpus in " + grown + " is " +
                 corpus_fingerprint(other_text));
  // A model flag the model never reads (K and the latent dropout of a softmax head, as reproduce
  // gives every head; nhid with one layer) is no part of the run: not compared by a resume or a
  // finetune.
  TrainConfig soft = mgtest::small_config(corpus.dir, mgtest::temp_dir("resume_flags_softmax"));
  soft.model.head = HeadKind::Softmax, soft.model.nlayers = 1, soft.model.n_experts = 5;
  soft.max_steps = 2;
  train_lm(soft, corpus);
  soft.resume = true, soft.max_steps = 3;
  soft.model.n_experts = 1, soft.model.dropoutl = 0.3f, soft.model.nhid = 30;
  EXPECT_EQ(mgtest::error_of([&] { train_lm(soft, corpus); }), "");
  soft.resume = false, soft.max_steps = 0, soft.epochs = 1, soft.model.n_experts = 7;
  EXPECT_EQ(mgtest::error_of([&] { train_lm(soft, corpus, {}, true); }), "");
  TrainConfig lower_lr = cfg;  // a flag that may change on the way, and the corpus moved
  lower_lr.lr /= 2;
  EXPECT_EQ(mgtest::error_of([&] { train_lm(lower_lr, load_corpus(moved)); }), "");
}

// Weights that give a finite but absurd loss (e^100 perplexity) must stop the run before anything
// is saved: the checkpoint and best model on disk stay the last good ones.
TEST(RunDirectory, AnAstronomicalFiniteLossStopsTrainingAndKeepsTheLastGoodFiles) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("astronomical"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("astronomical"));
  cfg.max_steps = 2;
  train_lm(cfg, corpus);
  const std::string state = cfg.save + "/checkpoint.ckpt", best = cfg.save + "/best.ckpt";
  Checkpoint ck = load_checkpoint(state);
  for (auto& [name, t] : ck.tensors)  // huge but finite logits: the loss is ~1e6 nats, not inf
    if (name == "model.decoder.bias") {
      std::vector<float> v = t.to_vector();
      for (size_t i = 0; i < v.size(); ++i) v[i] = i == 0 ? 1e6f : 0.0f;
      t = Tensor::from_vector(v, t.shape());
    }
  save_checkpoint(state, ck.tensors, ck.strings);
  const std::string state_bytes = read_file(state, "state"), best_bytes = read_file(best, "best");
  cfg.resume = true, cfg.max_steps = 4;
  const std::string e = mgtest::error_of([&] { train_lm(cfg, corpus); });
  EXPECT_HAS(e, "training diverged: the training loss is");
  EXPECT_HAS(e, "nothing was saved");
  EXPECT_EQ(read_file(state, "state"), state_bytes);
  EXPECT_EQ(read_file(best, "best"), best_bytes);
}

// A run refused for what it was asked (a finetune with no trained model, --device cuda in a build
// without CUDA) leaves no folder behind: it is refused before the run directory is made. And a
// --resume from a damaged state says what works instead (a run without --resume refuses a
// folder that holds a state).
TEST(RunDirectory, ARefusedRunMakesNoFolderAndADamagedStateSaysWhatWorks) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("refused_run"));
  const std::string parent = mgtest::temp_dir("refused_run");
  TrainConfig cfg = mgtest::small_config(corpus.dir, parent + "/never");
  cfg.max_steps = 1;
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(cfg, corpus, {}, true); }),
             "finetune: there is no " + cfg.save +
                 "/best.ckpt to finetune; finetune continues a "
                 "trained run: train it first");
  EXPECT_FALSE(std::filesystem::exists(cfg.save));
  if (!cuda_is_built_in()) {
    TrainConfig gpu = cfg;
    gpu.device = Device::CUDA;
    EXPECT_NE(mgtest::error_of<std::exception>([&] { train_lm(gpu, corpus); }), "");
    EXPECT_FALSE(std::filesystem::exists(cfg.save));
  }
  train_lm(cfg, corpus);
  const std::string state = cfg.save + "/checkpoint.ckpt";
  std::string bytes = read_file(state, "state");
  bytes[bytes.size() / 2] ^= 1;
  mgtest::write_bytes(state, bytes);
  TrainConfig resume = cfg;
  resume.resume = true, resume.max_steps = 2;
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(resume, corpus); }),
             "is corrupt: checksum mismatch");
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(resume, corpus); }),
             ". The run cannot continue from it: start again with another --save (" + cfg.save +
                 "/best.ckpt still holds the best model saved), or move it and best.ckpt away to "
                 "start over in " +
                 cfg.save);
}
