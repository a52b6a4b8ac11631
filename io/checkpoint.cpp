#include "io/checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

namespace fs = std::filesystem;

namespace mg {

namespace {

constexpr char kMagic[12] = {'M', 'O', 'S', 'G', 'R', 'A', 'D', 'C', 'K', 'P', 'T', '\0'};
constexpr size_t kHeaderSize = 12 + 4 + 8 + 4;
constexpr size_t kCrcOffset = 12 + 4 + 8;

bool host_is_little_endian() {
  const uint32_t one = 1;
  unsigned char first;
  std::memcpy(&first, &one, 1);
  return first == 1;
}

// Little-endian encoding into a byte buffer, whatever the host order.
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
uint64_t get_le(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// Slicing-by-8 tables: eight table lookups per 8 bytes instead of one per byte, so checksumming
// a few hundred MB of parameters costs well under a second.
struct Crc32Tables {
  uint32_t t[8][256];
  Crc32Tables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[0][i] = c;
    }
    for (int k = 1; k < 8; ++k)
      for (int i = 0; i < 256; ++i) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFF];
  }
};

// Float data in little-endian bytes, converted in chunks so a big tensor needs no second full copy.
template <typename Sink>
void for_each_float_chunk(const float* data, size_t n, Sink&& sink) {
  if (host_is_little_endian()) {
    sink(data, n * sizeof(float));
    return;
  }
  std::string chunk;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &data[i], 4);
    put_u32(chunk, bits);
    if (chunk.size() >= (1u << 20) || i + 1 == n) {
      sink(chunk.data(), chunk.size());
      chunk.clear();
    }
  }
}

// Reads the payload with bounds checks: a payload with a valid checksum can still be malformed
// (written by a buggy tool), and that must give an error, not a crash.
class Reader {
 public:
  Reader(const std::string& path, const unsigned char* p, size_t n) : path_(path), p_(p), n_(n) {}
  uint64_t u32() { return get_le(take(4, "a 4-byte count"), 4); }
  uint64_t u64() { return get_le(take(8, "an 8-byte size"), 8); }
  std::string bytes(uint64_t n, const char* what) {
    const unsigned char* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  const unsigned char* take(uint64_t n, const char* what) {
    if (n > n_ - pos_) malformed(std::string("needs ") + std::to_string(n) + " bytes for " + what +
                                 " but only " + std::to_string(n_ - pos_) + " are left");
    const unsigned char* p = p_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }
  [[noreturn]] void malformed(const std::string& what) const {
    throw std::runtime_error("checkpoint " + path_ + " is malformed at payload byte " + std::to_string(pos_) +
                             ": " + what + " (written by an incompatible tool?)");
  }

 private:
  std::string path_;
  const unsigned char* p_;
  size_t n_, pos_ = 0;
};

}  // namespace

uint32_t crc32(const void* data, size_t n, uint32_t crc) {
  static const Crc32Tables tables;
  const auto& t = tables.t;
  const unsigned char* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (; n >= 8; n -= 8, p += 8) {
    const uint32_t lo = crc ^ static_cast<uint32_t>(get_le(p, 4));
    const uint32_t hi = static_cast<uint32_t>(get_le(p + 4, 4));
    crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
          t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 0xFF] ^ (crc >> 8);
  return ~crc;
}

// ---------------------------------------------------------------- AtomicFileWriter

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

// ---------------------------------------------------------------- save / load

