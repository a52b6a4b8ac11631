// The flag tables (io/flags.h): every bad value is one clear error naming the flag, the value and
// what is allowed, before any work starts; docs/cli.md is the flag tables' own output; and the
// trainer refuses what would lose a user's run or score the wrong thing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/commands.h"
#include "lm/train.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

namespace {

// The message of the std::invalid_argument that fn throws ("" when none).
template <typename Fn>
std::string invalid_of(Fn&& fn) {
  return mgtest::error_of<std::invalid_argument>(fn);
}

std::string train_error(const std::string& name, const std::string& value) {
  return invalid_of([&] { preset_config("tiny").set(name, value); });
}

}  // namespace

TEST(Flags, BadValuesNameTheFlagTheValueAndWhatIsAllowed) {
  EXPECT_HAS(train_error("log-interval", "0"), "--log_interval must be in [1, ");
  EXPECT_HAS(train_error("emsize", "9223372036854775807"),
             "--emsize must be in [1, 1048576], got 9223372036854775807");
  EXPECT_HAS(train_error("emsize", "99999999999999999999"), "--emsize is out of range");
  EXPECT_HAS(train_error("batch_size", "10xyz"),
             "--batch_size expects a whole number, got '10xyz'");
  EXPECT_HAS(train_error("batch_size", ""), "--batch_size expects a whole number, got ''");
  EXPECT_HAS(train_error("lr", "fast"), "--lr expects a number, got 'fast'");
  EXPECT_HAS(train_error("lr", "nan"), "--lr must be a finite number");
  EXPECT_HAS(train_error("lr", "0x1p-3"), "--lr expects a number, got '0x1p-3'");
  // A path the system would refuse (ENAMETOOLONG) is refused as the flag is read, naming it.
  EXPECT_HAS(train_error("save", "runs/" + std::string(300, 'x') + "/a"),
             "--save: the name 'xxxxxxxxxxxxxxxxxxxx...' in the path is 300 bytes long; a file or "
             "folder name may have at most 255 bytes");
  EXPECT_HAS(train_error("data", std::string(5000, 'd')), "--data is a path of 5000 bytes");
  EXPECT_EQ(train_error("save", "runs/" + std::string(255, 'x')), "");
  EXPECT_HAS(train_error("lr", "1e-400"), "--lr is too close to 0 to hold, got '1e-400'");
  EXPECT_HAS(train_error("lr", "0"), "--lr must be in [");
  EXPECT_HAS(train_error("dropout", "1"), "--dropout must be in [0, 1), got 1");
  EXPECT_HAS(train_error("wdrop", "-0.1"), "--wdrop must be in [0, 1)");
  EXPECT_HAS(train_error("test_batch_size", "0"), "--test_batch_size must be in [1, ");
  EXPECT_HAS(train_error("optimizer", "adamw"), "--optimizer expects one of sgd|adam, got 'adamw'");
  EXPECT_HAS(train_error("device", "gpu"), "--device expects cpu or cuda, got 'gpu'");
  EXPECT_HAS(train_error("tied", "maybe"), "--tied expects true or false, got 'maybe'");
  EXPECT_HAS(train_error("head", "softmx"), "unknown head 'softmx'");
  EXPECT_HAS(train_error("preset", "huge"), "unknown preset 'huge'");
  EXPECT_HAS(train_error("batchsize", "3"),
             "unknown flag --batchsize for train (did you mean --batch_size?)");
  CommandLine o;
  const FlagTable eval = command_flags("eval", o);
  EXPECT_HAS(invalid_of([&] { apply_flag(eval, "eval", "splt", "test"); }),
             "unknown flag --splt for eval (did you mean --split?)");
  EXPECT_HAS(invalid_of([&] { apply_flag(eval, "eval", "split", "dev"); }),
             "--split expects one of valid|test|train, got 'dev'");
  EXPECT_HAS(invalid_of([&] { apply_flag(eval, "eval", "preset", "bogus"); }),
             "--preset expects one of tiny|");
  const FlagTable gen = command_flags("generate", o);
  EXPECT_HAS(invalid_of([&] { apply_flag(gen, "generate", "temperature", "0"); }),
             "--temperature must be in [");
  // Values that parse but mean nothing useful: statistics of no segment, the cache alone (a word
  // outside its window gets probability 0), a list of no runs (not "every run").
  const FlagTable dyn = command_flags("dyneval", o);
  EXPECT_HAS(invalid_of([&] { apply_flag(dyn, "dyneval", "max_stat_batches", "0"); }),
             "--max_stat_batches must be -1 (all) or at least 1, got 0");
  EXPECT_NO_THROW(apply_flag(dyn, "dyneval", "max_stat_batches", "-1"));
  const FlagTable ptr = command_flags("pointer", o);
  EXPECT_HAS(invalid_of([&] { apply_flag(ptr, "pointer", "lambdasm", "1"); }),
             "--lambdasm must be in [0, 1), got 1");
  const FlagTable rep = command_flags("reproduce", o);
  for (const char* none : {"", ","})
    EXPECT_HAS(invalid_of([&] { apply_flag(rep, "reproduce", "runs", none); }), "names no run");
}

