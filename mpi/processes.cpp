#include "mpi/processes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#ifdef MOSGRAD_MPI
#include <mpi.h>
#endif

namespace mg {

namespace {
// Floats per message of the chain: large enough that a message costs its bandwidth, not its
// latency (4 MB), small enough that rank r+1 starts adding while rank r still receives.
constexpr int64_t kChunk = int64_t{1} << 20;

// out[0, n) += part[0, n), one IEEE addition per element (never fused, never reassociated).
void add_into(float* out, const float* part, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] += part[i];
}

#ifdef MOSGRAD_MPI
bool mpi_running() {
  int started = 0, ended = 0;
  MPI_Initialized(&started);
  MPI_Finalized(&ended);
  return started && !ended;
}
#endif
}  // namespace

bool built_with_mpi() {
#ifdef MOSGRAD_MPI
  return true;
#else
  return false;
#endif
}

void start_processes([[maybe_unused]] int* argc, [[maybe_unused]] char*** argv) {
#ifdef MOSGRAD_MPI
  // FUNNELED: OpenMP threads exist beside MPI, and only the main thread calls it.
  int provided = 0;
  if (!mpi_running()) MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
  (void)provided;  // a library giving less still works: only the main thread calls MPI
#endif
}

void end_processes() {
#ifdef MOSGRAD_MPI
  if (mpi_running()) MPI_Finalize();
#endif
}

void abort_processes([[maybe_unused]] int exit_code) {
#ifdef MOSGRAD_MPI
  if (mpi_running() && process_count() > 1) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
}

int process_rank() {
#ifdef MOSGRAD_MPI
  if (!mpi_running()) return 0;
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
#else
  return 0;
#endif
}

int process_count() {
#ifdef MOSGRAD_MPI
  if (!mpi_running()) return 1;
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
#else
  return 1;
#endif
}

void chain_sum(float* sum, const std::vector<const float*>& parts, int64_t n) {
  const int rank = process_rank(), N = process_count();
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    float* s = sum + c0;
#ifdef MOSGRAD_MPI
    if (rank > 0)  // the partial sum of ranks 0 .. rank-1
      MPI_Recv(s, static_cast<int>(len), MPI_FLOAT, rank - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    else
#endif
      std::fill(s, s + len, 0.0f);
    for (const float* part : parts) add_into(s, part + c0, len);
#ifdef MOSGRAD_MPI
    if (rank + 1 < N) MPI_Send(s, static_cast<int>(len), MPI_FLOAT, rank + 1, 0, MPI_COMM_WORLD);
#endif
  }
#ifdef MOSGRAD_MPI
  for (int64_t c0 = 0; N > 1 && c0 < n; c0 += kChunk)  // the last rank holds the whole sum
    MPI_Bcast(sum + c0, static_cast<int>(std::min(kChunk, n - c0)), MPI_FLOAT, N - 1,
              MPI_COMM_WORLD);
#else
  (void)rank, (void)N;
#endif
}

void all_gather(const void* mine, int64_t bytes, void* all) {
#ifdef MOSGRAD_MPI
  if (process_count() > 1) {
    if (bytes > INT32_MAX) throw std::length_error("all_gather: more than 2 GB per process");
    MPI_Allgather(mine, static_cast<int>(bytes), MPI_BYTE, all, static_cast<int>(bytes), MPI_BYTE,
                  MPI_COMM_WORLD);
    return;
  }
#endif
  std::memcpy(all, mine, static_cast<size_t>(bytes));
}

bool any_process(bool mine) {
  const int N = process_count();
  const char flag = mine ? 1 : 0;
  std::vector<char> flags(static_cast<size_t>(N));
  all_gather(&flag, 1, flags.data());
  return std::any_of(flags.begin(), flags.end(), [](char f) { return f != 0; });
}

}  // namespace mg
