// Writing a file atomically: readers of `path` see the old file or the complete new one, never a
// half-written one, whatever happens in between (a crash, Ctrl-C, a full disk, kill -9). Every file
// mosgrad writes whole goes through here: checkpoints, safetensors, the learning-curve plot.
//
// How: the bytes go to a temporary in the same directory, named "<path>.tmp.<pid>.<n>" (n counts
// the temporaries this process made), which is created exclusively and without following
// symlinks, so a symlink or file planted at that name makes the save fail instead of redirecting
// it, and two processes saving to one path never write into each other's temporary. The temporary
// is flushed and fsync'ed, then renamed over `path` (atomic within a filesystem), and the directory
// is fsync'ed so the rename itself survives a power cut. On any failure the temporary is removed;
// a failure before the rename leaves `path` as it was, and one of the directory's fsync after it
// is an error that says the new file is in place. Every call that changes a file goes through
// io/file_ops.h, where tests/io/test_io_faults.cpp fails each one in turn.
//
// A temporary outlives its process only when that process dies mid-save (kill -9, power cut). The
// next successful save of the same path removes such leftovers: "<path>.tmp.<pid>.<n>" whose
// process no longer exists. Only regular files of exactly that form are removed, never the
// temporaries of a live process, and never a bare "<path>.tmp" (a name a user may have chosen).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

namespace mg {

// Write, optionally seek back to patch a header, then commit(). Destroying it without commit()
// (an exception was thrown) deletes the temporary, so `path` never sees partial content.
class AtomicFileWriter {
 public:
  // Creates the temporary; throws std::runtime_error naming it when that fails (the directory is
  // missing or not writable, or something already sits at the temporary's name).
  explicit AtomicFileWriter(const std::string& path);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);  // throws naming the file (disk full, ...)
  void seek(uint64_t offset);              // absolute position, to patch bytes written earlier
  // Flush, fsync, close, rename over `path`, fsync the directory, remove dead processes'
  // leftovers. After this the writer is finished.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
};

// "<path>.tmp.<pid>.<n>": the name of the n-th temporary process `pid` makes for `path`, the one
// form is_dead_temporary and the leftover cleanup recognise.
std::string temporary_name(const std::string& path, long long pid, uint64_t n);

// Whether `path` is a regular file named "<file>.tmp.<pid>.<n>" whose process no longer exists: a
// temporary a save left when it died, which the next save of <file> removes.
bool is_dead_temporary(const std::string& path);

// `bytes` into `path` atomically: an AtomicFileWriter in one call.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace mg