void save_checkpoint(const std::string& path, const NamedTensors& tensors,
                     const std::map<std::string, std::string>& strings) {
  // Validate everything before creating any file.
  std::set<std::string> names;
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (name.empty()) throw std::invalid_argument("save_checkpoint(" + path + "): a tensor has an empty name");
    if (!names.insert(name).second)
      throw std::invalid_argument("save_checkpoint(" + path + "): the tensor name '" + name + "' appears twice");
    if (!t.defined())
      throw std::invalid_argument("save_checkpoint(" + path + "): tensor '" + name + "' is undefined");
    contiguous.push_back(t.is_contiguous() ? t.cpu() : copy_contiguous(t).cpu());  // GPU tensors: written from a host copy
  }

  // The small part of the payload (names, shapes, strings) is built in memory; the float data is
  // streamed straight from the tensors. Layout in checkpoint.h.
  uint64_t payload_len = 4 + 4;
  for (size_t k = 0; k < tensors.size(); ++k)
    payload_len += 4 + tensors[k].first.size() + 4 + 8 * contiguous[k].shape().size() +
                   4 * static_cast<uint64_t>(contiguous[k].numel());
  for (const auto& [key, value] : strings) payload_len += 4 + key.size() + 8 + value.size();

  AtomicFileWriter out(path);
  std::string header(kMagic, sizeof(kMagic));
  put_u32(header, kCheckpointVersion);
  put_u64(header, payload_len);
  put_u32(header, 0);  // crc32, patched once the payload has been written
  out.write(header.data(), header.size());

  uint32_t crc = 0;
  const auto emit = [&](const void* p, size_t n) {
    crc = crc32(p, n, crc);
    out.write(p, n);
  };
  std::string buf;
  put_u32(buf, static_cast<uint32_t>(tensors.size()));
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string& name = tensors[k].first;
    const Tensor& t = contiguous[k];
    put_u32(buf, static_cast<uint32_t>(name.size()));
    buf += name;
    put_u32(buf, static_cast<uint32_t>(t.shape().size()));
    for (int64_t d : t.shape()) put_u64(buf, static_cast<uint64_t>(d));
    emit(buf.data(), buf.size());
    buf.clear();
    for_each_float_chunk(t.data(), static_cast<size_t>(t.numel()), emit);
  }
  put_u32(buf, static_cast<uint32_t>(strings.size()));
  for (const auto& [key, value] : strings) {
    put_u32(buf, static_cast<uint32_t>(key.size()));
    buf += key;
    put_u64(buf, value.size());
    buf += value;
  }
  emit(buf.data(), buf.size());

  std::string crc_bytes;
  put_u32(crc_bytes, crc);
  out.seek(kCrcOffset);
  out.write(crc_bytes.data(), crc_bytes.size());
  out.commit();
}