TEST(Flags, GoodValuesLandInTheConfig) {
  TrainConfig c = preset_config("tiny");
  c.set("batch-size", "7"), c.set("dropout", "0.25"), c.set("tied", "no"), c.set("head", "mos"),
      c.set("seed", "42");
  c.set("max_minutes", "1.5"), c.set("device", "cpu"), c.set("optimizer", "adam"),
      c.set("resume", "true");
  EXPECT_EQ(c.batch_size, 7);
  EXPECT_FLOAT_EQ(c.model.dropout, 0.25f);
  EXPECT_FALSE(c.model.tied);
  EXPECT_EQ(c.model.head, HeadKind::MoS);
  EXPECT_EQ(c.seed, 42u);
  EXPECT_DOUBLE_EQ(c.max_minutes, 1.5);
  EXPECT_EQ(c.optimizer, "adam");
  EXPECT_TRUE(c.resume);
}

TEST(Flags, TheCommandLineSaysWhatToWrite) {
  auto parse = [](std::vector<std::string> words) {
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(w.data());
    return parse_command_line("train", static_cast<int>(argv.size()), argv.data(), 2, {"resume"});
  };
  EXPECT_HAS(invalid_of([&] {
               parse({"mosgrad", "train", "tiny"});
             }),
             "unexpected argument 'tiny' for train");
  EXPECT_HAS(invalid_of([&] { parse({"mosgrad", "train", "--bptt"}); }), "--bptt needs a value");
  EXPECT_EQ(invalid_of([&] {
              parse({"mosgrad", "train", "---words", "5"});
            }),
            "unexpected argument '---words' for train: one dash too many; flags are written "
            "--name value");
  EXPECT_EQ(invalid_of([&] {
              parse({"mosgrad", "train", "-max_steps", "3"});
            }),
            "unexpected argument '-max_steps' for train: one dash too few; flags are written "
            "--name value (--max_steps)");
  EXPECT_EQ(invalid_of([&] {
              parse_command({"mosgrad", "train", "--help=yes"});
            }),
            "--help takes no value: write --help alone");
  // A name the command lacks is unknown wherever it stands, also last, with no value after it.
  for (const std::vector<std::string>& words :
       {std::vector<std::string>{"mosgrad", "train", "--bogus"},
        {"mosgrad", "train", "--bogus", "--lr", "2"},
        {"mosgrad", "plot", "--bogus=1", "runs/x"}})
    EXPECT_HAS(invalid_of([&] { parse_command(words); }), "unknown flag --bogus for " + words[1]);
  EXPECT_HAS(invalid_of([&] {
               parse_command({"mosgrad", "generate", "--word"});
             }),
             "unknown flag --word for generate (did you mean --words?)");
  EXPECT_EQ(invalid_of([&] {
              parse({"mosgrad", "train", "--resume", "maybe"});
            }),
            "--resume expects true or false, got 'maybe' (--resume alone means true)");
  const ParsedArgs a =
      parse({"mosgrad", "train", "--resume", "--batch-size=3", "--lr", "-2", "--resume", "false"});
  EXPECT_EQ(a.get("batch_size"), "3");
  EXPECT_EQ(a.get("lr"),
            "-2");  // a negative number is a value, not a flag (and --lr then refuses it)
  EXPECT_EQ(a.get("resume"), "false");  // the last one given
  EXPECT_TRUE(parse({"mosgrad", "train", "-h"}).help);
}

