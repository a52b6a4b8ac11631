#include "io/own_output.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

namespace mg {

namespace fs = std::filesystem;

void require_own_output(const std::string& command, const std::string& flag,
                        const std::string& path, const std::string& kind,
                        const std::function<bool(const std::string& path)>& ours) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(path, ec);
  if (!fs::exists(st)) return;  // nothing there to lose
  std::string what;
  if (fs::is_symlink(st)) {
    what = "a symlink (mosgrad never makes one, nor writes in its place)";
  } else if (fs::is_directory(st)) {
    what = "a directory";
  } else if (!fs::is_regular_file(st)) {
    what = "not a regular file";
  } else {
    bool recognised = false;
    try {
      recognised = ours(path);
    } catch (const std::exception&) {
    }
    if (recognised) return;  // mosgrad's own earlier output: the new one replaces it
    what = "not " + kind;
  }
  throw std::invalid_argument(command + ": " + flag + " " + path + " is there and is " + what +
                              "; mosgrad replaces only its own earlier output: move it away or "
                              "choose another " + flag);
}

bool first_line_is(const std::string& path, const std::string& first_line) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  return in && std::getline(in, line) && line == first_line;
}

}  // namespace mg
