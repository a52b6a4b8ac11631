// The checkpoint container (io/checkpoint.h): bit-exact round trips, every kind of damaged file
// giving an error that names the file and the problem, and the atomic write.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "io/atomic_file.h"
#include "io/checkpoint.h"
#include "io/crc32.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

using mgtest::error_of;
using mgtest::read_bytes;
using mgtest::TempDir;
using mgtest::write_bytes;

using mgtest::bits_of;

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// A small model-like state: matrices, a bias, a scalar, an empty tensor, odd float values.
mg::NamedTensors sample_tensors() {
  mg::Generator gen(42);
  mg::Tensor special = mg::Tensor::from_vector(
      {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
       from_bits(0x7fc00001u) /* NaN with a payload */, -0.0f,
       std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()},
      {6});
  return {{"encoder.weight", mg::Tensor::normal({7, 5}, 0.0f, 1.0f, gen)},
          {"rnns.0.bias", mg::Tensor::uniform({12}, -0.1f, 0.1f, gen)},
          {"step", mg::Tensor::scalar(3.0f)},
          {"empty", mg::Tensor::zeros({0, 3})},
          {"special", special}};
}

std::map<std::string, std::string> sample_strings() {
  return {{"config", "{\"emsize\": 400, \"nhid\": 1150}\n"},
          {"epoch", "17"},
          {"optimizer", "asgd"},
          {"rng", "seed=1234 offset=987654321"},
          {"binary", std::string("a\0b\xff", 4)},
          {"empty", ""}};
}

}  // namespace

TEST(Checkpoint, Crc32KnownValues) {
  EXPECT_EQ(mg::crc32("123456789", 9), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(mg::crc32("", 0), 0u);
  // Chaining at any split point equals one pass (the save path checksums piece by piece).
  std::string s;
  for (int k = 0; k < 100; ++k) s += static_cast<char>(k * 37 + 11);
  const uint32_t whole = mg::crc32(s.data(), s.size());
  for (size_t cut : {0, 1, 7, 8, 9, 63, 100})
    EXPECT_EQ(mg::crc32(s.data() + cut, s.size() - cut, mg::crc32(s.data(), cut)), whole) << cut;
}

TEST(Checkpoint, RoundTripIsBitExact) {
  TempDir dir;
  const std::string path = dir.file("model.ckpt");
  const mg::NamedTensors tensors = sample_tensors();
  mg::save_checkpoint(path, tensors, sample_strings());
  EXPECT_TRUE(mgtest::temporaries_of(path).empty());

  const mg::Checkpoint ck = mg::load_checkpoint(path);
  EXPECT_EQ(ck.path, path);
  ASSERT_EQ(ck.tensors.size(), tensors.size());
  for (size_t k = 0; k < tensors.size(); ++k) {
    EXPECT_EQ(ck.tensors[k].first, tensors[k].first);  // saved order kept
    EXPECT_EQ(ck.tensors[k].second.shape(), tensors[k].second.shape()) << tensors[k].first;
    EXPECT_EQ(bits_of(ck.tensors[k].second), bits_of(tensors[k].second)) << tensors[k].first;
    EXPECT_FALSE(ck.tensors[k].second.requires_grad());
  }
  EXPECT_EQ(ck.strings, sample_strings());
  EXPECT_EQ(ck.string("epoch"), "17");
  EXPECT_EQ(ck.tensor("step").item(), 3.0f);
  EXPECT_TRUE(ck.has_tensor("special"));
  EXPECT_FALSE(ck.has_string("lr"));
  EXPECT_HAS(error_of([&] { ck.tensor("decoder.weight"); }), "decoder.weight");
  EXPECT_HAS(error_of([&] { ck.string("lr"); }), path);

  // Saving the loaded contents again gives the same bytes: the format has no hidden state.
  const std::string again = dir.file("again.ckpt");
  mg::save_checkpoint(again, ck.tensors, ck.strings);
  EXPECT_EQ(read_bytes(again), read_bytes(path));
}

TEST(Checkpoint, StridedViewsAndEmptyCheckpoint) {
  TempDir dir;
  // A transposed view [3, 2] of a [2, 3] tensor is saved in its logical (row-major) order.
  const mg::Tensor base = mg::Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  const mg::Tensor t = mg::make_view(base, {3, 2}, {1, 3}, 0);
  mg::save_checkpoint(dir.file("v.ckpt"), {{"t", t}}, {});
  const mg::Checkpoint ck = mg::load_checkpoint(dir.file("v.ckpt"));
  EXPECT_EQ(ck.tensor("t").shape(), (mg::Shape{3, 2}));
  EXPECT_EQ(ck.tensor("t").to_vector(), (std::vector<float>{1, 4, 2, 5, 3, 6}));

  mg::save_checkpoint(dir.file("e.ckpt"), {}, {});
  const mg::Checkpoint e = mg::load_checkpoint(dir.file("e.ckpt"));
  EXPECT_TRUE(e.tensors.empty());
  EXPECT_TRUE(e.strings.empty());
  EXPECT_EQ(fs::file_size(dir.file("e.ckpt")), 28u + 8u);  // header + two zero counts
}

TEST(Checkpoint, BadInputIsRejectedBeforeWriting) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  const mg::Tensor a = mg::Tensor::ones({2});
  EXPECT_THROW(mg::save_checkpoint(path, {{"a", a}, {"a", a}}, {}), std::invalid_argument);
  EXPECT_THROW(mg::save_checkpoint(path, {{"", a}}, {}), std::invalid_argument);
  EXPECT_THROW(mg::save_checkpoint(path, {{"u", mg::Tensor()}}, {}), std::invalid_argument);
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(mgtest::temporaries_of(path).empty());
}

