// Replays the fuzz targets' committed inputs (tests/fuzz/targets.h): the seed corpus and every
// crash reproducer that `make fuzz` ever found. Each must load or be refused with a clear error,
// in this ordinary build too, so a fixed crash stays fixed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "lm/model_io.h"
#include "tests/fuzz/targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> inputs_of(const std::string& target, const char* kind) {
  const fs::path dir = fs::path(MOSGRAD_SOURCE_DIR) / "tests" / "fuzz" / kind / target;
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

void replay(const mgfuzz::Target& target, const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  EXPECT_NO_THROW(target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())) << file;
}

}  // namespace

TEST(FuzzReplay, SeedCorpusLoadsOrIsRefusedClearly) {
  for (const mgfuzz::Target& t : mgfuzz::targets()) {
    const auto seeds = inputs_of(t.name, "corpus");
    EXPECT_GE(seeds.size(), 4u) << "tests/fuzz/corpus/" << t.name << " (make fuzz-seeds writes it)";
    for (const fs::path& f : seeds) replay(t, f);
  }
}

TEST(FuzzReplay, EveryCrashFoundStaysFixed) {
  size_t n = 0;
  for (const mgfuzz::Target& t : mgfuzz::targets())
    for (const fs::path& f : inputs_of(t.name, "crashes")) replay(t, f), ++n;
  std::printf("replayed %zu crash reproducers\n", n);
}

// The model seeds are complete files, so the fuzzer starts from inputs that get all the way through
// the loaders: if a format change made them stale, this says so.
TEST(FuzzReplay, TheModelSeedsLoadWithoutError) {
  for (const fs::path& f : inputs_of("checkpoint", "corpus"))
    EXPECT_NO_THROW(mg::load_model(f.string())) << f;
  for (const fs::path& f : inputs_of("safetensors", "corpus"))
    EXPECT_NO_THROW(mg::import_safetensors(f.string())) << f;
}

// The targets must be able to fail: only the clear errors are swallowed.
TEST(FuzzReplay, OnlyClearErrorsAreSwallowed) {
  EXPECT_NO_THROW(
      mgfuzz::expect_clear_error([] { throw std::runtime_error("checkpoint x is truncated"); }));
  EXPECT_NO_THROW(
      mgfuzz::expect_clear_error([] { throw std::invalid_argument("--lr expects a number"); }));
  EXPECT_THROW(mgfuzz::expect_clear_error([] { throw std::bad_alloc(); }), std::bad_alloc);
  EXPECT_THROW(mgfuzz::expect_clear_error([] { (void)std::stoll("99999999999999999999"); }),
               std::out_of_range);
}
