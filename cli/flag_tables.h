// The flags of every `mosgrad` command, as tables (io/flags.h) bound to a CommandLine: the rows of
// commands() (cli/commands.h) point at these. For each command, up to three functions:
//   X_defaults(c, preset)  the command's defaults, before any flag applies (`preset` is --preset
//                          as given, "" when it was not)
//   X_flags(c)             the table: the parser applies the flags with it, --help and
//                          docs/cli.md print it with the defaults it reads back
//   X_finish(c)            the checks that need every flag applied, still before any work starts
#pragma once

#include <string>

#include "cli/command_line.h"
#include "io/flags.h"

namespace mg {

// train and finetune: the preset (default small-mos), then the flags given, in order.
void train_defaults(CommandLine& c, const std::string& preset);
FlagTable train_flags(CommandLine& c);
void train_finish(CommandLine& c);  // --gemm/--precision where they can run; --data resolved

// graph: the flags that build a model (train's model rows, its batch, seed and paths; preset tiny
// unless given) and --out FILE.
void graph_defaults(CommandLine& c, const std::string& preset);
FlagTable graph_flags(CommandLine& c);

// gradcheck: graph's model flags (preset tiny unless given; without --preset E = H = 16, K = 3),
// a small batch (B = 2, T = 5, V = 50) and the check's own flags (--vocab, --entries, --tolerance,
// --params).
void gradcheck_defaults(CommandLine& c, const std::string& preset);
FlagTable gradcheck_flags(CommandLine& c);
void gradcheck_finish(CommandLine& c);  // the check's seed is --seed

// The commands that run a saved model, and bottleneck-demo. model_finish: --model names the
// checkpoint itself, so --save or --preset beside it (which only name the default
// <save>/best.ckpt) is refused rather than ignored.
void model_finish(CommandLine& c);
FlagTable eval_flags(CommandLine& c);
FlagTable dyneval_flags(CommandLine& c);
FlagTable generate_flags(CommandLine& c);
void export_defaults(CommandLine& c, const std::string& preset);  // --out model.safetensors
FlagTable export_flags(CommandLine& c);
void import_defaults(CommandLine& c, const std::string& preset);  // --out imported.ckpt
FlagTable import_flags(CommandLine& c);
void rank_defaults(CommandLine& c, const std::string& preset);  // --split valid --out rank
FlagTable rank_flags(CommandLine& c);
FlagTable pointer_flags(CommandLine& c);
void demo_defaults(CommandLine& c, const std::string& preset);  // --out bottleneck-demo, 1 thread
FlagTable demo_flags(CommandLine& c);

FlagTable reproduce_flags(CommandLine& c);
void reproduce_finish(CommandLine& c);  // --plan given and known; --report without run flags

FlagTable plot_flags(CommandLine& c);  // --title; RUN_DIR is positional

}  // namespace mg
