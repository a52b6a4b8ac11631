#include "io/safetensors.h"

#include <algorithm>
#include <set>
#include <stdexcept>
#include <vector>

#include "io/atomic_file.h"
#include "io/little_endian.h"
#include "io/read_file.h"

namespace mg {

namespace {

// The reference implementation refuses headers over 100 MB; a larger length is a corrupt file.
constexpr uint64_t kMaxHeader = 100'000'000;

// ---------------------------------------------------------------- a minimal JSON
// Just what the header needs: objects keep their key order (it tells us nothing, but error
// messages and round trips read better), numbers are kept as non-negative integers when they are
// ones (offsets can exceed a double's 53 exact bits in principle).

struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  bool is_uint = false;  // a non-negative integer that fits in uint64
  uint64_t uint = 0;
  std::string str;                                  // String
  std::vector<Json> items;                          // Array
  std::vector<std::pair<std::string, Json>> members;  // Object
};

const char* kind_name(Json::Kind k) {
  static const char* names[] = {"null", "a boolean", "a number", "a string", "an array", "an object"};
  return names[k];
}

class JsonParser {
 public:
  JsonParser(const std::string& text, const std::string& where) : s_(text), where_(where) {}

  Json parse_document() {
    Json v = value(0);
    skip_space();
    if (pos_ != s_.size()) fail("unexpected text after the JSON object");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error(where_ + ": bad JSON header at byte " + std::to_string(pos_) + ": " + what);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool consume(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) { ++pos_; return true; }
    return false;
  }

  Json value(int depth) {
    // The header is two levels deep; a deep nesting is a hostile or broken file, not a reason to
    // overflow the stack.
    if (depth > 16) fail("nesting deeper than 16 levels");
    skip_space();
    if (pos_ >= s_.size()) fail("unexpected end of the header");
    Json v;
    const char c = s_[pos_];
    if (c == '{') {
      v.kind = Json::Object;
      ++pos_;
      if (consume('}')) return v;
      std::set<std::string> keys;
      do {
        skip_space();
        std::string key = string_literal();
        if (!keys.insert(key).second) fail("the key \"" + key + "\" appears twice");
        expect(':');
        v.members.emplace_back(std::move(key), value(depth + 1));
      } while (consume(','));
      expect('}');
    } else if (c == '[') {
      v.kind = Json::Array;
      ++pos_;
      if (consume(']')) return v;
      do v.items.push_back(value(depth + 1));
      while (consume(','));
      expect(']');
    } else if (c == '"') {
      v.kind = Json::String;
      v.str = string_literal();
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      number(v);
    } else if (s_.compare(pos_, 4, "true") == 0) { v.kind = Json::Bool; v.boolean = true; pos_ += 4; }
    else if (s_.compare(pos_, 5, "false") == 0) { v.kind = Json::Bool; pos_ += 5; }
    else if (s_.compare(pos_, 4, "null") == 0) { pos_ += 4; }
    else fail(std::string("unexpected character '") + c + "'");
    return v;
  }

  void number(Json& v) {
    v.kind = Json::Number;
    const bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    const auto digits = [&]() {
      const size_t from = pos_;
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
      return pos_ - from;
    };
    const size_t int_start = pos_;
    const size_t n_int = digits();
    if (n_int == 0) fail("a number needs digits");
    if (n_int > 1 && s_[int_start] == '0') fail("numbers cannot have leading zeros");
    bool integral = true;
    if (pos_ < s_.size() && s_[pos_] == '.') {
      ++pos_;
      if (digits() == 0) fail("a digit must follow the decimal point");
      integral = false;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("a digit must follow the exponent");
      integral = false;
    }
    if (!integral || negative) return;  // valid JSON, but never a valid size or offset
    uint64_t u = 0;
    for (size_t i = int_start; i < pos_; ++i) {
      const uint64_t d = static_cast<uint64_t>(s_[i] - '0');
      if (u > (UINT64_MAX - d) / 10) return;  // too large for uint64: not usable as an offset
      u = u * 10 + d;
    }
    v.is_uint = true;
    v.uint = u;
  }

