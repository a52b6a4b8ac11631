#include "io/safetensors.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/little_endian.h"
#include "io/read_file.h"

namespace mg {

namespace {

// The reference implementation refuses headers over 100 MB; a larger length is a corrupt file.
constexpr uint64_t kMaxHeader = 100'000'000;

}  // namespace

// ---------------------------------------------------------------- save

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::vector<Tensor> contiguous;
  for (const auto& [name, t] : tensors) {
    const std::string where = "save_safetensors(" + path + "): tensor '" + name + "'";
    if (name == "__metadata__")
      throw std::invalid_argument(where + ": the name is reserved for the metadata");
    if (!names.insert(name).second) throw std::invalid_argument(where + " appears twice");
    if (!t.defined()) throw std::invalid_argument(where + " is undefined");
    contiguous.push_back(t.is_contiguous()
                             ? t.cpu()
                             : copy_contiguous(t).cpu());  // GPU tensors: written from a host copy
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      append_json_string(header, key);
      header += ':';
      append_json_string(header, value);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (header.size() > 1) header += ',';
    append_json_string(header, tensors[k].first);
    header += ":{\"dtype\":\"F32\",\"shape\":[";
    const Shape& shape = contiguous[k].shape();
    for (size_t d = 0; d < shape.size(); ++d) header += (d ? "," : "") + std::to_string(shape[d]);
    const uint64_t end = offset + 4 * static_cast<uint64_t>(contiguous[k].numel());
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," + std::to_string(end) + "]}";
    offset = end;
  }
  header += '}';
  // Spaces up to a multiple of 8: 8 + N is then 8-aligned, so readers may map the floats in place.
  header.append((8 - header.size() % 8) % 8, ' ');

  AtomicFileWriter out(path);
  std::string len;
  put_le64(len, header.size());
  out.write(len.data(), len.size());
  out.write(header.data(), header.size());
  for (const Tensor& t : contiguous)
    write_le_floats(t.data(), static_cast<size_t>(t.numel()),
                    [&](const void* p, size_t n) { out.write(p, n); });
  out.commit();
}

// ---------------------------------------------------------------- load

