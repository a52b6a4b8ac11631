// Provenance of a result (reproduce/provenance.h).
#include "reproduce/provenance.h"

#include <sys/resource.h>

#include <ctime>
#include <filesystem>
#include <sstream>

#include "io/read_file.h"
#include "tensor/gemm.h"

namespace mg {

namespace fs = std::filesystem;

std::string source_commit() {
#ifdef MOSGRAD_COMMIT
  return MOSGRAD_COMMIT;  // the Makefile's SOURCE_COMMIT, at build time
#else
  return "unknown";
#endif
}

std::string cpu_description() {
  std::string model = "unknown CPU";
  std::istringstream info(fs::exists("/proc/cpuinfo") ? read_file("/proc/cpuinfo", "cpu info")
                                                      : "");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  const char* isa = __builtin_cpu_supports("avx512f") ? "AVX-512"
                    : __builtin_cpu_supports("avx2")  ? "AVX2"
                                                      : "no AVX2";
  return model + " (" + isa + (gemm_bf16_kernel_name() ? ", AVX512_BF16" : "") + ")";
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return buf;
}

double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return seconds(u.ru_utime) + seconds(u.ru_stime);
}

}  // namespace mg