TEST(Checkpoint, MissingEmptyAndForeignFiles) {
  TempDir dir;
  std::string e = error_of([&] { mg::load_checkpoint(dir.file("nope.ckpt")); });
  EXPECT_HAS(e, dir.file("nope.ckpt"));
  EXPECT_HAS(e, "does not exist");

  write_bytes(dir.file("empty.ckpt"), "");
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(dir.file("empty.ckpt")); }), "empty");

  write_bytes(dir.file("text.ckpt"), "this is a text file, not a checkpoint at all\n");
  e = error_of([&] { mg::load_checkpoint(dir.file("text.ckpt")); });
  EXPECT_HAS(e, dir.file("text.ckpt"));
  EXPECT_HAS(e, "not a mosgrad checkpoint");

  write_bytes(dir.file("short.ckpt"), "MOSGR");  // the start of the magic: a cut-off checkpoint
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(dir.file("short.ckpt")); }), "truncated");
}

TEST(Checkpoint, UnsupportedVersion) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  mg::save_checkpoint(path, sample_tensors(), sample_strings());
  std::string bytes = read_bytes(path);
  bytes[12] = 99;  // version field, little-endian u32 after the 12-byte magic
  write_bytes(path, bytes);
  const std::string e = error_of([&] { mg::load_checkpoint(path); });
  EXPECT_HAS(e, path);
  EXPECT_HAS(e, "version 99");
  EXPECT_HAS(e, "reads version 1");
}

TEST(Checkpoint, TruncatedFileSaysExpectedAndFound) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  mg::save_checkpoint(path, sample_tensors(), sample_strings());
  const std::string full = read_bytes(path);
  for (size_t keep : {size_t{20}, size_t{28}, full.size() / 2, full.size() - 1}) {
    write_bytes(path, full.substr(0, keep));
    const std::string e = error_of([&] { mg::load_checkpoint(path); });
    EXPECT_HAS(e, path);
    EXPECT_HAS(e, "truncated");
    if (keep >= 28) {
      EXPECT_HAS(e, "expected " + std::to_string(full.size()) + " bytes");
      EXPECT_HAS(e, "found " + std::to_string(keep));
    }
  }
  write_bytes(path, full + "xyz");
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(path); }), "trailing");
}

TEST(Checkpoint, FlippedByteIsAChecksumError) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  mg::save_checkpoint(path, sample_tensors(), sample_strings());
  const std::string full = read_bytes(path);
  // One flipped bit anywhere in the payload: in a name, a shape, float data, a string.
  for (size_t pos : {size_t{28 + 5}, size_t{28 + 30}, full.size() / 2, full.size() - 2}) {
    std::string bytes = full;
    bytes[pos] = static_cast<char>(bytes[pos] ^ 0x10);
    write_bytes(path, bytes);
    const std::string e = error_of([&] { mg::load_checkpoint(path); });
    EXPECT_HAS(e, path);
    EXPECT_HAS(e, "checksum mismatch");
    EXPECT_HAS(e, "corrupt");
  }
}

