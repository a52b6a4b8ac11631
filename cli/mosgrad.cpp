// The `mosgrad` program. Every command is one row of the table in cli/commands.cpp (its flags in
// cli/flag_tables.cpp, what it does in cli/run_training.cpp and cli/run_model.cpp):
//   mosgrad train --preset small-mos --data ../shared/data/ptb
//   mosgrad <command> --help
#include <cstdio>
#include <exception>

#include "cli/commands.h"

int main(int argc, char** argv) {
  try {
    return mg::run_mosgrad(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mosgrad: error: %s\n", e.what());
    return 1;
  }
}
