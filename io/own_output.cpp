#include "io/own_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <system_error>

#include "io/atomic_file.h"
#include "io/file_ops.h"

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
                              "choose another " +
                              flag);
}

std::string probe_file(const std::string& folder, long long pid, uint64_t n) {
  return temporary_name((fs::path(folder) / ".mosgrad-probe").string(), pid, n);
}

void require_writable_dir(const std::string& flag, const std::string& dir,
                          const std::string& given) {
  std::error_code ec;
  const std::string named = flag + " " + (given.empty() ? dir : given);
  fs::path folder = dir.empty() ? fs::path(".") : fs::path(dir);
  while (!fs::exists(folder, ec)) {
    // A link to nothing (a bare name's too): the folder mosgrad would make there cannot be made
    // (found out only when the work is done, by the save).
    if (fs::is_symlink(fs::symlink_status(folder, ec)))
      throw std::invalid_argument(named + ": " + folder.string() + " is a symlink to " +
                                  fs::read_symlink(folder, ec).string() +
                                  ", which does not exist; create what it names, or choose "
                                  "another " +
                                  flag);
    if (!folder.has_parent_path() || folder.parent_path() == folder) break;
    folder = folder.parent_path();
  }
  if (!fs::exists(folder, ec)) folder = ".";  // a relative path none of whose folders exist yet
  const std::string where = named + ": cannot create files in " + folder.string();
  if (!fs::is_directory(folder, ec))
    throw std::invalid_argument(where + " (it is a file, not a folder); choose another " + flag);
  // A name no other probe has: a probe left by a process killed mid-check (whose pid may come
  // back) must not make a read-only folder look writable.
  static std::atomic<uint64_t> counter{0};
  for (;;) {
    const std::string probe = probe_file(folder.string(), ::getpid(), counter++);
    const int fd = file_ops::open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
    if (fd >= 0) {
      ::close(fd);
      ::unlink(probe.c_str());
      return;
    }
    const int err = errno;
    if (err != EEXIST)
      throw std::invalid_argument(where + " (" + std::strerror(err) +
                                  "); nothing was started: choose a folder you can write to, or "
                                  "change its permissions");
  }
}

void require_writable_folder_of(const std::string& flag, const std::string& file) {
  const std::string parent = fs::path(file).parent_path().string();
  require_writable_dir(flag, parent.empty() ? "." : parent, file);
  // A file's folder is not made for it (as a run's or rank's --out folder is): a missing one is
  // named now, not after the model was loaded or built.
  std::error_code ec;
  if (!parent.empty() && !fs::is_directory(parent, ec))
    throw std::invalid_argument(flag + " " + file + ": the folder " + parent +
                                " does not exist; create it, or choose another " + flag);
}

bool first_line_is(const std::string& path, const std::string& first_line) {
  std::ifstream in(path, std::ios::binary);
  std::string line;
  return in && std::getline(in, line) && line == first_line;
}

}  // namespace mg
