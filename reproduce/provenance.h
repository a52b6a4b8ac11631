// Where, when and with which code a result was made, and how much of the CPU it had: the fields
// `mosgrad reproduce` writes beside every stage's numbers in results.jsonl.
#pragma once

#include <string>

namespace mg {

// The commit this binary was built from, "+dirty" when tracked files differed from it then
// (recorded by the Makefile at build time); "unknown" when built outside a git checkout.
std::string source_commit();
// "AMD EPYC (AVX2)", "INTEL(R) XEON(R) ... (AVX-512, AVX512_BF16)": the model name and what the
// GEMM kernels can use.
std::string cpu_description();
// The time now, UTC, as 2026-11-28T01:30:00Z.
std::string utc_now();
// CPU seconds this process has used so far, all threads, user and system. Divided by wall seconds
// times threads it says what share of its cores a stage had: OpenMP's waiting threads spin, so a
// run alone keeps it near 1 (0.98 for the day plan's MoS and softmax on 2 cores), and another
// job on the cores brings it down (0.62 beside one busy loop, while the run took 3.3 times as
// long).
double process_cpu_seconds();

}  // namespace mg