SafetensorsFile load_safetensors(const std::string& path) {
  return parse_safetensors(read_file(path, "safetensors file"), path);
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& path) {
  const std::string where = "safetensors file " + path;
  const unsigned char* file = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t file_size = bytes.size();

  if (file_size < 8)
    throw std::runtime_error(where + " is truncated: " + std::to_string(file_size) +
                             " bytes, but the format starts with an 8-byte header length");
  if (is_checkpoint(bytes))
    throw std::runtime_error(where +
                             " is a mosgrad checkpoint, not a safetensors file: use it as "
                             "it is (--model), or `mosgrad export` it to safetensors");
  const uint64_t header_len = get_le64(file);
  const uint64_t after = file_size - 8;
  if (header_len > after)
    throw std::runtime_error(where + ": header length " + std::to_string(header_len) +
                             " is larger than the file (" + std::to_string(file_size) +
                             " bytes): truncated, or not a safetensors file");
  if (header_len > kMaxHeader)
    throw std::runtime_error(where + ": header length " + std::to_string(header_len) +
                             " is over the 100 MB limit of the format: not a safetensors file");
  const std::string header = bytes.substr(8, static_cast<size_t>(header_len));
  if (header.empty() || header[0] != '{')
    throw std::runtime_error(where +
                             ": bad JSON header: it must start with '{' (not a safetensors file?)");
  JsonValue root;
  try {
    root = parse_json(header);
  } catch (const JsonError& e) {
    throw std::runtime_error(where + ": bad JSON header at byte " + std::to_string(e.byte()) +
                             ": " + e.reason());
  }
  if (root.kind != JsonValue::Object)
    throw std::runtime_error(where + ": bad JSON header: the top level must be an object");

  const unsigned char* data = file + 8 + header_len;
  const uint64_t data_len = after - header_len;

  struct Entry {
    std::string name;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  SafetensorsFile out;
  for (const auto& [name, info] : root.members) {
    const std::string what = where + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (info.kind != JsonValue::Object)
        throw std::runtime_error(where + ": \"__metadata__\" must be an object");
      for (const auto& [key, value] : info.members) {
        if (value.kind != JsonValue::String)
          throw std::runtime_error(where + ": metadata \"" + key + "\" is " +
                                   json_kind_name(value.kind) +
                                   "; the format allows only string values");
        out.metadata[key] = value.str;
      }
      continue;
    }
    if (info.kind != JsonValue::Object)
      throw std::runtime_error(what + ": its entry must be an object");
    const JsonValue* dtype = nullptr;
    const JsonValue* shape = nullptr;
    const JsonValue* offsets = nullptr;
    for (const auto& [key, v] : info.members) {
      if (key == "dtype")
        dtype = &v;
      else if (key == "shape")
        shape = &v;
      else if (key == "data_offsets")
        offsets = &v;
    }
    if (!dtype || !shape || !offsets)
      throw std::runtime_error(what +
                               ": its entry needs \"dtype\", \"shape\" and \"data_offsets\"");
    if (dtype->kind != JsonValue::String)
      throw std::runtime_error(what + ": \"dtype\" must be a string");
    if (dtype->str != "F32")
      throw std::runtime_error(
          what + " has dtype " + dtype->str +
          ", unsupported: mosgrad reads F32 only (in PyTorch, save tensor.float())");
    if (shape->kind != JsonValue::Array)
      throw std::runtime_error(what + ": \"shape\" must be an array");
    if (offsets->kind != JsonValue::Array || offsets->items.size() != 2 ||
        !offsets->items[0].is_uint || !offsets->items[1].is_uint)
      throw std::runtime_error(
          what + ": \"data_offsets\" must be [begin, end], two non-negative integers");
    Entry e{name, {}, offsets->items[0].uint, offsets->items[1].uint};
    if (e.begin > e.end || e.end > data_len)
      throw std::runtime_error(what + ": data_offsets [" + std::to_string(e.begin) + ", " +
                               std::to_string(e.end) + "] are out of range: the data section has " +
                               std::to_string(data_len) + " bytes (truncated file?)");
    uint64_t numel = 1;
    for (const JsonValue& d : shape->items) {
      // Each size is bounded by the byte range, so the product cannot overflow before we compare.
      if (!d.is_uint || d.uint > data_len)
        throw std::runtime_error(what + ": bad size in \"shape\"");
      numel *= d.uint;
      if (numel > data_len) throw std::runtime_error(what + ": its shape is larger than the file");
      e.shape.push_back(static_cast<int64_t>(d.uint));
    }
    if (4 * numel != e.end - e.begin)
      throw std::runtime_error(what + ": shape " + shape_str(e.shape) + " of F32 needs " +
                               std::to_string(4 * numel) + " bytes, but data_offsets [" +
                               std::to_string(e.begin) + ", " + std::to_string(e.end) + "] hold " +
                               std::to_string(e.end - e.begin));
    entries.push_back(std::move(e));
  }

  // File order; and the spec's rule that the tensors tile the data section exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t covered = 0;
  for (size_t k = 0; k < entries.size(); ++k) {
    const Entry& e = entries[k];
    if (e.begin < covered)
      throw std::runtime_error(where + ": tensor '" + e.name + "' (bytes " +
                               std::to_string(e.begin) + " to " + std::to_string(e.end) +
                               ") overlaps tensor '" + entries[k - 1].name + "'");
    if (e.begin > covered)
      throw std::runtime_error(
          where + ": bytes " + std::to_string(covered) + " to " + std::to_string(e.begin) +
          " of the data section belong to no tensor (the format forbids holes)");
    covered = e.end;
  }
  if (covered != data_len)
    throw std::runtime_error(where + ": the data section has " + std::to_string(data_len) +
                             " bytes but the tensors cover " + std::to_string(covered) +
                             " (trailing bytes: corrupt or not a safetensors file)");

  for (Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape);
    read_le_floats(data + e.begin, static_cast<size_t>(t.numel()), t.data());
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

}  // namespace mg