TEST(Checkpoint, MalformedPayloadWithValidChecksum) {
  // What a buggy writer could produce: the checksum is right but the content does not parse.
  // It must be an error, not a read past the end.
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  const auto write_with_payload = [&](const std::string& payload) {
    std::string h("MOSGRADCKPT\0", 12);
    const auto le = [&](uint64_t v, int n) {
      for (int i = 0; i < n; ++i) h.push_back(static_cast<char>(v >> (8 * i)));
    };
    le(1, 4);
    le(payload.size(), 8);
    le(mg::crc32(payload.data(), payload.size()), 4);
    write_bytes(path, h + payload);
  };
  write_with_payload(std::string("\x05\0\0\0", 4));  // 5 tensors announced, none there
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(path); }), "malformed");
  // One tensor "x" of shape [2^40]: far more data than the file has.
  write_with_payload(std::string("\x01\0\0\0\x01\0\0\0x\x01\0\0\0\0\0\0\0\0\x01\0\0", 21));
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(path); }), "malformed");
  write_with_payload(std::string(8, '\0') + "extra");  // two zero counts, then junk
  EXPECT_HAS(error_of([&] { mg::load_checkpoint(path); }), "unread bytes");
}

TEST(Checkpoint, StrayTmpFileFromACrashIsIgnoredAndReplaced) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  mg::save_checkpoint(path, {{"w", mg::Tensor::full({3}, 1.0f)}}, {{"epoch", "1"}});
  const std::string before = read_bytes(path);
  // A save killed half-way (kill -9, a crash) leaves only a partial temporary behind, named for
  // its process, which no longer exists.
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  write_bytes(path + ".tmp." + std::to_string(dead) + ".0", before.substr(0, before.size() / 2));
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(mg::load_checkpoint(path).string("epoch"), "1");
  // The next save replaces the checkpoint and removes the stray file.
  mg::save_checkpoint(path, {{"w", mg::Tensor::full({3}, 2.0f)}}, {{"epoch", "2"}});
  EXPECT_TRUE(mgtest::temporaries_of(path).empty());
  const mg::Checkpoint ck = mg::load_checkpoint(path);
  EXPECT_EQ(ck.string("epoch"), "2");
  EXPECT_EQ(ck.tensor("w").to_vector(), (std::vector<float>{2, 2, 2}));
}

TEST(Checkpoint, FailedWriteLeavesTheOldFileIntact) {
  TempDir dir;
  const std::string path = dir.file("m.ckpt");
  mg::save_checkpoint(path, {{"w", mg::Tensor::full({3}, 1.0f)}}, {{"epoch", "1"}});
  const std::string before = read_bytes(path);
  // Make the temp file impossible to create: a directory sits at its name.
  const std::string tmp = mgtest::next_tmp_path(path);
  fs::create_directory(tmp);
  const std::string e = error_of([&] {
    mg::save_checkpoint(path, {{"w", mg::Tensor::full({3}, 2.0f)}}, {{"epoch", "2"}});
  });
  EXPECT_HAS(e, path + ".tmp");
  EXPECT_EQ(read_bytes(path), before);
  EXPECT_EQ(mg::load_checkpoint(path).string("epoch"), "1");
  fs::remove(tmp);

  // A directory that does not exist: an error naming the path, nothing created.
  const std::string missing = dir.file("no/such/dir/m.ckpt");
  EXPECT_HAS(error_of([&] { mg::save_checkpoint(missing, {}, {}); }), missing);
}

TEST(Checkpoint, AtomicWriterDropsTheTempFileOnError) {
  TempDir dir;
  const std::string path = dir.file("w.bin");
  write_bytes(path, "old");
  try {
    mg::AtomicFileWriter w(path);
    w.write("new contents", 12);
    EXPECT_TRUE(fs::exists(w.tmp_path()));
    throw std::runtime_error("simulated failure before commit");
  } catch (const std::runtime_error&) {
  }
  EXPECT_TRUE(mgtest::temporaries_of(path).empty());
  EXPECT_EQ(read_bytes(path), "old");
  {
    mg::AtomicFileWriter w(path);
    w.write("new contents", 12);
    w.seek(0);
    w.write("N", 1);
    w.commit();
  }
  EXPECT_EQ(read_bytes(path), "New contents");
}
