#include "io/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "io/file_ops.h"

namespace fs = std::filesystem;

namespace mg {

namespace {

// A name unique among live processes (the pid) and within this one (n).
std::string unique_tmp_path(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  return temporary_name(path, ::getpid(), counter++);
}

// Parses ".<pid>.<n>" (the part of a temporary's name after "<file>.tmp"); false when `rest` is
// anything else, which is then not ours to remove.
bool parse_pid_suffix(const std::string& rest, long long* pid) {
  if (rest.size() < 4 || rest[0] != '.') return false;
  const size_t dot = rest.find('.', 1);
  if (dot == std::string::npos || dot == 1 || dot + 1 == rest.size() || dot > 12) return false;
  for (size_t i = 1; i < rest.size(); ++i)
    if (i != dot && (rest[i] < '0' || rest[i] > '9')) return false;
  *pid = std::stoll(rest.substr(1, dot - 1));
  return *pid > 0 && *pid <= INT_MAX;
}

// Whether a process with this pid is gone (not ours, not alive, not another user's live one).
bool process_gone(long long pid) {
  return pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

// Removes temporaries of `path` left by saves that died mid-way (see atomic_file.h). Best effort:
// a leftover that cannot be removed costs disk space, not correctness.
void remove_leftover_temporaries(const std::string& path) noexcept {
  try {
    const fs::path p(path);
    const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
    const std::string prefix = p.filename().string() + ".tmp";
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      // Only "<file>.tmp.<pid>.<n>" is a temporary of ours: "<file>.tmp" itself, or any other
      // name, is someone else's (a user's backup, say) and stays.
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      long long pid = 0;
      if (!parse_pid_suffix(name.substr(prefix.size()), &pid)) continue;
      // Our own pid: another thread may be saving right now. A live process: the same.
      if (!process_gone(pid)) continue;
      struct stat st;
      if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
        ::unlink(it->path().c_str());
    }
  } catch (...) {
  }
}

}  // namespace

std::string temporary_name(const std::string& path, long long pid, uint64_t n) {
  return path + ".tmp." + std::to_string(pid) + "." + std::to_string(n);
}

bool is_dead_temporary(const std::string& path) {
  const std::string name = fs::path(path).filename().string();
  const size_t at = name.rfind(".tmp.");
  long long pid = 0;
  struct stat st;
  return at != std::string::npos && at > 0 && parse_pid_suffix(name.substr(at + 4), &pid) &&
         process_gone(pid) && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

AtomicFileWriter::AtomicFileWriter(const std::string& path)
    : path_(path), tmp_path_(unique_tmp_path(path)) {
  // O_EXCL: create a new file or fail, so nothing already at this name (a symlink included, even a
  // dangling one) is ever written through; O_NOFOLLOW says the same for the last component.
  const int fd = file_ops::open(tmp_path_, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);
  if (fd < 0) {
    const int err = errno;
    // Not ours: whatever sits at the name stays where it is.
    throw std::runtime_error(
        "cannot create " + tmp_path_ + " (to be renamed to " + path_ + "): " + std::strerror(err) +
        (err == EEXIST ? " (something is already at the temporary's name; mosgrad never "
                         "writes through an existing file or symlink)"
         : err == ENOSPC || err == EDQUOT ? " (disk full)"
         : err == ENOENT || err == EACCES || err == EROFS || err == ENOTDIR
             ? " (does the directory exist and is it writable?)"
             : "") +
        "; the previous file at that path, if any, is unchanged");
  }
  file_ = ::fdopen(fd, "wb");
  if (!file_) {
    const int err = errno;
    ::close(fd);
    ::unlink(tmp_path_.c_str());
    throw std::runtime_error("cannot write " + tmp_path_ + ": " + std::strerror(err));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) {  // commit() was not reached: drop the partial file, never leave it half-written
    file_ops::fclose(file_);
    ::unlink(tmp_path_.c_str());
  }
}

void AtomicFileWriter::fail(const std::string& what) {
  const int err = errno;
  if (file_) {
    file_ops::fclose(file_);
    file_ = nullptr;
  }
  ::unlink(tmp_path_.c_str());
  throw std::runtime_error("writing " + path_ + " failed while " + what + ": " +
                           std::strerror(err) +
                           (err == ENOSPC || err == EDQUOT ? " (disk full)" : "") +
                           "; the previous file at that path, if any, is unchanged");
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (!file_) throw std::logic_error("AtomicFileWriter::write after commit");
  if (n > 0 && file_ops::fwrite(data, n, file_) != n) fail("writing " + tmp_path_);
}

void AtomicFileWriter::seek(uint64_t offset) {
  if (!file_) throw std::logic_error("AtomicFileWriter::seek after commit");
  if (::fseeko(file_, static_cast<off_t>(offset), SEEK_SET) != 0) fail("seeking in " + tmp_path_);
}

void AtomicFileWriter::commit() {
  if (!file_) throw std::logic_error("AtomicFileWriter::commit called twice");
  // The data must be on disk before the rename makes it visible; otherwise a power cut right after
  // the rename could leave `path` pointing at an empty file.
  if (file_ops::fflush(file_) != 0) fail("flushing " + tmp_path_);
  if (file_ops::fsync(::fileno(file_)) != 0) fail("syncing " + tmp_path_);
  const int rc = file_ops::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("closing " + tmp_path_);
  if (file_ops::rename(tmp_path_, path_) != 0) fail("renaming " + tmp_path_ + " to " + path_);
  // Make the rename itself durable (where the filesystem can sync a directory at all). When that
  // fails the new file is in place, so the error says so rather than "unchanged".
  std::string dir = fs::path(path_).parent_path().string();
  if (dir.empty()) dir = ".";
  if (file_ops::sync_dir(dir) != 0) {
    const int err = errno;
    throw std::runtime_error("wrote " + path_ + ", but syncing its directory " + dir +
                             " failed: " + std::strerror(err) +
                             "; the file holds the new contents, which a power cut may still "
                             "undo (the storage may be failing)");
  }
  remove_leftover_temporaries(path_);
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

}  // namespace mg
