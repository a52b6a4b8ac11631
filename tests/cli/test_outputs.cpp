// An output flag never loses a file mosgrad did not write (io/own_output.h): export, import,
// graph, rank and bottleneck-demo replace only their own earlier output at the name; a user's
// file, a run's checkpoint, a directory or a symlink there is refused before any work and left
// byte for byte as it was.
#include <gtest/gtest.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "io/file_ops.h"
#include "io/own_output.h"
#include "io/safetensors.h"
#include "lm/corpus.h"
#include "lm/model_io.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

// Runs `mosgrad <words>` as the program does; the message it throws, "" when it returns.
std::string error_of_command(std::vector<std::string> words) {
  words.insert(words.begin(), "mosgrad");
  return mgtest::error_of<std::exception>([&] {
    CommandLine c = parse_command(words);
    find_command(words[1]).run(c);
  });
}

struct Files {
  mgtest::TempDir dir;
  std::string data, model;
  Files() {
    data = mgtest::write_synthetic_corpus("outputs");
    const Corpus corpus = load_corpus(data);
    model = dir.file("model.ckpt");
    save_model(model, *mgtest::scaled_tiny_model(corpus.vocab.size(), 3), corpus.vocab);
  }
  // A file of the user's at `name`, its bytes.
  std::string users(const std::string& name) {
    mgtest::write_bytes(dir.file(name), "my notes\n");
    return dir.file(name);
  }
};

// The refusal: the command, the flag and the path named, the file unchanged.
void expect_refused(const std::vector<std::string>& words, const std::string& path,
                    const std::string& bytes, const std::string& why) {
  const std::string e = error_of_command(words);
  EXPECT_HAS(e, words[0] + ": --out " + path + " is there and is " + why);
  EXPECT_HAS(e, "move it away or choose another --out");
  EXPECT_EQ(mgtest::read_bytes(path), bytes) << words[0] << " changed " << path;
}

}  // namespace

TEST(Outputs, ExportAndImportReplaceOnlyTheirOwnFiles) {
  Files f;
  const std::string notes = f.users("notes.txt");
  expect_refused({"export", "--model", f.model, "--out", notes}, notes, "my notes\n",
                 "not a safetensors file written by mosgrad export");
  // A run's checkpoint is mosgrad's, but not an export: refused too.
  const std::string run_state = f.dir.file("checkpoint.ckpt");
  fs::copy_file(f.model, run_state);
  const std::string state_bytes = mgtest::read_bytes(run_state);
  expect_refused({"export", "--model", f.model, "--out", run_state}, run_state, state_bytes,
                 "not a safetensors file written by mosgrad export");
  fs::create_directory(f.dir.file("a_dir"));
  EXPECT_HAS(error_of_command({"export", "--model", f.model, "--out", f.dir.file("a_dir")}),
             "is there and is a directory");
  fs::create_symlink(notes, f.dir.file("link.safetensors"));
  EXPECT_HAS(
      error_of_command({"export", "--model", f.model, "--out", f.dir.file("link.safetensors")}),
      "is there and is a symlink");
  EXPECT_EQ(mgtest::read_bytes(notes), "my notes\n");

  // Its own export it replaces (exporting again after more training).
  const std::string st = f.dir.file("model.safetensors");
  EXPECT_EQ(error_of_command({"export", "--model", f.model, "--out", st}), "");
  EXPECT_EQ(error_of_command({"export", "--model", f.model, "--out", st}), "");

  // import: never over a user's file, nor over a model training saved (best.ckpt) ...
  expect_refused({"import", "--in", st, "--out", notes}, notes, "my notes\n",
                 "not a checkpoint written by mosgrad import");
  const std::string best = f.dir.file("best.ckpt");
  fs::copy_file(f.model, best);
  const std::string best_bytes = mgtest::read_bytes(best);
  expect_refused({"import", "--in", st, "--out", best}, best, best_bytes,
                 "not a checkpoint written by mosgrad import");
  // ... but over its own earlier import.
  const std::string imported = f.dir.file("imported.ckpt");
  EXPECT_EQ(error_of_command({"import", "--in", st, "--out", imported}), "");
  EXPECT_EQ(error_of_command({"import", "--in", st, "--out", imported}), "");
  EXPECT_EQ(load_model(imported).model->config.summary(),
            load_model(f.model).model->config.summary());
}

