// CommandLine: everything the flags of any `mosgrad` command can set, parsed from argv by
// parse_command (cli/commands.h). Each command reads the part its flag table binds: train,
// finetune, graph and gradcheck `train` (a preset, then the flags); the commands that run a saved
// model `model`; gradcheck also `gradcheck`; reproduce `reproduce`; plot `run_dir` and `title`.
#pragma once

#include <string>
#include <vector>

#include "analysis/bottleneck_demo.h"
#include "analysis/model_gradcheck.h"
#include "analysis/rank.h"
#include "lm/dyneval.h"
#include "lm/generate.h"
#include "lm/pointer.h"
#include "lm/train_config.h"
#include "reproduce/reproduce.h"

namespace mg {

// eval, dyneval, pointer, generate, export, import, rank and bottleneck-demo.
struct ModelCommandOptions {
  std::string model;  // checkpoint; default <save>/best.ckpt
  std::string save;   // default runs/<preset>
  std::string preset = "small-mos";
  std::string data;            // corpus directory (resolve_data_dir)
  std::string split = "test";  // valid | test | train
  std::string device = "cpu";
  int64_t batch_size = 0;  // 0: 1 for test, 10 otherwise (the papers' conventions)
  int64_t grad_groups = 1;  // eval: column groups, shared among mpirun's processes
  int64_t bptt = 70;       // eval's segment length
  int64_t threads = 0;     // 0: all cores
  PathFlags paths;         // --fused-lstm, --fused-head, --gemm, --precision
  DynevalConfig dyneval;
  GenerateConfig generate;
  std::string out;         // export / import output; rank / bottleneck-demo output directory
  RankOptions rank;        // rank
  PointerOptions pointer;  // pointer
  DemoConfig demo;         // bottleneck-demo
  std::string in;          // import input
  std::string model_path() const;  // --model, else <save or runs/preset>/best.ckpt
};

struct CommandLine {
  std::string command;             // argv[1]: the row of commands() that parsed it
  std::vector<std::string> words;  // the whole command line as typed (reproduce records it)
  bool help = false;               // --help was given: nothing below was applied
  std::vector<std::string> given;  // the flags on the command line, names normalised ('-' -> '_')
  TrainConfig train;               // train, finetune, graph, gradcheck
  ModelCommandOptions model;       // the commands that run a saved model
  ModelGradcheckOptions gradcheck;
  ReproduceOptions reproduce;
  std::string out;      // graph: the DOT file
  bool values = false;  // graph --values
  std::string run_dir;  // plot: the run directory (its one positional argument)
  std::string title;    // plot
  // --threads of whichever part this command's table binds (0: all cores); run_mosgrad applies it
  // once, after parsing, for every command.
  int64_t threads() const {
    for (const int64_t t : {static_cast<int64_t>(train.threads), model.threads, reproduce.threads})
      if (t > 0) return t;
    return 0;
  }
  bool gave(const std::string& flag) const {  // flag: a name as `given` holds it, e.g. "save"
    for (const std::string& g : given)
      if (g == flag) return true;
    return false;
  }
};

}  // namespace mg
