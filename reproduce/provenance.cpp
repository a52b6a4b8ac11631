// Provenance of a result (reproduce/provenance.h).
#include "reproduce/provenance.h"

#include <sys/resource.h>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <sstream>

#include "io/read_file.h"
#include "tensor/gemm.h"

namespace mg {

namespace fs = std::filesystem;

namespace {

std::string first_line_of(const std::string& command) {
  std::string text;
  if (FILE* p = popen(command.c_str(), "r")) {
    char buf[256];
    if (std::fgets(buf, sizeof buf, p)) text = buf;
    pclose(p);
  }
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::string source_commit() {
#ifdef MOSGRAD_SOURCE_DIR
  const std::string git = "git -C '" + std::string(MOSGRAD_SOURCE_DIR) + "' ";
  const std::string head = first_line_of(git + "rev-parse --short=12 HEAD 2>/dev/null");
  if (head.empty()) return "unknown";
  const bool dirty =
      !first_line_of(git + "status --porcelain --untracked-files=no 2>/dev/null").empty();
  return head + (dirty ? "+dirty" : "");
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