TEST(Outputs, GraphRankAndTheDemoReplaceOnlyTheirOwnFiles) {
  Files f;
  const std::string notes = f.users("graph.dot");
  expect_refused({"graph", "--preset", "tiny", "--out", notes}, notes, "my notes\n",
                 "not a graph written by mosgrad graph");
  const std::string dot = f.dir.file("tiny.dot");
  EXPECT_EQ(error_of_command({"graph", "--preset", "tiny", "--out", dot}), "");
  EXPECT_EQ(error_of_command({"graph", "--preset", "tiny", "--out", dot}), "");
  // Graphviz's drawing goes beside it, at DOT.svg: a user's file there is refused too.
  const std::string drawing = f.users("tiny.dot.svg");
  expect_refused({"graph", "--preset", "tiny", "--out", dot}, drawing, "my notes\n",
                 "not Graphviz's drawing of a mosgrad graph");

  // rank --out DIR writes spectrum.csv and spectrum.svg there.
  const std::string out = f.dir.file("rank");
  const std::vector<std::string> rank = {"rank",    "--model", f.model, "--data", f.data,
                                         "--split", "valid",   "--out", out};
  EXPECT_EQ(error_of_command(rank), "");
  EXPECT_EQ(error_of_command(rank), "");  // its own files: replaced
  for (const char* name : {"spectrum.csv", "spectrum.svg"}) {
    const std::string path = out + "/" + name;
    mgtest::write_bytes(path, "my notes\n");
    expect_refused(rank, path, "my notes\n", "not a ");
    fs::remove(path);
  }
  // bottleneck-demo is refused before its minute of fitting.
  const std::string demo = f.dir.file("demo");
  fs::create_directory(demo);
  mgtest::write_bytes(demo + "/demo.csv", "my notes\n");
  expect_refused({"bottleneck-demo", "--out", demo}, demo + "/demo.csv", "my notes\n",
                 "not a table written by mosgrad bottleneck-demo");
}

// A read-only run folder was found out at the first save, after the steps before it (up to an
// epoch) had run. The probe file is the first file a command opens for writing; refused here by
// the I/O hook as a folder without write permission refuses it (EACCES), even for root.
TEST(Outputs, AFolderThatTakesNoFilesIsRefusedBeforeAnyWork) {
  Files f;
  const Corpus corpus = load_corpus(f.data);
  const TrainConfig cfg = mgtest::small_config(f.data, f.dir.file("run"));
  const io_fault::FaultPlan refused{io_fault::kOpen, 1, EACCES};
  {
    io_fault::Scope hook(refused);
    int steps = 0;
    TrainHooks hooks;
    hooks.on_step = [&](int64_t, double) { ++steps; };
    EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(cfg, corpus, hooks); }),
               "--save " + cfg.save + ": cannot create files in " + f.dir.str() +
                   " (Permission denied); nothing was started");
    EXPECT_EQ(steps, 0);
  }
  EXPECT_FALSE(fs::exists(cfg.save));
  const std::string out = f.dir.file("rank");
  {
    io_fault::Scope hook(refused);
    EXPECT_HAS(error_of_command({"rank", "--model", f.model, "--data", f.data, "--out", out}),
               "--out " + out + ": cannot create files in " + f.dir.str());
  }
  EXPECT_FALSE(fs::exists(out));
  // Every command that writes: the folder named (the folder of an --out file), before any work.
  const std::string sub = f.dir.file("sub");
  fs::create_directory(sub);
  const std::vector<std::pair<std::vector<std::string>, std::string>> commands = {
      {{"export", "--model", f.model, "--out", sub + "/m.safetensors"}, sub},
      {{"import", "--in", f.dir.file("x.safetensors"), "--out", sub + "/m.ckpt"}, sub},
      {{"graph", "--preset", "tiny", "--out", sub + "/g.dot"}, sub},
      {{"bottleneck-demo", "--out", sub + "/demo"}, sub}};
  for (const auto& [words, folder] : commands) {
    io_fault::Scope hook(refused);
    EXPECT_HAS(error_of_command(words),
               "--out " + words.back() + ": cannot create files in " + folder + " (");
    EXPECT_TRUE(fs::is_empty(sub)) << words[0];
  }
  // Unhooked, the probe leaves nothing behind; a file where a folder must be is named.
  EXPECT_NO_THROW(require_writable_dir("--out", f.dir.file("new/sub")));
  for (const auto& e : fs::directory_iterator(f.dir.str()))
    EXPECT_NE(e.path().filename().string().rfind(".mosgrad-probe", 0), 0u) << e.path();
  EXPECT_HAS(
      mgtest::error_of<std::exception>([&] { require_writable_dir("--save", f.model + "/sub"); }),
      "it is a file, not a folder");
}

