// mosgrad reads and writes only regular files (io/regular_file.h): a FIFO, a device or a socket
// where it expects one is refused at once, naming the file and what it is, never waited on or read
// as endless or no bytes. Each call that could wait on a FIFO runs under
// mgtest::error_without_waiting, so a regression fails the test instead of hanging the suite.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "io/checkpoint.h"
#include "io/read_file.h"
#include "io/regular_file.h"
#include "io/safetensors.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

std::string make_fifo(const mgtest::TempDir& dir, const std::string& name) {
  const std::string path = dir.file(name);
  EXPECT_EQ(::mkfifo(path.c_str(), 0600), 0) << std::strerror(errno);
  return path;
}

}  // namespace

// Opened to be read, a FIFO blocked until a writer came: `generate --model FIFO` hung, and the
// first Ctrl-C did not end it.
TEST(RegularFile, EveryReaderRefusesAFifoNamingItWithoutWaiting) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(dir, "model.ckpt");
  EXPECT_EQ(mgtest::error_without_waiting(fifo, [&] { mg::read_file(fifo, "checkpoint"); }),
            "checkpoint " + fifo +
                " is a FIFO (named pipe), not a regular file: mosgrad reads only regular files");
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { mg::load_checkpoint(fifo); }),
             "checkpoint " + fifo + " is a FIFO (named pipe)");
  EXPECT_HAS(mgtest::error_without_waiting(fifo, [&] { mg::load_safetensors(fifo); }),
             "safetensors file " + fifo + " is a FIFO (named pipe)");
  // Through a symlink, the file it names is judged, and named by the path given.
  fs::create_symlink(fifo, dir.file("link.ckpt"));
  EXPECT_HAS(mgtest::error_without_waiting(
                 fifo, [&] { mg::read_file(dir.file("link.ckpt"), "checkpoint"); }),
             "checkpoint " + dir.file("link.ckpt") + " is a FIFO (named pipe)");
  EXPECT_TRUE(fs::is_fifo(fifo));  // the user's FIFO is left where it was
}

// /dev/zero as a checkpoint read as 0 bytes ("is empty (0 bytes)"): it is a device, and said so.
TEST(RegularFile, ACharacterDeviceIsRefusedAsOneNotReadAsEmpty) {
  // /dev/null first: read, it ends at once, where /dev/zero would fill the memory.
  ASSERT_HAS(mgtest::error_of([] { mg::load_checkpoint("/dev/null"); }),
             "checkpoint /dev/null is a character device, not a regular file");
  const std::string e = mgtest::error_of([] { mg::load_checkpoint("/dev/zero"); });
  EXPECT_EQ(e,
            "checkpoint /dev/zero is a character device, not a regular file: mosgrad reads only "
            "regular files");
  EXPECT_EQ(e.find("empty"), std::string::npos) << e;
}

TEST(RegularFile, ASocketIsRefusedAsOne) {
  const mgtest::TempDir dir;
  const std::string path = dir.file("s");
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) GTEST_SKIP() << "temp path too long for a socket";
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const int s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  ASSERT_EQ(::bind(s, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_HAS(mgtest::error_of([&] { mg::read_file(path, "corpus file"); }),
             "corpus file " + path + " is a socket, not a regular file");
  ::close(s);
}

// Opened to be written with no reader, a FIFO blocked (O_WRONLY) or, without a wait, failed with
// ENXIO, "No such device or address": either way the message names the FIFO. With a reader there
// the open succeeds, and the file is refused as what it is.
TEST(RegularFile, AWriterRefusesAFifoWithOrWithoutAReader) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(dir, "metrics.jsonl");
  const int flags = O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW;
  const std::string refused = "metrics file " + fifo +
                              " is a FIFO (named pipe), not a regular file: mosgrad writes only "
                              "regular files, and never removes or replaces this one: move it away";
  EXPECT_EQ(mgtest::error_without_waiting(
                fifo, [&] { mg::open_regular_to_write(fifo, flags, 0644, "metrics file"); }),
            refused);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(reader, 0);
  EXPECT_EQ(mgtest::error_without_waiting(
                fifo, [&] { mg::open_regular_to_write(fifo, flags, 0644, "metrics file"); }),
            refused);
  ::close(reader);
  EXPECT_TRUE(fs::is_fifo(fifo));
  // A regular file is opened as asked, blocking as any descriptor.
  const int fd = mg::open_regular_to_write(dir.file("ok"), flags, 0644, "metrics file");
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::fcntl(fd, F_GETFL) & O_NONBLOCK, 0);
  ::close(fd);
}

// A file of /proc says it holds 0 bytes and has more: it is read to its end.
TEST(RegularFile, AFileIsReadToItsEndNotToTheSizeItStates) {
  const std::string status = mg::read_file("/proc/self/status", "status file");
  EXPECT_HAS(status, "Name:");
}

// The checks made before any work judge the name without opening it: nothing there, a regular
// file and a symlink (the caller's to judge) pass; a FIFO, a device, a folder do not.
TEST(RegularFile, TheChecksBeforeWorkJudgeWithoutOpening) {
  const mgtest::TempDir dir;
  const std::string fifo = make_fifo(dir, "fifo");
  dir.write("file", "x");
  fs::create_symlink(fifo, dir.file("link"));
  for (const char* fine : {"none", "file", "link"})
    EXPECT_EQ(mgtest::error_of<std::invalid_argument>(
                  [&] { mg::refuse_special_file(dir.file(fine), "run file", true); }),
              "")
        << fine;
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>(
                 [&] { mg::refuse_special_file(fifo, "run file", true); }),
             "run file " + fifo + " is a FIFO (named pipe), not a regular file");
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>(
                 [&] { mg::refuse_special_file("/dev/null", "run file", true); }),
             "is a character device");
  EXPECT_HAS(mgtest::error_of<std::invalid_argument>(
                 [&] { mg::refuse_special_file(dir.str(), "run file", true); }),
             "is a directory");
}
