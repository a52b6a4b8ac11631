// The functions that run each `mosgrad` command once its flags are parsed and checked
// (cli/commands.h): each returns the program's exit status. cli/run_training.cpp holds the
// commands that build a model from the train flags (and reproduce, plot, presets),
// cli/run_model.cpp those that run a saved one.
#pragma once

#include "cli/command_line.h"

namespace mg {

int run_train(CommandLine& c);
int run_finetune(CommandLine& c);
int run_graph(CommandLine& c);
int run_gradcheck(CommandLine& c);  // exit status 1 when a gradient is off (scripts and CI)
int run_reproduce_command(CommandLine& c);
int run_presets(CommandLine& c);
int run_plot(CommandLine& c);

int run_eval(CommandLine& c);
int run_dyneval(CommandLine& c);
int run_pointer(CommandLine& c);
int run_generate(CommandLine& c);
int run_export(CommandLine& c);
int run_import(CommandLine& c);
int run_rank(CommandLine& c);
int run_bottleneck_demo_command(CommandLine& c);

// What train, finetune and reproduce do with Ctrl-C, SIGTERM and SIGHUP (on_stop_signal): stop
// cleanly after the step (lm/training_stop.h), or at once on a second signal or during the final
// test; SIGPIPE is ignored.
void stop_cleanly_on_signals();
void on_stop_signal(int sig);

}  // namespace mg
