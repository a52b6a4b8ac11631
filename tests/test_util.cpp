#include "tests/test_util.h"

#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace mgtest {

TempDir::TempDir() {
  static int counter = 0;
  const auto* info = testing::UnitTest::GetInstance()->current_test_info();
  const std::string name =
      info ? std::string(info->test_suite_name()) + "_" + info->name() : "outside_test";
  const std::filesystem::path path =
      std::filesystem::path(testing::TempDir()) /
      ("mosgrad_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  path_ = path.string();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::file(const std::string& name) const {
  return (std::filesystem::path(path_) / name).string();
}
std::string TempDir::str() const {
  return path_;
}
void TempDir::write(const std::string& name, const std::string& bytes) const {
  write_bytes(file(name), bytes);
}

std::vector<uint32_t> bits_of(const mg::Tensor& t) {
  const std::vector<float> v = t.to_vector();
  std::vector<uint32_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), 4 * v.size());
  return out;
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

std::string next_tmp_path(const std::string& path) {
  std::string probe;
  { probe = mg::AtomicFileWriter(path).tmp_path(); }  // made and removed again: n is now taken
  const size_t dot = probe.rfind('.');
  return probe.substr(0, dot + 1) + std::to_string(std::stoull(probe.substr(dot + 1)) + 1);
}

std::string fixture_path(const std::string& file) {
  return std::string(MOSGRAD_SOURCE_DIR) + "/tests/fixtures/" + file;
}

Fixtures::Fixtures(const std::string& file) : file_(fixture_path(file)) {
  std::ifstream in(file_);
  if (!in)
    throw std::runtime_error("fixture file " + file_ +
                             " cannot be opened (regenerate with tools/gen_fixtures.py)");
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ls(line);
    std::string name, colon;
    int rank = -1;
    ls >> name >> rank;
    mg::Shape shape(rank > 0 ? rank : 0);
    for (auto& d : shape) ls >> d;
    ls >> colon;
    if (!ls || rank < 0 || colon != ":")
      throw std::runtime_error(file_ + ":" + std::to_string(line_no) +
                               ": malformed header (expected 'name rank dims... :')");
    std::vector<float> values(static_cast<size_t>(mg::numel_of(shape)));
    for (auto& v : values) {
      std::string tok;
      if (!(ls >> tok))
        throw std::runtime_error(file_ + ":" + std::to_string(line_no) + ": '" + name +
                                 "' is truncated: expected " + std::to_string(values.size()) +
                                 " values");
      v = std::strtof(tok.c_str(), nullptr);
    }
    tensors_[name] = mg::Tensor::from_vector(values, shape);
  }
}

const mg::Tensor& Fixtures::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw std::runtime_error("fixture '" + name + "' is not in " + file_);
  return it->second;
}

std::vector<int64_t> Fixtures::ints(const std::string& name) const {
  std::vector<int64_t> out;
  for (float v : get(name).to_vector()) out.push_back(static_cast<int64_t>(std::lround(v)));
  return out;
}

mg::Tensor Fixtures::leaf(const std::string& name, bool requires_grad) const {
  mg::Tensor t = mg::Tensor::from_vector(get(name).to_vector(), get(name).shape());
  if (requires_grad) t.requires_grad_();
  return t;
}

void release_fifo(const std::string& fifo) {
  const int writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (writer >= 0) {  // a reader was waiting (else ENXIO)
    ::close(writer);
    return;
  }
  (void)::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
}

int dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

std::vector<std::string> temporaries_of(const std::string& path) {
  const std::filesystem::path p(path);
  const std::string prefix = p.filename().string() + ".tmp";
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator(p.parent_path().empty() ? "." : p.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) found.push_back(name);
  }
  return found;
}

}  // namespace mgtest
