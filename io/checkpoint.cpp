#include "io/checkpoint.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/crc32.h"
#include "io/little_endian.h"
#include "io/read_file.h"

namespace mg {

namespace {

constexpr char kMagic[12] = {'M', 'O', 'S', 'G', 'R', 'A', 'D', 'C', 'K', 'P', 'T', '\0'};
constexpr size_t kHeaderSize = 12 + 4 + 8 + 4;
constexpr size_t kCrcOffset = 12 + 4 + 8;

// Reads the payload with bounds checks: a payload with a valid checksum can still be malformed
// (written by a buggy tool), and that must give an error, not a crash.
class Reader {
 public:
  Reader(const std::string& path, const unsigned char* p, size_t n) : path_(path), p_(p), n_(n) {}
  uint64_t u32() { return get_le32(take(4, "a 4-byte count")); }
  uint64_t u64() { return get_le64(take(8, "an 8-byte size")); }
  std::string bytes(uint64_t n, const char* what) {
    const unsigned char* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
  }
  const unsigned char* take(uint64_t n, const char* what) {
    if (n > n_ - pos_)
      malformed(std::string("needs ") + std::to_string(n) + " bytes for " + what + " but only " +
                std::to_string(n_ - pos_) + " are left");
    const unsigned char* p = p_ + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }
  size_t pos() const { return pos_; }
  size_t left() const { return n_ - pos_; }
  [[noreturn]] void malformed(const std::string& what) const {
    throw std::runtime_error("checkpoint " + path_ + " is malformed at payload byte " +
                             std::to_string(pos_) + ": " + what +
                             " (written by an incompatible tool?)");
  }

