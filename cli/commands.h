// The options of the subcommands that run a saved model (eval, dyneval, generate, export, import,
// rank, pointer) and of bottleneck-demo,
// as flag tables (lm/flags.h): cli/mosgrad.cpp parses with them, --help prints them, and a test
// checks that docs/cli.md, generated from them, is current. train and finetune use
// TrainConfig::flag_table().
#pragma once

#include <string>

#include "analysis/bottleneck_demo.h"
#include "analysis/model_gradcheck.h"
#include "analysis/rank.h"
#include "cli/reproduce.h"
#include "lm/dyneval.h"
#include "lm/flags.h"
#include "lm/generate.h"
#include "lm/pointer.h"
#include "lm/train_config.h"

namespace mg {

struct ModelCommandOptions {
  std::string model;  // checkpoint; default <save>/best.ckpt
  std::string save;   // default runs/<preset>
  std::string preset = "small-mos";
  std::string data;            // corpus directory (resolve_data_dir)
  std::string split = "test";  // valid | test | train
  std::string device = "cpu";
  int64_t batch_size = 0;  // 0: 1 for test, 10 otherwise (the papers' conventions)
  int64_t bptt = 70;       // eval's segment length
  int64_t threads = 0;     // 0: all cores
  PathFlags
      paths;  // --fused-lstm, --fused-head, --gemm, --precision (the commands that run a model)
  DynevalConfig dyneval;
  GenerateConfig generate;
  std::string out;         // export / import output; rank / bottleneck-demo output directory
  RankOptions rank;        // rank
  PointerOptions pointer;  // pointer
  DemoConfig demo;         // bottleneck-demo
  std::string in;          // import input
  std::string model_path() const;  // --model, else <save or runs/preset>/best.ckpt
};

// The commands with a table, and each one's table bound to `o`; an unknown command throws.
const std::vector<std::string>& model_command_names();
FlagTable model_command_flags(const std::string& command, ModelCommandOptions& o);

// The command line after `mosgrad <command>` (argv[2..argc)), parsed and every flag applied and
// checked before any work starts. Both return with *help / true when --help was given (nothing
// applied). train/finetune: the preset first (it sets every flag), then the flags given, in order;
// --data resolved.
TrainConfig parse_train_command(const std::string& command, int argc, char** argv, bool* help);
// graph: the train flags (preset default tiny) plus --out FILE (default graph.dot).
TrainConfig parse_graph_command(int argc, char** argv, std::string* out, bool* help);
// The graph command's table: cfg's flags and --out bound to *out.
FlagTable graph_flags(TrainConfig& cfg, std::string& out);
// gradcheck: the train flags (preset default tiny; without --preset E = H = 16, K = 3), the batch
// (default B=2, T=5, V=50) and the check's own flags (--vocab, --entries, --tolerance, --params).
struct GradcheckCommand {
  TrainConfig cfg;
  ModelGradcheckOptions options;
};
GradcheckCommand parse_gradcheck_command(int argc, char** argv, bool* help);
// The gradcheck command's table: cfg's flags and the check's, bound to c.
FlagTable gradcheck_flags(GradcheckCommand& c);
bool parse_model_command(const std::string& command, const FlagTable& table, int argc, char** argv);

// The reproduce command's table (cli/reproduce.h), bound to o.
FlagTable reproduce_flags(ReproduceOptions& o);

// docs/cli.md: every command's flags, sections and defaults as Markdown, read from the same flag
// tables the parser uses (`mosgrad help --markdown`), so no default or range is typed by hand in
// the docs. A test checks that docs/cli.md is this text.
std::string cli_markdown();

}  // namespace mg
