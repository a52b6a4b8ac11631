#include "io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "io/file_ops.h"

namespace mg {

std::string RunLock::file_in(const std::string& dir) {
  return dir + "/mosgrad.lock";
}

namespace {

// The error for a lock another process holds: who it is, from the line it wrote in the file.
std::runtime_error in_use(const std::string& dir, int fd, const std::string& flag) {
  char holder[512] = {0};
  const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
  std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "another process";
  while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
  return std::runtime_error("run directory " + dir + " is in use by " + who +
                            ": wait for that run to end (or stop it), or choose another " + flag);
}

}  // namespace

namespace {

// The lock file opened for reading (a read, so not through file_ops, which hooks the calls that
// change files), or -1 when there is none.
int open_for_check(const std::string& path) {
  return ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

bool held_through(int fd) {
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  if (!held) ::flock(fd, LOCK_UN);
  return held;
}

}  // namespace

bool RunLock::is_held(const std::string& dir) {
  const int fd = open_for_check(file_in(dir));
  if (fd < 0) return false;
  const bool held = held_through(fd);
  ::close(fd);
  return held;
}

void RunLock::refuse_if_held(const std::string& dir, const std::string& flag) {
  const int fd = open_for_check(file_in(dir));
  if (fd < 0) return;  // no lock file (or none we can read): the constructor says what is wrong
  const bool held = held_through(fd);
  const std::runtime_error error = in_use(dir, fd, flag);
  ::close(fd);
  if (held) throw error;
}

RunLock::RunLock(const std::string& dir, const std::string& command, const std::string& flag) {
  const std::string path = file_in(dir);
  fd_ = file_ops::open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open the run directory's lock " + path + ": " +
                             std::strerror(errno) +
                             (errno == ELOOP ? " (it is a symlink; remove it)" : ""));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::runtime_error error = in_use(dir, fd_, flag);
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) throw error;
    throw std::runtime_error("cannot lock " + path + ": " + std::strerror(err));
  }
  // Ours now: say who holds it, for the message a second run will print.
  char when[32] = "?";
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  if (::localtime_r(&now, &tm)) std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  const std::string line =
      "process " + std::to_string(::getpid()) + " (" + command + "), started " + when + "\n";
  if (file_ops::ftruncate(fd_, 0) != 0 ||
      file_ops::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    // The lock holds without the note; only the message a second run prints would be poorer.
  }
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
}

}  // namespace mg
