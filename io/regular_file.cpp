#include "io/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "io/file_ops.h"

namespace mg {

std::string file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  return "not a file of a kind mosgrad knows";
}

std::runtime_error not_a_regular_file(const std::string& what, const std::string& path, mode_t mode,
                                      bool writing) {
  return std::runtime_error(
      what + " " + path + " is " + file_kind(mode) + ", not a regular file: mosgrad " +
      (writing ? "writes only regular files, and never removes or replaces this one: move it away"
               : "reads only regular files"));
}

namespace {

int open_unhooked(const std::string& path, int flags, mode_t mode) {
  return ::open(path.c_str(), flags | O_CLOEXEC, mode);
}

int open_regular(int (*open_fn)(const std::string&, int, mode_t), const std::string& path,
                 int flags, mode_t mode, const std::string& what, bool writing) {
  // O_NONBLOCK: the open of a FIFO returns at once (a writer's, with no reader, fails with ENXIO)
  // instead of waiting for a process at its other end; on a regular file it changes nothing.
  const int fd = open_fn(path, flags | O_NONBLOCK, mode);
  struct stat st {};
  if (fd < 0) {
    const int err = errno;
    // ENXIO (a FIFO without a reader, a socket) would read "No such device or address": say what
    // is there instead.
    if (err == ENXIO && ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
      throw not_a_regular_file(what, path, st.st_mode, writing);
    errno = err;
    return -1;
  }
  // The descriptor's own file, not the name's: what was opened is what is judged.
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw not_a_regular_file(what, path, st.st_mode, writing);
  }
  // A regular file's reads and writes never block anyway; the flag is cleared so that the
  // descriptor is the plain one its users expect.
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
  return fd;
}

}  // namespace

int open_regular_to_read(const std::string& path, const std::string& what) {
  return open_regular(open_unhooked, path, O_RDONLY, 0, what, false);
}

int open_regular_to_write(const std::string& path, int flags, mode_t mode,
                          const std::string& what) {
  return open_regular(file_ops::open, path, flags, mode, what, true);
}

void refuse_special_file(const std::string& path, const std::string& what, bool writing) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
    throw std::invalid_argument(not_a_regular_file(what, path, st.st_mode, writing).what());
}

}  // namespace mg
