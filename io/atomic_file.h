// Writing a file atomically: readers of `path` see the old file or the complete new one, never a
// half-written one, whatever happens in between (a crash, Ctrl-C, a full disk). Every file mosgrad
// writes whole goes through here: checkpoints, safetensors, the learning-curve plot.
//
// How: the bytes go to path + ".tmp" in the same directory, which is flushed and fsync'ed, then
// renamed over `path` (atomic within a filesystem), and the directory is fsync'ed so the rename
// itself survives a power cut. On any failure the temporary is removed; a stray one left by a
// crash is overwritten by the next save.
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
  explicit AtomicFileWriter(const std::string& path);  // creates path + ".tmp"; throws when it cannot
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  void write(const void* data, size_t n);  // throws naming the file (disk full, ...)
  void seek(uint64_t offset);              // absolute position, to patch bytes written earlier
  // Flush, fsync, close, rename over `path`, fsync the directory. After this the writer is finished.
  void commit();

  const std::string& path() const { return path_; }
  const std::string& tmp_path() const { return tmp_path_; }

 private:
  [[noreturn]] void fail(const std::string& what);
  std::string path_, tmp_path_;
  std::FILE* file_ = nullptr;
};

// `bytes` into `path` atomically: an AtomicFileWriter in one call.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace mg
