// The `mosgrad` program. Every command is one row of the table in cli/commands.cpp (its flags in
// cli/flag_tables.cpp, what it does in cli/run_training.cpp and cli/run_model.cpp):
//   mosgrad train --preset small-mos --data ../shared/data/ptb
//   mosgrad <command> --help
#include <cstdio>
#include <exception>

#include "cli/commands.h"
#include "mpi/processes.h"

int main(int argc, char** argv) {
  mg::start_processes(&argc, &argv);  // MPI_Init under `make MPI=1`; nothing otherwise
  try {
    const int code = mg::run_mosgrad(argc, argv);
    mg::end_processes();
    return code;
  } catch (const std::exception& e) {
    // Under mpirun every process reports its own error, then the whole job ends: the others must
    // not wait for this one in an exchange. Rank 0 writes every file, atomically: nothing is torn.
    const int N = mg::process_count();
    if (N > 1)
      std::fprintf(stderr, "mosgrad (process %d of %d): error: %s\n", mg::process_rank(), N,
                   e.what());
    else
      std::fprintf(stderr, "mosgrad: error: %s\n", e.what());
    mg::abort_processes(1);
    mg::end_processes();
    return 1;
  }
}
