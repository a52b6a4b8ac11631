// The calls that change files, each with the test hook in front of it (io/file_ops.h says why).
#include "io/file_ops.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace mg {

namespace {

std::atomic<bool> g_armed{false};
std::atomic<int64_t> g_count{0};
std::atomic<unsigned> g_fired_op{0};
std::atomic<int> g_writes_failed{0};  // after the first, every write fails (the disk is full)
io_fault::FaultPlan g_plan;           // written only while disarmed, read only while armed

enum Verdict { kPass, kFail, kShort };

// Counts `op` when the hook is armed for it. kFail (errno set) when it is the one to fail, or a
// write after a failed write; kShort for that first failed write, which writes half its bytes.
Verdict verdict(io_fault::Op op) {
  if (!g_armed.load(std::memory_order_acquire) || !(g_plan.ops & op)) return kPass;
  const bool kth = g_count.fetch_add(1) + 1 == g_plan.k;
  if (!kth && !(op == io_fault::kWrite && g_writes_failed.load() > 0)) return kPass;
  if (kth) g_fired_op.store(op);
  errno = g_plan.err;
  if (op != io_fault::kWrite) return kFail;
  return g_writes_failed.fetch_add(1) == 0 ? kShort : kFail;
}

bool fail_now(io_fault::Op op) {
  return verdict(op) != kPass;
}

}  // namespace

namespace io_fault {

Scope::Scope(const FaultPlan& plan) {
  if (g_armed.load()) throw std::logic_error("io_fault::Scope: one is armed already");
  g_plan = plan;
  g_count.store(0);
  g_fired_op.store(0);
  g_writes_failed.store(0);
  g_armed.store(true, std::memory_order_release);
}

Scope::~Scope() {
  g_armed.store(false);
}

int64_t Scope::count() const {
  return g_count.load();
}

bool Scope::fired() const {
  return g_fired_op.load() != 0;
}

const char* Scope::op_name() const {
  switch (g_fired_op.load()) {
    case kOpen:
      return "open";
    case kWrite:
      return "write";
    case kSync:
      return "fsync";
    case kClose:
      return "close";
    case kRename:
      return "rename";
    case kTruncate:
      return "truncate";
    default:
      return "none";
  }
}

}  // namespace io_fault

namespace file_ops {

int open(const std::string& path, int flags, mode_t mode) {
  if (fail_now(io_fault::kOpen)) return -1;
  return ::open(path.c_str(), flags | O_CLOEXEC, mode);
}

// The first failed write of a full disk gets half its bytes out and returns that short count, as
// write(2) does when it wrote some; the next one returns -1.
ssize_t write(int fd, const void* data, size_t n) {
  const Verdict v = verdict(io_fault::kWrite);
  if (v == kPass) return ::write(fd, data, n);
  return v == kShort && n > 1 ? ::write(fd, data, n / 2) : -1;
}

ssize_t pwrite(int fd, const void* data, size_t n, off_t offset) {
  const Verdict v = verdict(io_fault::kWrite);
  if (v == kPass) return ::pwrite(fd, data, n, offset);
  return v == kShort && n > 1 ? ::pwrite(fd, data, n / 2, offset) : -1;
}

int fsync(int fd) {
  return fail_now(io_fault::kSync) ? -1 : ::fsync(fd);
}

int ftruncate(int fd, off_t length) {
  return fail_now(io_fault::kTruncate) ? -1 : ::ftruncate(fd, length);
}

int close(int fd) {
  if (fail_now(io_fault::kClose)) {  // as a failed close(2) on Linux: the descriptor is gone
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return ::close(fd);
}

int rename(const std::string& from, const std::string& to) {
  return fail_now(io_fault::kRename) ? -1 : std::rename(from.c_str(), to.c_str());
}

int sync_dir(const std::string& dir) {
  if (fail_now(io_fault::kSync)) return -1;
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return 0;
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc == 0 || err == EINVAL || err == ENOTSUP || err == EOPNOTSUPP) return 0;
  errno = err;
  return -1;
}

size_t fwrite(const void* data, size_t n, std::FILE* f) {
  const Verdict v = verdict(io_fault::kWrite);
  if (v == kPass) return std::fwrite(data, 1, n, f);
  const int err = errno;
  const size_t done = v == kShort && n > 1 ? std::fwrite(data, 1, n / 2, f) : 0;
  errno = err;
  return done;
}

int fflush(std::FILE* f) {
  if (fail_now(io_fault::kWrite)) return EOF;
  return std::fflush(f);
}

int fclose(std::FILE* f) {
  if (fail_now(io_fault::kClose)) {  // as a failed fclose: the stream is gone all the same
    const int err = errno;
    std::fclose(f);
    errno = err;
    return EOF;
  }
  return std::fclose(f);
}

}  // namespace file_ops
}  // namespace mg
