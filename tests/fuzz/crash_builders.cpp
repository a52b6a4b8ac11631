#include "tests/fuzz/crash_builders.h"

#include <cstdint>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "io/checkpoint.h"
#include "io/crc32.h"
#include "io/little_endian.h"
#include "io/read_file.h"
#include "io/safetensors.h"

namespace mgfuzz {

namespace {

namespace fs = std::filesystem;
using Strings = std::map<std::string, std::string>;

// ---- Checkpoints (layout in io/checkpoint.h) ----

constexpr size_t kHeader = 28, kCrcAt = 24;

// Where the fields of a well-formed checkpoint lie, as byte offsets in the file.
struct CheckpointLayout {
  std::map<std::string, std::vector<size_t>> dims;  // tensor name: each u64 dimension
  std::map<std::string, size_t> data;               // tensor name: its float32 values
  std::map<std::string, size_t> length, value;      // string key: its u64 value length, its value
};

CheckpointLayout layout_of(const std::string& bytes) {
  (void)mg::parse_checkpoint(bytes, "seed");  // well-formed, so the walk below stays in bounds
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t pos = kHeader;
  const auto u32 = [&] {
    pos += 4;
    return mg::get_le32(p + pos - 4);
  };
  const auto u64 = [&] {
    pos += 8;
    return mg::get_le64(p + pos - 8);
  };
  const auto text = [&](size_t n) {
    pos += n;
    return bytes.substr(pos - n, n);
  };
  CheckpointLayout l;
  for (uint64_t n = u32(); n > 0; --n) {
    const std::string name = text(u32());
    uint64_t numel = 1;
    for (uint64_t r = u32(); r > 0; --r) {
      l.dims[name].push_back(pos);
      numel *= u64();
    }
    l.data[name] = pos;
    pos += 4 * numel;
  }
  for (uint64_t n = u32(); n > 0; --n) {
    const std::string key = text(u32());
    l.length[key] = pos;
    const uint64_t size = u64();
    l.value[key] = pos;
    pos += size;
  }
  return l;
}

// The header's CRC-32 rewritten to match the payload, as save_checkpoint writes it (the targets
// rewrite it too; a patched file with a valid CRC also fails the same way outside them).
std::string with_valid_crc(std::string bytes) {
  std::string crc;
  mg::put_le32(crc, mg::crc32(bytes.data() + kHeader, bytes.size() - kHeader));
  return bytes.replace(kCrcAt, 4, crc);
}

std::string with_u64_at(std::string bytes, size_t at, uint64_t value) {
  std::string le;
  mg::put_le64(le, value);
  return with_valid_crc(bytes.replace(at, 8, le));
}

// The checkpoint with dimension `d` of tensor `name` set to `size`, its data left as it was.
std::string with_dim(const std::string& ckpt, const std::string& name, size_t d, uint64_t size) {
  return with_u64_at(ckpt, layout_of(ckpt).dims.at(name).at(d), size);
}

// The checkpoint with the stored length of string `key` set to `n`, its bytes left as they were.
std::string with_string_length(const std::string& ckpt, const std::string& key, uint64_t n) {
  return with_u64_at(ckpt, layout_of(ckpt).length.at(key), n);
}

// The first `at` bytes of a file, its header unchanged: a save cut short.
std::string cut_at(const std::string& bytes, size_t at) {
  return bytes.substr(0, at);
}

// Files go through the formats' own writers (which write to a path) in a scratch file.
class Builder {
 public:
  Builder(fs::path seeds, fs::path scratch)
      : seeds_(std::move(seeds)), scratch_(std::move(scratch)) {}
  ~Builder() { fs::remove(scratch_); }

  // The bytes of a model seed, e.g. "checkpoint/softmax_tied.ckpt".
  std::string seed(const std::string& name) const {
    return mg::read_file((seeds_ / name).string(), "model seed");
  }