Checkpoint load_checkpoint(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error("checkpoint " + path + " does not exist");
  if (fs::is_directory(path, ec)) throw std::runtime_error("checkpoint " + path + " is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("checkpoint " + path + " cannot be opened (permissions?)");
  // One read of the known size: much faster than a byte iterator for a few hundred MB.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<unsigned char> file(size > 0 ? static_cast<size_t>(size) : 0);
  if (size < 0 || !in.read(reinterpret_cast<char*>(file.data()), static_cast<std::streamsize>(file.size())))
    throw std::runtime_error("checkpoint " + path + ": read error");

  if (file.empty())
    throw std::runtime_error("checkpoint " + path + " is empty (0 bytes): not a mosgrad checkpoint");
  // A short file that starts like the magic is a truncated checkpoint, not a foreign file.
  const size_t magic_seen = std::min(file.size(), sizeof(kMagic));
  if (std::memcmp(file.data(), kMagic, magic_seen) != 0)
    throw std::runtime_error("checkpoint " + path + " is not a mosgrad checkpoint (it does not start with "
                             "\"MOSGRADCKPT\"; a PyTorch or safetensors file needs its own loader)");
  if (file.size() < kHeaderSize)
    throw std::runtime_error("checkpoint " + path + " is truncated: expected at least " +
                             std::to_string(kHeaderSize) + " header bytes, found " + std::to_string(file.size()));
  const uint32_t version = static_cast<uint32_t>(get_le(&file[12], 4));
  if (version != kCheckpointVersion)
    throw std::runtime_error("checkpoint " + path + " has format version " + std::to_string(version) +
                             "; this build of mosgrad reads version " + std::to_string(kCheckpointVersion) +
                             (version > kCheckpointVersion ? " (written by a newer mosgrad?)" : ""));
  const uint64_t payload_len = get_le(&file[16], 8);
  const uint32_t stored_crc = static_cast<uint32_t>(get_le(&file[kCrcOffset], 4));
  const uint64_t have = file.size() - kHeaderSize;
  if (have < payload_len)
    throw std::runtime_error("checkpoint " + path + " is truncated: expected " +
                             std::to_string(kHeaderSize + payload_len) + " bytes, found " +
                             std::to_string(file.size()) + " (was the save interrupted or the copy incomplete?)");
  if (have > payload_len)
    throw std::runtime_error("checkpoint " + path + " is corrupt: expected " +
                             std::to_string(kHeaderSize + payload_len) + " bytes, found " +
                             std::to_string(file.size()) + " (unexpected trailing bytes)");
  const unsigned char* payload = file.data() + kHeaderSize;
  const uint32_t crc = crc32(payload, static_cast<size_t>(payload_len));
  if (crc != stored_crc)
    throw std::runtime_error("checkpoint " + path + " is corrupt: checksum mismatch (stored crc32 " +
                             std::to_string(stored_crc) + ", computed " + std::to_string(crc) +
                             "); the file was damaged after it was written");

  Checkpoint ck;
  ck.path = path;
  Reader r(path, payload, static_cast<size_t>(payload_len));
  const uint64_t n_tensors = r.u32();
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    std::string name = r.bytes(r.u32(), "a tensor name");
    if (!names.insert(name).second) r.malformed("tensor name '" + name + "' appears twice");
    const uint64_t rank = r.u32();
    if (rank > 64) r.malformed("tensor '" + name + "' has rank " + std::to_string(rank));
    Shape shape;
    uint64_t numel = 1;
    for (uint64_t d = 0; d < rank; ++d) {
      const uint64_t size = r.u64();
      // Bound every size by the bytes left, so the product below cannot overflow.
      if (size > r.left()) r.malformed("tensor '" + name + "' has a dimension of " + std::to_string(size));
      numel *= size;
      if (numel > r.left()) r.malformed("tensor '" + name + "' is larger than the file");
      shape.push_back(static_cast<int64_t>(size));
    }
    const unsigned char* bytes = r.take(4 * numel, "tensor data");
    Tensor t = Tensor::empty(shape);
    if (host_is_little_endian()) {
      if (numel > 0) std::memcpy(t.data(), bytes, static_cast<size_t>(4 * numel));
    } else {
      for (uint64_t i = 0; i < numel; ++i) {
        const uint32_t bits = static_cast<uint32_t>(get_le(bytes + 4 * i, 4));
        std::memcpy(t.data() + i, &bits, 4);
      }
    }
    ck.tensors.emplace_back(std::move(name), std::move(t));
  }
  const uint64_t n_strings = r.u32();
  for (uint64_t k = 0; k < n_strings; ++k) {
    std::string key = r.bytes(r.u32(), "a string key");
    std::string value = r.bytes(r.u64(), "a string value");
    if (!ck.strings.emplace(std::move(key), std::move(value)).second) r.malformed("a string key appears twice");
  }
  if (r.left() != 0) r.malformed(std::to_string(r.left()) + " unread bytes at the end");
  return ck;
}

bool Checkpoint::has_tensor(const std::string& name) const {
  for (const auto& nt : tensors)
    if (nt.first == name) return true;
  return false;
}

const Tensor& Checkpoint::tensor(const std::string& name) const {
  for (const auto& nt : tensors)
    if (nt.first == name) return nt.second;
  throw std::runtime_error("checkpoint " + path + " has no tensor named '" + name + "'");
}

const std::string& Checkpoint::string(const std::string& key) const {
  auto it = strings.find(key);
  if (it == strings.end()) throw std::runtime_error("checkpoint " + path + " has no string entry '" + key + "'");
  return it->second;
}

}  // namespace mg
