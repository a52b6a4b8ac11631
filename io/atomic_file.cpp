#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mg {

AtomicFileWriter::AtomicFileWriter(const std::string& path) : path_(path), tmp_path_(path + ".tmp") {
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (!file_)
    throw std::runtime_error("cannot create " + tmp_path_ + " (to be renamed to " + path_ + "): " +
                             std::strerror(errno) + " (does the directory exist and is it writable?)");
}

AtomicFileWriter::~AtomicFileWriter() {
  if (file_) {  // commit() was not reached: drop the partial file, never leave it half-written
    std::fclose(file_);
    std::remove(tmp_path_.c_str());
  }
}

void AtomicFileWriter::fail(const std::string& what) {
  const std::string reason = std::strerror(errno);
  if (file_) {
    std::fclose(file_);
    file_ = nullptr;
  }
  std::remove(tmp_path_.c_str());
  throw std::runtime_error("writing " + path_ + " failed while " + what + ": " + reason + " (disk full?); " +
                           "the previous file at that path, if any, is unchanged");
}

void AtomicFileWriter::write(const void* data, size_t n) {
  if (!file_) throw std::logic_error("AtomicFileWriter::write after commit");
  if (n > 0 && std::fwrite(data, 1, n, file_) != n) fail("writing " + tmp_path_);
}

void AtomicFileWriter::seek(uint64_t offset) {
  if (!file_) throw std::logic_error("AtomicFileWriter::seek after commit");
  if (std::fseek(file_, static_cast<long>(offset), SEEK_SET) != 0) fail("seeking in " + tmp_path_);
}

void AtomicFileWriter::commit() {
  if (!file_) throw std::logic_error("AtomicFileWriter::commit called twice");
  // The data must be on disk before the rename makes it visible; otherwise a power cut right after
  // the rename could leave `path` pointing at an empty file.
  if (std::fflush(file_) != 0) fail("flushing " + tmp_path_);
  if (::fsync(::fileno(file_)) != 0) fail("syncing " + tmp_path_);
  const int rc = std::fclose(file_);
  file_ = nullptr;
  if (rc != 0) fail("closing " + tmp_path_);
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) fail("renaming " + tmp_path_ + " to " + path_);
  // Best effort: make the rename itself durable. Not all filesystems allow fsync on a directory.
  std::string dir = fs::path(path_).parent_path().string();
  if (dir.empty()) dir = ".";
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFileWriter out(path);
  out.write(bytes.data(), bytes.size());
  out.commit();
}

}  // namespace mg