  // A checkpoint as save_checkpoint writes it.
  std::string checkpoint(const mg::NamedTensors& tensors, const Strings& strings) const {
    mg::save_checkpoint(scratch_.string(), tensors, strings);
    return mg::read_file(scratch_.string(), "checkpoint");
  }
  // The checkpoint with the strings in `changes` set, through the checkpoint API.
  std::string with_strings(const std::string& ckpt, const Strings& changes) const {
    mg::Checkpoint ck = mg::parse_checkpoint(ckpt, "seed");
    for (const auto& [key, value] : changes) ck.strings.at(key) = value;
    return checkpoint(ck.tensors, ck.strings);
  }
  // The checkpoint with tensor `name` replaced by `t`.
  std::string with_tensor(const std::string& ckpt, const std::string& name,
                          const mg::Tensor& t) const {
    mg::Checkpoint ck = mg::parse_checkpoint(ckpt, "seed");
    for (auto& [n, old] : ck.tensors)
      if (n == name) old = t;
    return checkpoint(ck.tensors, ck.strings);
  }

  // A safetensors file as save_safetensors writes it.
  std::string safetensors(const mg::NamedTensors& tensors, const Strings& metadata = {}) const {
    mg::save_safetensors(scratch_.string(), tensors, metadata);
    return mg::read_file(scratch_.string(), "safetensors file");
  }
  // The file with the metadata strings in `changes` set.
  std::string with_metadata(const std::string& file, const Strings& changes) const {
    mg::SafetensorsFile f = mg::parse_safetensors(file, "seed");
    for (const auto& [key, value] : changes) f.metadata.at(key) = value;
    return safetensors(f.tensors, f.metadata);
  }

