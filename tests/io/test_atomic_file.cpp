// The file helpers of io/: the atomic writer (io/atomic_file.h) with its unique, exclusive
// temporaries, the whole-file reader (io/read_file.h) and the little-endian helpers.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "io/atomic_file.h"
#include "io/little_endian.h"
#include "io/read_file.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

// The names in `dir` that start with `prefix` (to find temporaries, wherever they are numbered).
std::vector<std::string> entries_starting_with(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0) out.push_back(name);
  }
  return out;
}

}  // namespace

TEST(AtomicFile, TemporariesAreUniquePerWriterAndProcess) {
  mgtest::TempDir dir;
  const std::string path = dir.file("f.bin");
  mg::AtomicFileWriter a(path),
      b(path);  // two saves of one path at once, as two runs on one --save
  EXPECT_NE(a.tmp_path(), b.tmp_path());
  EXPECT_EQ(a.tmp_path().rfind(path + ".tmp." + std::to_string(::getpid()) + ".", 0), 0u)
      << a.tmp_path();
  a.write("first", 5);
  b.write("second", 6);
  a.commit();
  EXPECT_EQ(mgtest::read_bytes(path), "first");
  b.commit();  // neither wrote into the other's file: the last one wins whole
  EXPECT_EQ(mgtest::read_bytes(path), "second");
  EXPECT_TRUE(entries_starting_with(dir.str(), "f.bin.tmp").empty());
  EXPECT_EQ(a.path(), path);
}

TEST(AtomicFile, RefusesToWriteThroughASymlinkAtTheTemporarysName) {
  mgtest::TempDir dir;
  const std::string path = dir.file("ckpt");
  const std::string victim = dir.file("victim");  // stands for a file outside the run directory
  mgtest::write_bytes(path, "old");
  mgtest::write_bytes(victim, "precious");
  const std::string tmp = mgtest::next_tmp_path(path);
  fs::create_symlink(victim, tmp);
  const std::string e = mgtest::error_of([&] { mg::write_file_atomically(path, "new"); });
  EXPECT_HAS(e, tmp);
  EXPECT_HAS(e, "already");
  EXPECT_EQ(mgtest::read_bytes(victim), "precious");
  EXPECT_EQ(mgtest::read_bytes(path), "old");
  EXPECT_TRUE(fs::is_symlink(tmp));  // not ours to remove

  // A dangling symlink: following it would create a file wherever it points.
  const std::string target = dir.file("created_through_link");
  const std::string tmp2 = mgtest::next_tmp_path(path);
  fs::create_symlink(target, tmp2);
  EXPECT_THROW(mg::write_file_atomically(path, "new"), std::runtime_error);
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(mgtest::read_bytes(path), "old");

  // The next save takes the next name and succeeds.
  mg::write_file_atomically(path, "new");
  EXPECT_EQ(mgtest::read_bytes(path), "new");
  EXPECT_EQ(mgtest::read_bytes(victim), "precious");
}

TEST(AtomicFile, AFailureLeavesNoTemporaryBehind) {
  mgtest::TempDir dir;
  // The rename fails: a non-empty directory sits at the destination.
  const std::string path = dir.file("out");
  fs::create_directories(path + "/inside");
  std::string tmp;
  const std::string e = mgtest::error_of([&] {
    mg::AtomicFileWriter w(path);
    tmp = w.tmp_path();
    w.write("data", 4);
    w.commit();
  });
  EXPECT_HAS(e, "renaming");
  EXPECT_HAS(e, "unchanged");
  EXPECT_FALSE(tmp.empty());
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(entries_starting_with(dir.str(), "out.tmp").empty());

  // An exception before commit (the writer is destroyed unfinished).
  const std::string file = dir.file("file");
  mgtest::write_bytes(file, "old");
  try {
    mg::AtomicFileWriter w(file);
    tmp = w.tmp_path();
    w.write("half", 4);
    throw std::runtime_error("simulated failure");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_TRUE(entries_starting_with(dir.str(), "file.tmp").empty());
  EXPECT_EQ(mgtest::read_bytes(file), "old");

  // The directory is missing: the error says which temporary could not be made.
  const std::string missing = dir.file("no/such/dir/f");
  EXPECT_HAS(mgtest::error_of([&] { mg::write_file_atomically(missing, "x"); }), missing + ".tmp");
}

TEST(AtomicFile, ASaveRemovesTheLeftoversOfDeadSavesOnly) {
  mgtest::TempDir dir;
  const std::string path = dir.file("m.ckpt");
  // A save killed mid-way by a process that has since died.
  const std::string dead = path + ".tmp." + std::to_string(mgtest::dead_pid()) + ".0";
  mgtest::write_bytes(dead, "partial");
  // A save in progress in a live process (init is always alive), and files that only look similar.
  const std::string live = path + ".tmp.1.7";
  mgtest::write_bytes(live, "in flight");
  const std::string unrelated = path + ".tmp.notes";
  mgtest::write_bytes(unrelated, "mine");
  // "<file>.tmp" carries no process id: a user's backup as likely as a temporary, so it stays.
  mgtest::write_bytes(path + ".tmp", "a user's backup");
  fs::create_directory(path + ".tmp.99999999.0");  // not a regular file: never removed

  mg::write_file_atomically(path, "saved");
  EXPECT_EQ(mgtest::read_bytes(path), "saved");
  EXPECT_EQ(mgtest::read_bytes(path + ".tmp"), "a user's backup");
  EXPECT_FALSE(fs::exists(dead));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(unrelated));
  EXPECT_TRUE(fs::is_directory(path + ".tmp.99999999.0"));
}

TEST(ReadFile, ReadsWholeFilesAndNamesTheRoleInErrors) {
  mgtest::TempDir dir;
  std::string bytes(3 << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 131 % 251);
  mgtest::write_bytes(dir.file("big"), bytes);
  EXPECT_EQ(mg::read_file(dir.file("big"), "test file"), bytes);
  mgtest::write_bytes(dir.file("empty"), "");
  EXPECT_EQ(mg::read_file(dir.file("empty"), "test file"), "");

  const std::string none = dir.file("none");
  EXPECT_EQ(mgtest::error_of([&] { mg::read_file(none, "corpus file", ". Try --data."); }),
            "corpus file " + none + " does not exist. Try --data.");
  EXPECT_EQ(mgtest::error_of([&] { mg::read_file(dir.str(), "checkpoint"); }),
            "checkpoint " + dir.str() + " is a directory, not a file");
  // A FIFO, a device, a socket: refused, never waited on (tests/io/test_regular_file.cpp).
}

TEST(LittleEndian, IntegersAndFloatsRoundTrip) {
  std::string s;
  mg::put_le32(s, 0x01020304u);
  mg::put_le64(s, 0x0102030405060708ull);
  EXPECT_EQ(s, std::string("\x04\x03\x02\x01\x08\x07\x06\x05\x04\x03\x02\x01", 12));
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  EXPECT_EQ(mg::get_le32(p), 0x01020304u);
  EXPECT_EQ(mg::get_le64(p + 4), 0x0102030405060708ull);

  const std::vector<float> v = {1.0f, -2.5f, 3e-38f};
  std::string bytes;
  mg::write_le_floats(v.data(), v.size(), [&](const void* b, size_t n) {
    bytes.append(static_cast<const char*>(b), n);
  });
  EXPECT_EQ(bytes.substr(0, 4), std::string("\x00\x00\x80\x3f", 4));  // 1.0f
  std::vector<float> back(v.size());
  mg::read_le_floats(reinterpret_cast<const unsigned char*>(bytes.data()), v.size(), back.data());
  EXPECT_EQ(back, v);
}