// The command table (cli/commands.h): every row runs, a preset comes before the flags that override
// it, --help applies nothing, plot's RUN_DIR is its one positional word, an unknown command lists
// the known ones.
TEST(Flags, EveryCommandIsOneRowOfTheTable) {
  for (const Command& row : commands()) {
    EXPECT_NE(row.run, nullptr) << row.name;
    EXPECT_HAS(usage(), std::string("  ") + row.name + " ");
    CommandLine c;
    c.command = row.name;
    EXPECT_HAS(command_help(c), row.usage);
  }
  const CommandLine t = parse_command({"mosgrad", "train", "--bptt", "7", "--preset", "tiny"});
  EXPECT_EQ(t.train.bptt, 7);           // the flag given after the preset is applied...
  EXPECT_EQ(t.train.model.emsize, 64);  // ...on top of tiny, wherever --preset stands
  const CommandLine h = parse_command({"mosgrad", "eval", "--split", "valid", "--help"});
  EXPECT_TRUE(h.help);
  EXPECT_EQ(h.model.split, "test");  // nothing applied
  const CommandLine p = parse_command({"mosgrad", "plot", "--title", "T", "runs/x"});
  EXPECT_EQ(p.run_dir, "runs/x");
  EXPECT_EQ(p.title, "T");
  EXPECT_HAS(invalid_of([] {
               parse_command({"mosgrad", "plot", "a", "b"});
             }),
             "plot takes one RUN_DIR, got 'a' and 'b'");
  EXPECT_HAS(invalid_of([] { parse_command({"mosgrad", "plot"}); }), "plot needs RUN_DIR");
  EXPECT_TRUE(parse_command({"mosgrad", "plot", "--help", "runs/x"}).help);  // not --help's value
  EXPECT_HAS(invalid_of([] {
               parse_command({"mosgrad", "evaluate"});
             }),
             "unknown command 'evaluate' (the commands: train, finetune, eval");
  EXPECT_EQ(parse_command({"mosgrad", "rank"}).model.split, "valid");  // rank's own default
}

// A flag that would do nothing beside another is refused, not silently ignored: --model names the
// checkpoint, so --save or --preset (which choose the default one) beside it is ambiguous;
// reproduce --report rewrites the tables of every run from results.jsonl, so --runs, --data and
// --device choose nothing there.
TEST(Flags, AFlagThatWouldBeIgnoredIsRefused) {
  for (const char* command : {"eval", "dyneval", "pointer", "generate", "export", "rank"}) {
    EXPECT_HAS(invalid_of([&] {
                 parse_command({"mosgrad", command, "--model", "a.ckpt", "--save", "runs/b"});
               }),
               std::string(command) + ": --model a.ckpt names the checkpoint itself; --save only");
    EXPECT_HAS(invalid_of([&] {
                 parse_command({"mosgrad", command, "--preset", "tiny", "--model", "a.ckpt"});
               }),
               "--preset only chooses the default one");
    EXPECT_EQ(parse_command({"mosgrad", command, "--model", "a.ckpt"}).model.model_path(),
              "a.ckpt");
    EXPECT_EQ(parse_command({"mosgrad", command, "--save", "runs/b"}).model.model_path(),
              "runs/b/best.ckpt");
  }
  for (const char* flag : {"--runs", "--data", "--device"}) {
    const std::string value = flag == std::string("--device") ? "cpu" : "mos-s1";
    EXPECT_HAS(
        invalid_of([&] {
          parse_command({"mosgrad", "reproduce", "--plan", "quick", "--report", flag, value});
        }),
        std::string(flag) + " has no effect there");
    EXPECT_EQ(invalid_of([&] {
                parse_command({"mosgrad", "reproduce", "--plan", "quick", flag, value});
              }),
              "");
  }
  EXPECT_HAS(invalid_of([] {
               parse_command({"mosgrad", "reproduce"});
             }),
             "reproduce needs --plan NAME: one of quick, afternoon, day, paper, ptb-1h, ptb-3h");
}