  // Appends code point cp as UTF-8.
  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) out += static_cast<char>(cp);
    else if (cp < 0x800) { out += static_cast<char>(0xC0 | (cp >> 6)); out += static_cast<char>(0x80 | (cp & 0x3F)); }
    else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  uint32_t hex4() {
    if (pos_ + 4 > s_.size()) fail("a \\u escape needs 4 hex digits");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      v <<= 4;
      if (h >= '0' && h <= '9') v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f') v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') v |= static_cast<uint32_t>(h - 'A' + 10);
      else fail("a \\u escape needs 4 hex digits");
    }
    return v;
  }

  std::string string_literal() {
    if (pos_ >= s_.size() || s_[pos_] != '"') fail("expected a string in double quotes");
    ++pos_;
    std::string out;
    while (true) {
      if (pos_ >= s_.size()) fail("unterminated string");
      const unsigned char c = static_cast<unsigned char>(s_[pos_++]);
      if (c == '"') return out;
      if (c < 0x20) fail("raw control character in a string (must be escaped)");
      if (c != '\\') { out += static_cast<char>(c); continue; }
      if (pos_ >= s_.size()) fail("unterminated escape");
      const char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF) {  // a surrogate pair encodes one code point above U+FFFF
            if (s_.compare(pos_, 2, "\\u") != 0) fail("unpaired surrogate in a \\u escape");
            pos_ += 2;
            const uint32_t low = hex4();
            if (low < 0xDC00 || low > 0xDFFF) fail("unpaired surrogate in a \\u escape");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            fail("unpaired surrogate in a \\u escape");
          }
          put_utf8(out, cp);
          break;
        }
        default: fail(std::string("unknown escape '\\") + e + "'");
      }
    }
  }

  const std::string& s_;
  std::string where_;
  size_t pos_ = 0;
};

// JSON string literal, escaping exactly what Python's json.dumps and Rust's serde_json escape
// (quote, backslash, control characters; UTF-8 passes through), so our headers match theirs byte
// for byte.
void put_json_string(std::string& out, const std::string& s) {
  out += '"';
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

}  // namespace

