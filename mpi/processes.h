// The processes of one data-parallel run: Open MPI's ranks when mosgrad is built with `make MPI=1`
// and started by `mpirun -np N`, otherwise one process (rank 0 of 1). This is the only place that
// talks to MPI; everything above it asks "which rank am I, how many are we" and exchanges plain
// float and byte buffers in a fixed order, so that a run's numbers never depend on N.
//
// Dimension legend: P the number of floats exchanged (all the gradients, flattened), G the column
// groups of a batch (lm/column_groups.h), N the processes.
//
// Why a chain and not MPI_Allreduce: floating-point addition is not associative, and MPI's
// reductions add in an order of their own choosing (and differ between algorithms and N). The
// chain adds each process's parts, in rank order, onto the partial sum handed over by the rank
// before it: ((0 + a1) + a2) + ... — the very additions one process does alone, so `mpirun -np N`
// gives the same bits as -np 1 (docs/distributed.md; the cost is there too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mg {

// True when built with MPI=1 (MOSGRAD_MPI).
bool built_with_mpi();

// MPI_Init when built with MPI (a plain build ignores it). Call once, from main, before anything
// else; end_processes() calls MPI_Finalize.
void start_processes(int* argc, char*** argv);
void end_processes();
// Ends every process of the job now (MPI_Abort): what a rank does after an error it reported, so
// the others are not left waiting for it in an exchange.
void abort_processes(int exit_code);

// This process's rank in [0, N) and N. 0 and 1 without MPI, and in an MPI build not started by
// start_processes (the tests).
int process_rank();
int process_count();

// sum[0, n) = (((0 + parts[0]) + parts[1]) + ...) over every process's parts, in rank order, then
// handed to every process. Each process passes its own parts (float[n] each, in its order).
// Pipelined in chunks, so each link carries the n floats about twice (reduce, then broadcast).
void chain_sum(float* sum /*[n]*/, const std::vector<const float*>& parts, int64_t n);

// every process contributes `bytes` bytes; all (N * bytes) receives them in rank order.
void all_gather(const void* mine, int64_t bytes, void* all);

// True on every process when `mine` is true on any (a clean stop one rank asked for, ...).
bool any_process(bool mine);

}  // namespace mg
