// Every call mosgrad makes to change a file goes through here: creating or opening one for writing,
// writing, flushing, fsync (of a file or of its directory), closing, renaming, truncating. Each is
// the POSIX or C call it names, with the same return value and errno, plus one check.
//
// Why: mosgrad promises that a save which fails leaves every file it touches as it was or whole
// and new (docs/reliability.md), and what keeps that promise is the code that runs after one of
// these calls fails. A full disk (ENOSPC) or a failing device (EIO) can refuse any of them, so a
// test must be able to refuse each in turn, as SQLite's I/O-error tests do: arm an
// io_fault::Scope that only counts, run the save to learn its N operations, then run it N more
// times with the k-th failing (tests/io/test_io_faults.cpp). The hook is compiled into every build
// and costs one atomic load per call while no test has armed it.
//
// Not hooked: reads (a failed read stops a command before it writes anything), removing a file
// (cleanup, best effort) and making directories.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <cstdio>
#include <string>

namespace mg {

namespace io_fault {

// The kinds of operation, to count or fail some of them only. kWrite includes fflush.
enum Op : unsigned {
  kOpen = 1,
  kWrite = 2,
  kSync = 4,
  kClose = 8,
  kRename = 16,
  kTruncate = 32,
  kAll = 63
};

// The k-th operation fails with `err`. When it is a write, the disk is full from there on: that
// write gets half its bytes out (a short count, as a real one that fills the disk), and every
// write after it fails, so the code that cuts a short write back off runs too.
struct FaultPlan {
  unsigned ops = kAll;  // the kinds counted (and failed)
  int64_t k = 0;        // the k-th counted operation fails, counting from 1; 0: count only
  int err = 0;          // its errno (ENOSPC, EIO, ...)
};

// Arms the hook for as long as it lives; for tests. One at a time, and while it lives no other
// thread should write files it does not mean to count.
class Scope {
 public:
  explicit Scope(const FaultPlan& plan);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  int64_t count() const;        // the operations counted so far
  bool fired() const;           // whether the k-th came and was failed
  const char* op_name() const;  // which kind it was ("write", ...), for a test's messages
};

}  // namespace io_fault

namespace file_ops {

// As ::open (always with O_CLOEXEC added): a descriptor, or -1 with errno.
int open(const std::string& path, int flags, mode_t mode = 0);
// As ::write and ::pwrite (a failure the hook makes: a short count, then -1; see FaultPlan).
ssize_t write(int fd, const void* data, size_t n);
ssize_t pwrite(int fd, const void* data, size_t n, off_t offset);
int fsync(int fd);
int ftruncate(int fd, off_t length);
int close(int fd);
// As std::rename: 0, or -1 with errno.
int rename(const std::string& from, const std::string& to);
// fsync of the directory `dir`, so that a rename in it survives a power cut. 0 also where the
// filesystem cannot sync a directory (EINVAL, ENOTSUP) or it cannot be opened to try: that is
// all it can do there. -1 with errno when the sync itself fails (EIO).
int sync_dir(const std::string& dir);
// As std::fwrite (of n bytes), std::fflush, std::fclose. A failed fwrite returns a short count
// with errno set.
size_t fwrite(const void* data, size_t n, std::FILE* f);
int fflush(std::FILE* f);
int fclose(std::FILE* f);

}  // namespace file_ops
}  // namespace mg
