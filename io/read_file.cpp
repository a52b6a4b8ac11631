#include "io/read_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "io/regular_file.h"

namespace fs = std::filesystem;

namespace mg {

std::string read_file(const std::string& path, const std::string& what,
                      const std::string& missing_hint) {
  const std::string where = what + " " + path;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(where + " does not exist" + missing_hint);
  if (fs::is_directory(path, ec)) throw std::runtime_error(where + " is a directory, not a file");
  const int fd = open_regular_to_read(path, what);  // a FIFO or a device: refused, naming it
  if (fd < 0)
    throw std::runtime_error(where + " cannot be opened: " + std::strerror(errno) +
                             (errno == EACCES ? " (check its permissions)" : ""));
  struct stat st {};
  std::string bytes(::fstat(fd, &st) == 0 ? static_cast<size_t>(st.st_size) : 0, '\0');
  // Read to the end, not to st_size: a file of /proc says 0 bytes and has more, and one that grows
  // while it is read keeps its new bytes out of a half-filled string. Once `bytes` is full, the
  // rest comes through `spill` (usually a single read that finds the end).
  size_t done = 0;
  for (;;) {
    char spill[1 << 16];
    const bool in_place = done < bytes.size();
    const ssize_t n =
        ::read(fd, in_place ? &bytes[done] : spill, in_place ? bytes.size() - done : sizeof(spill));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(where + ": read error: " + std::strerror(err));
    }
    if (n == 0) break;
    if (!in_place) bytes.append(spill, static_cast<size_t>(n));
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);  // a file that shrank while it was read
  return bytes;
}

}  // namespace mg