 private:
  fs::path seeds_, scratch_;
};

// ---- Safetensors (an 8-byte header length, the JSON header, the data) ----

std::string safetensors_with_header(const std::string& json, const std::string& data = "") {
  std::string out;
  mg::put_le64(out, json.size());
  return out + json + data;
}

// The file with `from` replaced by `to` in its JSON header (which must hold `from`).
std::string with_header_text(const std::string& file, const std::string& from,
                             const std::string& to) {
  const uint64_t n = mg::get_le64(reinterpret_cast<const unsigned char*>(file.data()));
  std::string json = file.substr(8, n);
  const size_t at = json.find(from);
  if (at == std::string::npos) throw std::logic_error("no '" + from + "' in the header");
  json.replace(at, from.size(), to);
  json.erase(json.find_last_not_of(' ') + 1);  // padded again to 8 bytes, as save_safetensors does
  json.append((8 - json.size() % 8) % 8, ' ');
  return safetensors_with_header(json, file.substr(8 + n));
}

struct Reproducer {
  const char* path;  // <target>/<name>, as tests/fuzz/crashes/README.md names it
  std::string bytes;
};

std::vector<Reproducer> reproducers(const Builder& b) {
  const uint64_t p40 = uint64_t{1} << 40, p60 = uint64_t{1} << 60, p62 = uint64_t{1} << 62;
  const std::string softmax = b.seed("checkpoint/softmax_tied.ckpt");  // 1 layer, 6 tensors
  const std::string softmax_st = b.seed("safetensors/softmax_tied.safetensors");
  const std::string state = b.seed("train_state/sgd_mid_epoch.ckpt");  // epoch 3, step 57
  const CheckpointLayout softmax_at = layout_of(softmax), state_at = layout_of(state);
  const std::string gen = mg::parse_checkpoint(state, "seed").string("dropout_gen");  // "seed 0"
  const std::string nested = "{\"a\":" + std::string(60000, '[') + std::string(60000, ']') + "}";
  return {
      // The softmax seed claiming V = 2^24 and E = 2^20 (2^44 weights) for its 116 values.
      {"checkpoint/config_of_2p44_weights_in_a_1k_file.ckpt",
       b.with_strings(softmax, {{"model.ntoken", "16777216"}, {"model.emsize", "1048576"}})},
      // The softmax seed whose embedding is [2^40, 3].
      {"checkpoint/tensor_dimension_2p40.ckpt", with_dim(softmax, "model.encoder.weight", 0, p40)},
      // A checkpoint of one empty tensor w [4, 0] whose dims now say [4, 2^62].
      {"checkpoint/tensor_dims_product_wraps_to_0.ckpt",
       with_dim(b.checkpoint({{"w", mg::Tensor::zeros({4, 0})}}, {}), "w", 1, p62)},
      // A checkpoint of one string, kind = "model", whose stored length is 2^64 - 16.
      {"checkpoint/string_length_wraps_the_position.ckpt",
       with_string_length(b.checkpoint({}, {{"kind", "model"}}), "kind", uint64_t(0) - 16)},
      // The softmax seed cut 18 bytes into the values of its second tensor.
      {"checkpoint/truncated_in_tensor_data.ckpt",
       cut_at(softmax, softmax_at.data.at("model.rnns.0.weight_ih") + 18)},

      // The softmax seed claiming V = 2^24 and E = 2^20, as above.
      {"safetensors/config_of_2p44_weights_in_a_1k_file.safetensors",
       b.with_metadata(softmax_st, {{"model.ntoken", "16777216"}, {"model.emsize", "1048576"}})},
      // The softmax seed's vocabulary without <unk>: 4 words for ntoken = 5.
      {"safetensors/vocabulary_one_word_short.safetensors",
       b.with_metadata(softmax_st, {{"vocab", "<eos>\nthe\ncat\nsat\n"}})},
      // A file of one tensor w [4] whose header says [2^40] and bytes [0, 2^42).
      {"safetensors/shape_of_2p40_floats.safetensors",
       with_header_text(b.safetensors({{"w", mg::Tensor::zeros({4})}}),
                        "\"shape\":[4],\"data_offsets\":[0,16]",
                        "\"shape\":[" + std::to_string(p40) + "],\"data_offsets\":[0," +
                            std::to_string(4 * p40) + "]")},
      // A file of a [4] and an empty w [16, 0] whose header says [16, 2^60].
      {"safetensors/shape_product_wraps_to_0.safetensors",
       with_header_text(
           b.safetensors({{"a", mg::Tensor::zeros({4})}, {"w", mg::Tensor::zeros({16, 0})}}),
           "\"shape\":[16,0]", "\"shape\":[16," + std::to_string(p60) + "]")},
      // A header {"a": [[[...]]]} nested 60000 arrays deep (not padded), and no data.
      {"safetensors/header_nested_60000_deep.safetensors", safetensors_with_header(nested)},

      // The sgd_mid_epoch train state with one field out of its range or not a number.
      {"train_state/epoch_beyond_int64.ckpt",
       b.with_strings(state, {{"epoch", "99999999999999999999"}})},
      {"train_state/optimizer_steps_beyond_int64.ckpt",
       b.with_strings(state, {{"optimizer_steps", "99999999999999999999"}})},
      {"train_state/epoch_zero.ckpt", b.with_strings(state, {{"epoch", "0"}})},
      {"train_state/step_negative.ckpt", b.with_strings(state, {{"step", "-57"}})},
      {"train_state/best_val_nan.ckpt", b.with_strings(state, {{"best_val", "nan"}})},
      {"train_state/val_history_inf.ckpt", b.with_strings(state, {{"val_history", "5.1 inf "}})},
      // The dropout generator's seed kept, its offset 10^23 - 1.
      {"train_state/dropout_gen_offset_beyond_uint64.ckpt",
       b.with_strings(
           state, {{"dropout_gen", gen.substr(0, gen.find(' ')) + " 99999999999999999999999"}})},
      // The state with layer 0's hidden h of a batch of 3, [3, 4], where the run's batch is 2.
      {"train_state/hidden_state_of_another_batch_size.ckpt",
       b.with_tensor(state, "hidden.0.h", mg::Tensor::zeros({3, 4}))},
      // The state cut 2 bytes into the value of its string "save".
      {"train_state/truncated_in_the_strings.ckpt", cut_at(state, state_at.value.at("save") + 2)},
  };
}

}  // namespace

void write_crash_reproducers(const fs::path& seeds, const fs::path& root) {
  fs::create_directories(root);
  const Builder builder(seeds, root / "scratch.tmp");
  for (const Reproducer& r : reproducers(builder)) {
    const fs::path file = root / r.path;
    fs::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary) << r.bytes;
  }
}

}  // namespace mgfuzz
