#include "io/same_file.h"

#include <filesystem>
#include <stdexcept>
#include <system_error>

namespace mg {

namespace fs = std::filesystem;

bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;  // no file: the writer or reader says so itself
  std::error_code ea, eb;
  const bool a_exists = fs::exists(a, ea), b_exists = fs::exists(b, eb);
  if (a_exists && b_exists) {
    std::error_code e;
    const bool same = fs::equivalent(a, b, e);  // st_dev and st_ino, through symlinks
    return !e && same;
  }
  // One (or both) not there yet: the same place after resolving what exists of each path. A
  // dangling symlink at a resolves to its target, so writing a would write that target.
  std::error_code e1, e2, e3, e4;
  const fs::path ca = fs::weakly_canonical(fs::absolute(a, e1), e2),
                 cb = fs::weakly_canonical(fs::absolute(b, e3), e4);
  return !e1 && !e2 && !e3 && !e4 && ca == cb;
}

void require_other_file(const std::string& command, const std::string& flag,
                        const std::string& output, const std::string& input,
                        const std::string& what) {
  if (same_file(output, input))
    throw std::invalid_argument(command + ": " + flag + " " + output + " is " + what + " (" +
                                input + "); choose another file");
}

}  // namespace mg
