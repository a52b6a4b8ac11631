#include "io/read_file.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mg {

std::string read_file(const std::string& path, const std::string& what,
                      const std::string& missing_hint) {
  const std::string where = what + " " + path;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error(where + " does not exist" + missing_hint);
  if (fs::is_directory(path, ec)) throw std::runtime_error(where + " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(where + " cannot be opened (permissions?)");
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size >= 0) {
    in.seekg(0, std::ios::beg);
    bytes.resize(static_cast<size_t>(size));
    if (!in.read(&bytes[0], static_cast<std::streamsize>(bytes.size())))
      throw std::runtime_error(where + ": read error");
  } else {  // not seekable (a pipe, a device): read until the end
    in.clear();
    std::ostringstream buf;
    buf << in.rdbuf();
    if (in.bad()) throw std::runtime_error(where + ": read error");
    bytes = buf.str();
  }
  return bytes;
}

}  // namespace mg