// ---------------------------------------------------------------- save

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::set<std::string> names;
  std::vector<Tensor> contiguous;
  for (const auto& [name, t] : tensors) {
    const std::string where = "save_safetensors(" + path + "): tensor '" + name + "'";
    if (name == "__metadata__") throw std::invalid_argument(where + ": the name is reserved for the metadata");
    if (!names.insert(name).second) throw std::invalid_argument(where + " appears twice");
    if (!t.defined()) throw std::invalid_argument(where + " is undefined");
    contiguous.push_back(t.is_contiguous() ? t.cpu() : copy_contiguous(t).cpu());  // GPU tensors: written from a host copy
  }

  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [key, value] : metadata) {
      if (!first) header += ',';
      first = false;
      put_json_string(header, key);
      header += ':';
      put_json_string(header, value);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (size_t k = 0; k < tensors.size(); ++k) {
    if (header.size() > 1) header += ',';
    put_json_string(header, tensors[k].first);
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
    write_le_floats(t.data(), static_cast<size_t>(t.numel()), [&](const void* p, size_t n) { out.write(p, n); });
  out.commit();
}

// ---------------------------------------------------------------- load

SafetensorsFile load_safetensors(const std::string& path) {
  const std::string where = "safetensors file " + path;
  const std::string bytes = read_file(path, "safetensors file");
  const unsigned char* file = reinterpret_cast<const unsigned char*>(bytes.data());
  const size_t file_size = bytes.size();

  if (file_size < 8)
    throw std::runtime_error(where + " is truncated: " + std::to_string(file_size) +
                             " bytes, but the format starts with an 8-byte header length");
  const uint64_t header_len = get_le64(file);
  const uint64_t after = file_size - 8;
  if (header_len > after)
    throw std::runtime_error(where + ": header length " + std::to_string(header_len) + " is larger than the file (" +
                             std::to_string(file_size) + " bytes): truncated, or not a safetensors file");
  if (header_len > kMaxHeader)
    throw std::runtime_error(where + ": header length " + std::to_string(header_len) +
                             " is over the 100 MB limit of the format: not a safetensors file");
  const std::string header = bytes.substr(8, static_cast<size_t>(header_len));
  if (header.empty() || header[0] != '{')
    throw std::runtime_error(where + ": bad JSON header: it must start with '{' (not a safetensors file?)");
  const Json root = JsonParser(header, where).parse_document();
  if (root.kind != Json::Object) throw std::runtime_error(where + ": bad JSON header: the top level must be an object");

  const unsigned char* data = file + 8 + header_len;
  const uint64_t data_len = after - header_len;

  struct Entry { std::string name; Shape shape; uint64_t begin, end; };
  std::vector<Entry> entries;
  SafetensorsFile out;
  for (const auto& [name, info] : root.members) {
    const std::string what = where + ": tensor '" + name + "'";
    if (name == "__metadata__") {
      if (info.kind != Json::Object) throw std::runtime_error(where + ": \"__metadata__\" must be an object");
      for (const auto& [key, value] : info.members) {
        if (value.kind != Json::String)
          throw std::runtime_error(where + ": metadata \"" + key + "\" is " + kind_name(value.kind) +
                                   "; the format allows only string values");
        out.metadata[key] = value.str;
      }
      continue;
    }
    if (info.kind != Json::Object) throw std::runtime_error(what + ": its entry must be an object");
    const Json* dtype = nullptr;
    const Json* shape = nullptr;
    const Json* offsets = nullptr;
    for (const auto& [key, v] : info.members) {
      if (key == "dtype") dtype = &v;
      else if (key == "shape") shape = &v;
      else if (key == "data_offsets") offsets = &v;
    }
    if (!dtype || !shape || !offsets)
      throw std::runtime_error(what + ": its entry needs \"dtype\", \"shape\" and \"data_offsets\"");
    if (dtype->kind != Json::String) throw std::runtime_error(what + ": \"dtype\" must be a string");
    if (dtype->str != "F32")
      throw std::runtime_error(what + " has dtype " + dtype->str +
                               ", unsupported: mosgrad reads F32 only (in PyTorch, save tensor.float())");
    if (shape->kind != Json::Array) throw std::runtime_error(what + ": \"shape\" must be an array");
    if (offsets->kind != Json::Array || offsets->items.size() != 2 || !offsets->items[0].is_uint ||
        !offsets->items[1].is_uint)
      throw std::runtime_error(what + ": \"data_offsets\" must be [begin, end], two non-negative integers");
    Entry e{name, {}, offsets->items[0].uint, offsets->items[1].uint};
    if (e.begin > e.end || e.end > data_len)
      throw std::runtime_error(what + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                               "] are out of range: the data section has " + std::to_string(data_len) +
                               " bytes (truncated file?)");
    uint64_t numel = 1;
    for (const Json& d : shape->items) {
      // Each size is bounded by the byte range, so the product cannot overflow before we compare.
      if (!d.is_uint || d.uint > data_len) throw std::runtime_error(what + ": bad size in \"shape\"");
      numel *= d.uint;
      if (numel > data_len) throw std::runtime_error(what + ": its shape is larger than the file");
      e.shape.push_back(static_cast<int64_t>(d.uint));
    }
    if (4 * numel != e.end - e.begin)
      throw std::runtime_error(what + ": shape " + shape_str(e.shape) + " of F32 needs " + std::to_string(4 * numel) +
                               " bytes, but data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                               "] hold " + std::to_string(e.end - e.begin));
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
      throw std::runtime_error(where + ": tensor '" + e.name + "' (bytes " + std::to_string(e.begin) + " to " +
                               std::to_string(e.end) + ") overlaps tensor '" + entries[k - 1].name + "'");
    if (e.begin > covered)
      throw std::runtime_error(where + ": bytes " + std::to_string(covered) + " to " + std::to_string(e.begin) +
                               " of the data section belong to no tensor (the format forbids holes)");
    covered = e.end;
  }
  if (covered != data_len)
    throw std::runtime_error(where + ": the data section has " + std::to_string(data_len) + " bytes but the tensors cover " +
                             std::to_string(covered) + " (trailing bytes: corrupt or not a safetensors file)");

  for (Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape);
    read_le_floats(data + e.begin, static_cast<size_t>(t.numel()), t.data());
    out.tensors.emplace_back(std::move(e.name), std::move(t));
  }
  return out;
}

}  // namespace mg