// In train and finetune a flag the run never reads is refused (cli/unused_flags.h), and taken
// where it is read. A model flag its head or size never reads is taken (reproduce gives K to every
// head): no part of the run, a resume does not compare it (RunDirectory.*). The model commands:
// --save beside --preset, and pointer's --grid beside the θ and λ it chooses.
TEST(Flags, AFlagTheRunNeverReadsIsRefused) {
  using Words = std::vector<std::string>;
  const std::vector<std::pair<Words, std::string>> refused = {
      {{"--tf32", "true"}, "--tf32 does nothing with --device cpu"},
      {{"--variable_bptt", "false", "--max_seq_len_delta", "9"},
       "--max_seq_len_delta does nothing with --variable_bptt false"}};
  const std::vector<Words> taken = {{"--variable_bptt", "true", "--max_seq_len_delta", "9"},
                                    {"--tf32", "false"},
                                    {"--head", "softmax", "--n_experts", "5", "--dropoutl", "0.2"},
                                    {"--nlayers", "1", "--nhid", "128"}};
  for (const std::string command : {"train", "finetune"}) {
    const auto words = [&](const Words& flags) {
      Words w = {"mosgrad", command, "--preset", "tiny"};
      w.insert(w.end(), flags.begin(), flags.end());
      return w;
    };
    for (const auto& [flags, message] : refused)
      EXPECT_HAS(invalid_of([&] { parse_command(words(flags)); }), command + ": " + message);
    for (const Words& flags : taken)
      EXPECT_EQ(invalid_of([&] { parse_command(words(flags)); }), "") << flags[1];
  }
  EXPECT_HAS(invalid_of([] {
               parse_command({"mosgrad", "eval", "--preset", "tiny", "--save", "r"});
             }),
             "eval: --save r names the run directory; --preset only chooses the default one");
  for (const char* chosen : {"--theta", "--lambdasm"})
    EXPECT_HAS(invalid_of([&] {
                 parse_command({"mosgrad", "pointer", "--grid", chosen, "0.5"});
               }),
               std::string("pointer: --grid chooses θ and λ on valid, so ") + chosen +
                   " does nothing beside it");
  EXPECT_EQ(invalid_of([] { parse_command({"mosgrad", "pointer", "--theta", "0.5"}); }), "");
}

