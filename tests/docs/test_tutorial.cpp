// docs/tutorial.md cannot rot quietly: every `mosgrad` command on it parses with today's flags,
// and every file it names exists. (tools/tutorial_check.sh runs the commands themselves; that takes
// minutes, so it is a script, not part of make test.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tests/pattern.h"

using namespace mg;

namespace {

const std::string kSourceDir = MOSGRAD_SOURCE_DIR;

std::string tutorial() {
  std::ifstream in(kSourceDir + "/docs/tutorial.md");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Parses `words` (argv[1] is the command) as `mosgrad` does (parse_command), without running it.
void parse(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (auto& w : words) argv.push_back(w.data());
  parse_command(static_cast<int>(argv.size()), argv.data());
}

}  // namespace

TEST(Tutorial, EveryMosgradCommandParses) {
  const std::string text = tutorial();
  ASSERT_FALSE(text.empty()) << "docs/tutorial.md is missing";
  std::istringstream lines(text);
  std::string line;
  int commands = 0;
  while (std::getline(lines, line)) {
    const std::string prefix = "$ ";
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream words(line.substr(prefix.size()));
    std::vector<std::string> w;
    for (std::string x; words >> x && x != "|";) w.push_back(x);  // the mosgrad part of a pipe
    if (!w.empty() && w[0] == "!") w.erase(w.begin());            // "expected to fail" still parses
    if (w.size() < 2 || w[0] != "build/release/mosgrad") continue;
    w[0] = "mosgrad";
    ++commands;
    EXPECT_NO_THROW(parse(w)) << line;
  }
  EXPECT_GE(commands, 8) << "the tutorial's mosgrad commands were not found";
}

TEST(Tutorial, EveryFileItNamesExists) {
  const std::string text = tutorial();
  const mgtest::Pattern path(
      R"(`((?:math|cuda|mpi|tensor|autograd|nn|io|lm|analysis|reproduce|cli|tools|tests|docs)/[A-Za-z0-9_./-]+))");
  int files = 0;
  for (const auto& m : path.search_all(text)) {
    const std::string& p = m[1];
    ++files;
    EXPECT_TRUE(std::filesystem::exists(kSourceDir + "/" + p)) << "docs/tutorial.md names " << p;
  }
  EXPECT_GE(files, 10);
}
