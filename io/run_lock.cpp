#include "io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <stdexcept>

#include "io/atomic_file.h"
#include "io/file_ops.h"
#include "io/regular_file.h"

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

// `cp -al` copies a run folder with its files hard-linked, the lock file too: the two folders'
// locks are then one file, and a run holding it in either folder makes the other look busy.
// What the in-use error adds when that may be why.
// The names the open file `fd` has (2 or more: a hard link); 0 when fstat fails.
nlink_t link_count(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 ? st.st_nlink : 0;
}

std::string shared_lock_hint(int fd, const std::string& dir) {
  if (link_count(fd) <= 1) return "";
  return " (" + RunLock::file_in(dir) +
         " is a hard link shared with another folder, as cp -al makes: if that run is the other "
         "folder's, remove this folder's " +
         RunLock::file_in(dir) + " and start again)";
}

// What mosgrad writes in its lock file: nothing yet, or the holder's line ("process N (...)").
// Anything else is a user's file that happens to have the name, and is never written over.
bool holds_a_lock_note(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  char head[8];
  const ssize_t n = ::pread(fd, head, sizeof(head), 0);
  return n == 0 || (n == sizeof(head) && std::memcmp(head, "process ", sizeof(head)) == 0);
}

bool same_inode(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev &&
         a.st_ino == b.st_ino;
}

// We hold the lock of a file that is also another folder's (a hard link): this folder gets a
// locked file of its own at the name, and the shared one is let go. Done while holding the shared
// file's lock, so no run of either folder holds it meanwhile; a process of this folder that opened
// the shared file before the rename finds, once it holds that, that it is no longer at the name
// (the constructor's same_inode check) and starts again. Returns the new descriptor, or `fd` when
// any step fails (the shared lock then serves as before).
int own_lock_file(int fd, const std::string& path) {
  if (link_count(fd) <= 1) return fd;
  const std::string tmp = temporary_name(path, ::getpid(), 0);
  const int own = file_ops::open(tmp, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (own < 0) return fd;
  if (::flock(own, LOCK_EX | LOCK_NB) != 0 || file_ops::rename(tmp, path) != 0) {
    ::unlink(tmp.c_str());
    ::close(own);
    return fd;
  }
  ::close(fd);
  return own;
}

}  // namespace

std::runtime_error RunLock::in_use(const std::string& dir, const std::string& who,
                                   const std::string& flag) {
  return std::runtime_error("run directory " + dir + " is in use by " + who +
                            ": wait for that run to end (or stop it), or choose another " + flag);
}

std::string RunLock::holder(const std::string& dir) {
  // A read, so not through file_ops (which hooks the calls that change files). O_NONBLOCK: a FIFO
  // at the name would block this open until a writer came, which may be never.
  const int fd = ::open(file_in(dir).c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  // No lock file, or none we can read, or not a file (no run locks a FIFO or a device): the
  // constructor says what is wrong.
  if (fd < 0) return "";
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "";
  }
  const bool held = ::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK;
  const std::string who = held ? holder_line(fd) + shared_lock_hint(fd, dir) : "";
  ::close(fd);  // also releases the shared lock, if taken
  return who;
}

void RunLock::refuse_if_held(const std::string& dir, const std::string& flag) {
  if (const std::string who = holder(dir); !who.empty()) throw in_use(dir, who, flag);
}

RunLock::RunLock(const std::string& dir, const std::string& command, const std::string& flag) {
  const std::string path = file_in(dir);
  for (int tries = 1;; ++tries) {
    fd_ = open_regular_to_write(path, O_RDWR | O_CREAT | O_NOFOLLOW, 0644,
                                "the run directory's lock");  // never a FIFO or a device
    if (fd_ < 0)
      throw std::runtime_error("cannot open the run directory's lock " + path + ": " +
                               std::strerror(errno) +
                               (errno == ELOOP ? " (it is a symlink; remove it)" : ""));
    if (!holds_a_lock_note(fd_)) {
      ::close(fd_);
      fd_ = -1;
      throw std::runtime_error(path +
                               " is not a lock mosgrad wrote (its lock files hold one line, "
                               "\"process N (command), started ...\"); mosgrad never writes over "
                               "it: move it away, or choose another " +
                               flag);
    }
    // Another process may be asking who holds the lock (holder(): a shared lock for an instant);
    // a lock that is still taken after a moment is a run's.
    int err = 0;
    while (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      err = errno;
      if (err != EWOULDBLOCK || tries >= kTries) break;
      ++tries;
      err = 0;
      ::usleep(kRetryMicroseconds);
    }
    if (err != 0) {
      const std::runtime_error error =
          in_use(dir, holder_line(fd_) + shared_lock_hint(fd_, dir), flag);
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK) throw error;
      throw std::runtime_error("cannot lock " + path + ": " + std::strerror(err));
    }
    // The file we hold may have left the name meanwhile (another process of this folder gave it a
    // lock file of its own, below): then the lock to take is the one at the name now.
    if (same_inode(fd_, path)) break;
    ::close(fd_);
    if (tries >= kTries) throw std::runtime_error("cannot lock " + path + ": it keeps changing");
  }
  fd_ = own_lock_file(fd_, path);
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
