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

constexpr int kTries = 100, kRetryMicroseconds = 5000;  // half a second in all

// The line the holder wrote in the lock file ("process N (command), started ..."), from `fd`.
std::string holder_line(int fd) {
  char holder[512] = {0};
  const ssize_t n = ::pread(fd, holder, sizeof(holder) - 1, 0);
  std::string who = n > 0 ? std::string(holder, static_cast<size_t>(n)) : "another process";
  while (!who.empty() && (who.back() == '\n' || who.back() == ' ')) who.pop_back();
  return who;
}

}  // namespace

std::runtime_error RunLock::in_use(const std::string& dir, const std::string& who,
                                   const std::string& flag) {
  return std::runtime_error("run directory " + dir + " is in use by " + who +
                            ": wait for that run to end (or stop it), or choose another " + flag);
}

std::string RunLock::holder(const std::string& dir) {
  // A read, so not through file_ops (which hooks the calls that change files).
  const int fd = ::open(file_in(dir).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";  // no lock file (or none we can read): the constructor says what is wrong
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  const std::string who = held ? holder_line(fd) : "";
  ::close(fd);  // also releases the shared lock, if taken
  return who;
}

void RunLock::refuse_if_held(const std::string& dir, const std::string& flag) {
  if (const std::string who = holder(dir); !who.empty()) throw in_use(dir, who, flag);
}

RunLock::RunLock(const std::string& dir, const std::string& command, const std::string& flag) {
  const std::string path = file_in(dir);
  fd_ = file_ops::open(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0644);
  if (fd_ < 0)
    throw std::runtime_error("cannot open the run directory's lock " + path + ": " +
                             std::strerror(errno) +
                             (errno == ELOOP ? " (it is a symlink; remove it)" : ""));
  // Another process may be asking who holds the lock (holder(): a shared lock for an instant);
  // a lock that is still taken after a moment is a run's.
  for (int tries = 1; ::flock(fd_, LOCK_EX | LOCK_NB) != 0; ++tries) {
    const int err = errno;
    if (err == EWOULDBLOCK && tries < kTries) {
      ::usleep(kRetryMicroseconds);
      continue;
    }
    const std::runtime_error error = in_use(dir, holder_line(fd_), flag);
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