 private:
  std::string path_;
  const unsigned char* p_;
  size_t n_, pos_ = 0;
};

}  // namespace

// ---------------------------------------------------------------- save / load

void save_checkpoint(const std::string& path, const NamedTensors& tensors,
                     const std::map<std::string, std::string>& strings) {
  // Validate everything before creating any file.
  std::set<std::string> names;
  std::vector<Tensor> contiguous;
  contiguous.reserve(tensors.size());
  for (const auto& [name, t] : tensors) {
    if (name.empty())
      throw std::invalid_argument("save_checkpoint(" + path + "): a tensor has an empty name");
    if (!names.insert(name).second)
      throw std::invalid_argument("save_checkpoint(" + path + "): the tensor name '" + name +
                                  "' appears twice");
    if (!t.defined())
      throw std::invalid_argument("save_checkpoint(" + path + "): tensor '" + name +
                                  "' is undefined");
    contiguous.push_back(t.is_contiguous()
                             ? t.cpu()
                             : copy_contiguous(t).cpu());  // GPU tensors: written from a host copy
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
  put_le32(header, kCheckpointVersion);
  put_le64(header, payload_len);
  put_le32(header, 0);  // crc32, patched once the payload has been written
  out.write(header.data(), header.size());

  uint32_t crc = 0;
  const auto emit = [&](const void* p, size_t n) {
    crc = crc32(p, n, crc);
    out.write(p, n);
  };
  std::string buf;
  put_le32(buf, static_cast<uint32_t>(tensors.size()));
  for (size_t k = 0; k < tensors.size(); ++k) {
    const std::string& name = tensors[k].first;
    const Tensor& t = contiguous[k];
    put_le32(buf, static_cast<uint32_t>(name.size()));
    buf += name;
    put_le32(buf, static_cast<uint32_t>(t.shape().size()));
    for (int64_t d : t.shape()) put_le64(buf, static_cast<uint64_t>(d));
    emit(buf.data(), buf.size());
    buf.clear();
    write_le_floats(t.data(), static_cast<size_t>(t.numel()), emit);
  }
  put_le32(buf, static_cast<uint32_t>(strings.size()));
  for (const auto& [key, value] : strings) {
    put_le32(buf, static_cast<uint32_t>(key.size()));
    buf += key;
    put_le64(buf, value.size());
    buf += value;
  }
  emit(buf.data(), buf.size());

  std::string crc_bytes;
  put_le32(crc_bytes, crc);
  out.seek(kCrcOffset);
  out.write(crc_bytes.data(), crc_bytes.size());
  out.commit();
}

bool is_checkpoint(const std::string& bytes) {
  return bytes.size() >= sizeof(kMagic) && std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) == 0;
}

Checkpoint load_checkpoint(const std::string& path) {
  return parse_checkpoint(read_file(path, "checkpoint"), path);
}

Checkpoint parse_checkpoint(const std::string& bytes, const std::string& path) {
  const unsigned char* file = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t file_size = bytes.size();

  if (file_size == 0)
    throw std::runtime_error("checkpoint " + path +
                             " is empty (0 bytes): not a mosgrad checkpoint");
  // A short file that starts like the magic is a truncated checkpoint, not a foreign file.
  const size_t magic_seen = std::min(file_size, sizeof(kMagic));
  if (std::memcmp(file, kMagic, magic_seen) != 0)
    throw std::runtime_error(
        "checkpoint " + path +
        " is not a mosgrad checkpoint (it does not start with "
        "\"MOSGRADCKPT\"; a safetensors file becomes one with `mosgrad import --in FILE "
        "--out FILE.ckpt`)");
  if (file_size < kHeaderSize)
    throw std::runtime_error("checkpoint " + path + " is truncated: expected at least " +
                             std::to_string(kHeaderSize) + " header bytes, found " +
                             std::to_string(file_size));
  const uint32_t version = get_le32(file + 12);
  if (version != kCheckpointVersion)
    throw std::runtime_error(
        "checkpoint " + path + " has format version " + std::to_string(version) +
        "; this build of mosgrad reads version " + std::to_string(kCheckpointVersion) +
        (version > kCheckpointVersion ? " (written by a newer mosgrad?)" : ""));
  const uint64_t payload_len = get_le64(file + 16);
  const uint32_t stored_crc = get_le32(file + kCrcOffset);
  const uint64_t have = file_size - kHeaderSize;
  if (have < payload_len)
    throw std::runtime_error("checkpoint " + path + " is truncated: expected " +
                             std::to_string(kHeaderSize + payload_len) + " bytes, found " +
                             std::to_string(file_size) +
                             " (was the save interrupted or the copy incomplete?)");
  if (have > payload_len)
    throw std::runtime_error("checkpoint " + path + " is corrupt: expected " +
                             std::to_string(kHeaderSize + payload_len) + " bytes, found " +
                             std::to_string(file_size) + " (unexpected trailing bytes)");
  const unsigned char* payload = file + kHeaderSize;
  const uint32_t crc = crc32(payload, static_cast<size_t>(payload_len));
  if (crc != stored_crc)
    throw std::runtime_error("checkpoint " + path +
                             " is corrupt: checksum mismatch (stored crc32 " +
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
      if (size > r.left())
        r.malformed("tensor '" + name + "' has a dimension of " + std::to_string(size));
      numel *= size;
      if (numel > r.left()) r.malformed("tensor '" + name + "' is larger than the file");
      shape.push_back(static_cast<int64_t>(size));
    }
    const unsigned char* data = r.take(4 * numel, "tensor data");
    Tensor t = Tensor::empty(shape);
    read_le_floats(data, static_cast<size_t>(numel), t.data());
    ck.tensors.emplace_back(std::move(name), std::move(t));
  }
  const uint64_t n_strings = r.u32();
  for (uint64_t k = 0; k < n_strings; ++k) {
    std::string key = r.bytes(r.u32(), "a string key");
    std::string value = r.bytes(r.u64(), "a string value");
    if (!ck.strings.emplace(std::move(key), std::move(value)).second)
      r.malformed("a string key appears twice");
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
  if (it == strings.end())
    throw std::runtime_error("checkpoint " + path + " has no string entry '" + key + "'");
  return it->second;
}

}  // namespace mg