// docs/cli.md is the flag tables' own text (mosgrad help --markdown), and so names every flag of
// every command with the program's defaults; regenerate it when a flag changes.
TEST(Flags, TheCliPageIsGeneratedFromTheTablesAndNamesEveryFlag) {
  std::ifstream in(std::string(MOSGRAD_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(in) << "docs/cli.md not found";
  std::stringstream text;
  text << in.rdbuf();
  const std::string page = text.str();
  EXPECT_EQ(page, cli_markdown())
      << "docs/cli.md is stale: build/release/mosgrad help --markdown > docs/cli.md";
  auto check = [&](const std::string& command, const FlagTable& table) {
    for (const Flag& f : table)
      EXPECT_NE(page.find("`--" + f.name + "`"), std::string::npos)
          << "docs/cli.md does not list --" << f.name << " (" << command << ")";
  };
  for (const Command& row : commands()) {
    CommandLine c;
    check(row.name, command_flags(row.name, c));
  }
}

TEST(Flags, TrainerRefusesToLoseOrMisreadARun) {
  const Corpus corpus = load_corpus(mgtest::write_synthetic_corpus("refusals"));
  TrainConfig cfg = mgtest::small_config(corpus.dir, mgtest::temp_dir("refusals"));
  cfg.resume = true;
  EXPECT_HAS(invalid_of([&] { train_lm(cfg, corpus); }),
             "--resume: there is no " + cfg.save + "/checkpoint.ckpt");
  cfg.resume = false, cfg.max_steps = 2;
  train_lm(cfg, corpus);
  EXPECT_HAS(invalid_of([&] { train_lm(cfg, corpus); }),
             "already holds a run");  // not silently replaced
  cfg.resume = true, cfg.max_steps = 3;
  EXPECT_NO_THROW(train_lm(cfg, corpus));  // continuing it is fine
  // Resumed at its budget, a run takes no step past it and leaves its files as they are.
  const std::string state = mgtest::read_bytes(cfg.save + "/checkpoint.ckpt"),
                    metrics = mgtest::read_bytes(cfg.save + "/metrics.jsonl");
  std::vector<double> again;
  TrainHooks hooks;
  hooks.on_step = [&](int64_t, double loss) { again.push_back(loss); };
  const TrainResult at_budget = train_lm(cfg, corpus, hooks);
  EXPECT_TRUE(again.empty()) << again.size() << " steps past --max-steps";
  EXPECT_TRUE(at_budget.stopped);
  EXPECT_EQ(at_budget.steps, 3);
  EXPECT_EQ(mgtest::read_bytes(cfg.save + "/checkpoint.ckpt"), state);
  EXPECT_EQ(mgtest::read_bytes(cfg.save + "/metrics.jsonl"), metrics);
  // Killed during the stop's validation (after the checkpoint, before its record): the resume
  // makes up that validation, and still takes no step.
  const size_t last = metrics.rfind('\n', metrics.size() - 2) + 1;
  ASSERT_NE(metrics.find("\"at_stop\":true", last), std::string::npos);
  mgtest::write_bytes(cfg.save + "/metrics.jsonl", metrics.substr(0, last));
  const TrainResult made_up = train_lm(cfg, corpus, hooks);
  EXPECT_TRUE(again.empty()) << again.size() << " steps past --max-steps";
  EXPECT_TRUE(std::isfinite(made_up.final_val_loss));
  const std::string redone = mgtest::read_bytes(cfg.save + "/metrics.jsonl");
  EXPECT_EQ(redone.substr(0, last), metrics.substr(0, last));
  EXPECT_NE(redone.find("\"at_stop\":true", last), std::string::npos);
  EXPECT_EQ(mgtest::read_bytes(cfg.save + "/checkpoint.ckpt"), state);

  // A validation split too short for its batch would score ppl 1 and become "best" forever; a
  // split too short for its flags is refused naming them.
  TrainConfig wide = mgtest::small_config(corpus.dir, mgtest::temp_dir("refusals_wide"));
  wide.eval_batch_size = static_cast<int64_t>(corpus.valid.size());
  EXPECT_HAS(invalid_of([&] { train_lm(wide, corpus); }),
             "the validation split of " + corpus.dir + " has " +
                 std::to_string(corpus.valid.size()) + " tokens, too few for --eval_batch_size");
  wide.eval_batch_size = 4, wide.max_train_tokens = 5;
  EXPECT_HAS(invalid_of([&] { train_lm(wide, corpus); }),
             "has 5 tokens (its first --max_train_tokens 5), too few for --batch_size 4");
  EXPECT_FALSE(std::filesystem::exists(wide.save + "/metrics.jsonl"));
  wide.max_train_tokens = 0, wide.save = wide.save + "/a_file";
  mgtest::write_bytes(wide.save, "mine");
  EXPECT_HAS(invalid_of([&] { train_lm(wide, corpus); }),
             "--save " + wide.save + " is a file, not a directory");
  EXPECT_EQ(mgtest::read_bytes(wide.save), "mine");
}

TEST(Flags, AnotherVocabularyOfTheSameSizeIsRefused) {
  Vocab a, b;
  for (const char* w : {"<eos>", "the", "cat"}) a.add(w);
  for (const char* w : {"<eos>", "cat", "the"}) b.add(w);
  EXPECT_NO_THROW(check_same_vocab(a, a, "m.ckpt"));
  try {
    check_same_vocab(a, b, "m.ckpt");
    FAIL() << "a permuted vocabulary was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_HAS(
        std::string(e.what()),
        "m.ckpt was trained on another vocabulary: word 1 is 'cat' there and 'the' in the corpus");
  }
  // A control character shows escaped: "the\r" and "the" would print alike.
  Vocab crlf;
  for (const char* w : {"<eos>", "the\r", "cat"}) crlf.add(w);
  EXPECT_HAS(mgtest::error_of([&] { check_same_vocab(a, crlf, "m.ckpt"); }),
             "word 1 is \"the\\r\" there and 'the' in the corpus");
  b.add("dog");
  EXPECT_THROW(check_same_vocab(a, b, "m.ckpt"), std::runtime_error);
}

// The checkpoint's record of a config is read back through the flag table: every flag is in it,
// a flag set on the command line shows there, and the model's entries are written exactly as
// ModelConfig::to_map writes them (a resumed run compares the two as text).
TEST(Flags, TheCheckpointRecordIsReadThroughTheTable) {
  for (const std::string& preset : preset_names()) {
    TrainConfig c = preset_config(preset);
    c.set("lr", "0.5"), c.set("dropout", "0.3"), c.set("max-steps", "7"), c.set("head", "moc");
    const auto m = c.to_map();
    for (const Flag& f : c.flag_table())
      EXPECT_EQ(m.count((f.section == "model" ? "model." : "") + f.name), 1u)
          << preset << ": --" << f.name;
    EXPECT_EQ(m.at("lr"), "0.5");
    EXPECT_EQ(m.at("max_steps"), "7");
    EXPECT_EQ(m.at("model.head"), "moc");
    for (const auto& [key, value] : c.model.to_map())
      EXPECT_EQ(m.at("model." + key), value) << preset << ": " << key;
  }
}