// An output folder that is a symlink to nothing, or an output file whose folder does not exist,
// failed only at the save, after rank's, bottleneck-demo's or export's work: named before it.
TEST(Outputs, AnOutputThatCannotBeMadeThereIsNamedBeforeAnyWork) {
  Files f;
  const std::string link = f.dir.file("gone");
  fs::create_symlink(f.dir.file("nowhere"), link);
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"rank", "--model", f.model, "--data", f.data, "--out", link},
        {"bottleneck-demo", "--out", link + "/demo"},
        {"export", "--model", f.model, "--out", link + "/m.safetensors"}})
    EXPECT_HAS(error_of_command(words), "--out " + words.back() + ": " + link +
                                            " is a symlink to " + f.dir.file("nowhere") +
                                            ", which does not exist");
  // A bare name, with or without its slash, in the folder the command runs in.
  const fs::path cwd = fs::current_path();
  fs::current_path(f.dir.str());
  for (const std::string bare : {"gone", "gone/", "gone/sub"})
    EXPECT_HAS(mgtest::error_of<std::exception>([&] { require_writable_dir("--out", bare); }),
               "--out " + bare + ": gone is a symlink to");
  fs::current_path(cwd);
  TrainConfig cfg = mgtest::small_config(f.data, link + "/run");
  EXPECT_HAS(mgtest::error_of<std::exception>([&] { train_lm(cfg, load_corpus(f.data)); }),
             "--save " + cfg.save + ": " + link + " is a symlink to");
  EXPECT_FALSE(fs::exists(f.dir.file("nowhere")));
  const std::string missing = f.dir.file("no/such");
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"export", "--model", f.model, "--out", missing + "/m.safetensors"},
        {"import", "--in", f.dir.file("x.safetensors"), "--out", missing + "/m.ckpt"},
        {"graph", "--preset", "tiny", "--out", missing + "/g.dot"}})
    EXPECT_HAS(error_of_command(words),
               "--out " + words.back() + ": the folder " + missing + " does not exist");
  EXPECT_FALSE(fs::exists(f.dir.file("no")));
}

// import once wrote a checkpoint no command could use from a file without its words.
TEST(Outputs, ImportRefusesAModelWithoutItsVocabulary) {
  Files f;
  const LoadedModel m = load_model(f.model);
  std::map<std::string, std::string> meta;
  for (const auto& [k, v] : m.model->config.to_map()) meta["model." + k] = v;
  const std::string in = f.dir.file("no_words.safetensors"), out = f.dir.file("no_words.ckpt");
  save_safetensors(in, m.model->named_parameters(), meta);
  EXPECT_HAS(error_of_command({"import", "--in", in, "--out", out}),
             "import: " + in + " has no vocabulary");
  EXPECT_FALSE(fs::exists(out));
}

// plot redraws every learning-curve plot of a run, the finetune's too (as train and finetune draw
// them at each epoch's end), each only over a plot mosgrad drew.
TEST(Outputs, PlotRedrawsTheTrainingsAndTheFinetunesCurves) {
  Files f;
  const Corpus corpus = load_corpus(f.data);
  TrainConfig cfg = mgtest::small_config(f.data, f.dir.file("run"));
  cfg.epochs = 1;
  train_lm(cfg, corpus);
  EXPECT_EQ(error_of_command({"plot", cfg.save}), "");  // no finetune yet: its plot is not drawn
  mgtest::write_bytes(cfg.save + "/finetune_metrics.jsonl", "");  // nor of one stopped at once
  EXPECT_EQ(error_of_command({"plot", cfg.save}), "");
  EXPECT_FALSE(fs::exists(cfg.save + "/finetune_curves.svg"));
  fs::remove(cfg.save + "/finetune_metrics.jsonl");
  train_lm(cfg, corpus, {}, true);
  for (const char* plot : {"curves.svg", "finetune_curves.svg"}) fs::remove(cfg.save + "/" + plot);
  EXPECT_EQ(error_of_command({"plot", cfg.save, "--title", "T"}), "");
  EXPECT_HAS(mgtest::read_bytes(cfg.save + "/curves.svg"), "T");
  EXPECT_HAS(mgtest::read_bytes(cfg.save + "/finetune_curves.svg"), "T (finetune)");
  mgtest::write_bytes(cfg.save + "/finetune_curves.svg", "my notes\n");
  EXPECT_NE(error_of_command({"plot", cfg.save}), "");
  EXPECT_EQ(mgtest::read_bytes(cfg.save + "/finetune_curves.svg"), "my notes\n");
}

// A model command with no --model reads <save>/best.ckpt, or runs/<preset>/best.ckpt: when that is
// missing, the error names the flag that chose it and the flags that name another.
TEST(Outputs, AMissingDefaultModelSaysWhereItsPathCameFrom) {
  const mgtest::TempDir dir;
  EXPECT_HAS(error_of_command({"eval", "--save", dir.file("run")}),
             "there is no model at " + dir.file("run") + "/best.ckpt, the default of --save " +
                 dir.file("run") +
                 " (<save>/best.ckpt): name the model with --model FILE, or "
                 "its run directory with --save DIR");
  EXPECT_HAS(error_of_command({"export", "--preset", "tiny", "--out", dir.file("m.safetensors")}),
             "the default of --preset tiny (runs/<preset>/best.ckpt)");
}
