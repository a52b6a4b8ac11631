// The course kit (docs/course/) cannot rot quietly: the task table and the solution regions in the
// sources name each other one to one, the points sum to 100, every task's test filter selects
// tests that exist, and every `mosgrad` command and file the lab pages name parses or exists.
// (`make grade` and `make student` run the tasks themselves, `tools/course.sh figures` the lab
// pages' commands and their figures; CI runs all three.)
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "tests/pattern.h"
#include "tests/test_util.h"

using namespace mg;
namespace fs = std::filesystem;

namespace {

const std::string kSourceDir = MOSGRAD_SOURCE_DIR;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Task {
  int points = 0;
  std::string filter, what;
};

// docs/course/tasks.txt: "id points filter what...".
std::map<std::string, Task> tasks() {
  std::map<std::string, Task> all;
  std::istringstream lines(read(kSourceDir + "/docs/course/tasks.txt"));
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream f(line);
    std::string id;
    Task t;
    f >> id >> t.points >> t.filter;
    std::getline(f, t.what);
    all[id] = t;
  }
  return all;
}

// A path as one word for the shell.
std::string quoted(const fs::path& p) {
  std::string q = "'";
  for (char c : p.string()) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// gtest's filter syntax: patterns separated by ':', each with '*' and '?' wildcards.
bool glob(const char* p, const char* s) {
  if (*p == '\0') return *s == '\0';
  if (*p == '*') return glob(p + 1, s) || (*s && glob(p, s + 1));
  return *s && (*p == '?' || *p == *s) && glob(p + 1, s + 1);
}

}  // namespace

TEST(Course, EveryTaskHasOneRegionAndEveryRegionATask) {
  const std::map<std::string, Task> table = tasks();
  ASSERT_GE(table.size(), 8u) << "docs/course/tasks.txt is missing or empty";
  int points = 0;
  for (const auto& [id, t] : table) points += t.points;
  EXPECT_EQ(points, 100);
  const mgtest::Pattern start(R"(^\s*// TASK (\d+\.\d+): \S)"),
      end(R"(^\s*// END TASK (\d+\.\d+)\s*$)");
  std::map<std::string, int> begun, ended;
  std::map<std::string, std::string> where;
  for (const char* dir : {"tensor", "autograd", "nn", "io", "lm", "analysis", "cli"})
    for (const auto& e : fs::recursive_directory_iterator(kSourceDir + "/" + dir)) {
      if (e.path().extension() != ".cpp" && e.path().extension() != ".h") continue;
      std::istringstream lines(read(e.path().string()));
      std::string open;
      int n = 0;
      for (std::string line; std::getline(lines, line);) {
        ++n;
        if (const auto m = start.search(line); !m.empty()) {
          EXPECT_TRUE(open.empty()) << e.path() << ":" << n << ": TASK inside TASK " << open;
          open = m[1];
          ++begun[open];
          where[open] = fs::relative(e.path(), kSourceDir).string();
        } else if (const auto m = end.search(line); !m.empty()) {
          EXPECT_EQ(m[1], open) << e.path() << ":" << n;
          ++ended[m[1]];
          open.clear();
        }
      }
      EXPECT_TRUE(open.empty()) << e.path() << ": TASK " << open << " has no END TASK";
    }
  for (const auto& [id, t] : table) {
    EXPECT_EQ(begun[id], 1) << "task " << id << " needs exactly one // TASK " << id << " region";
    EXPECT_EQ(ended[id], 1) << "task " << id << " needs exactly one // END TASK " << id;
    EXPECT_NE(t.what.find("(" + where[id] + ")"), std::string::npos)
        << "task " << id << " is in " << where[id] << ", its line says" << t.what;
  }
  for (const auto& [id, n] : begun)
    EXPECT_TRUE(table.count(id)) << "region " << id << " has no task";
}

TEST(Course, EveryTasksFilterSelectsTestsThatExist) {
  std::vector<std::string> names;
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  for (int i = 0; i < unit.total_test_suite_count(); ++i) {
    const ::testing::TestSuite& suite = *unit.GetTestSuite(i);
    for (int j = 0; j < suite.total_test_count(); ++j)
      names.push_back(std::string(suite.name()) + "." + suite.GetTestInfo(j)->name());
  }
  for (const auto& [id, t] : tasks()) {
    std::istringstream patterns(t.filter);
    for (std::string p; std::getline(patterns, p, ':');) {
      int matches = 0;
      for (const std::string& n : names) matches += glob(p.c_str(), n.c_str());
      EXPECT_GT(matches, 0) << "task " << id << ": no test matches " << p;
    }
  }
}

TEST(Course, EveryLabsCommandParsesAndEveryFileItNamesExists) {
  const mgtest::Pattern path(
      R"(`((?:autograd|nn|lm|tensor|tools|tests|docs|io|cuda|analysis|cli)/[A-Za-z0-9_./-]*[A-Za-z0-9_]))");
  int commands = 0, files = 0, labs = 0;
  for (const auto& e : fs::directory_iterator(kSourceDir + "/docs/course")) {
    if (e.path().extension() != ".md") continue;
    labs += e.path().filename().string().rfind("lab", 0) == 0;
    const std::string text = read(e.path().string());
    std::istringstream lines(text);
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("$ build/release/mosgrad ", 0) != 0) continue;
      std::istringstream words(line.substr(2));
      std::vector<std::string> w;
      for (std::string x; words >> x && x != "|" && x != "#";) w.push_back(x);
      w[0] = "mosgrad";
      ++commands;
      EXPECT_NO_THROW(parse_command(w)) << e.path().filename() << ": " << line;
    }
    for (const auto& m : path.search_all(text)) {
      const std::string& p = m[1];
      ++files;
      EXPECT_TRUE(fs::exists(kSourceDir + "/" + p)) << e.path().filename() << " names " << p;
    }
  }
  EXPECT_EQ(labs, 8);
  EXPECT_GE(commands, 6);
  EXPECT_GE(files, 20);
}

// `make student OUT=DIR` inside the checkout wrote a copy whose sources this tree's own checks then
// read (tools/check_layers.sh scans lm/, tools/, tests/ ... at any depth), failing its `make test`.
// An OUT inside the checkout is refused before anything is made, at any depth and however it is
// reached; build/ alone, the outputs no check reads, may hold one (`course.sh check` regenerates
// build/course-check). Run on a checkout in miniature: the script, the task table, a header in
// each folder the script scans.
TEST(Course, StudentWritesOnlyOutsideTheCheckoutAndNeverOverAStudentsWork) {
  const fs::path t =
      fs::path(testing::TempDir()) / ("mosgrad_course_out_" + std::to_string(::getpid()));
  fs::remove_all(t);
  const fs::path root = t / "checkout";
  fs::create_directories(root / "tools");
  fs::create_directories(root / "docs/course");
  fs::create_directories(root / "build");
  fs::copy_file(kSourceDir + "/tools/course.sh", root / "tools/course.sh");
  fs::copy_file(kSourceDir + "/docs/course/tasks.txt", root / "docs/course/tasks.txt");
  for (const char* dir : {"math", "cuda", "mpi", "tensor", "autograd", "nn", "io", "lm", "analysis",
                          "reproduce", "cli"}) {
    fs::create_directories(root / dir);
    std::ofstream(root / dir / "x.h") << "#pragma once\n";
  }
  fs::create_symlink(root / "tools", t / "to_tools");  // a link on the way in
  fs::create_symlink(root / "new", t / "dangling");    // a link to a folder not made yet
  fs::create_symlink(root, t / "to_checkout");
  // Exit status and output of `course.sh student OUT` (the miniature is no git checkout).
  const auto student = [&](const fs::path& out) {
    const std::string shell = "cd " + quoted(t) + " && GIT_CEILING_DIRECTORIES=" + quoted(t) +
                              " bash " + quoted(root / "tools/course.sh") + " student " +
                              quoted(out) + " > " + quoted(t / "log") + " 2>&1";
    const int status = std::system(shell.c_str());
    return std::make_pair(WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(t / "log"));
  };
  for (const fs::path& out :
       {root / "course", root / "lm/a/b/course", t / "to_tools/course", t / "dangling",
        root / "build/../lm/course", root / "build", root, t / "to_checkout"}) {
    const auto [code, log] = student(out);
    EXPECT_EQ(code, 2) << out << ": " << log;
    EXPECT_HAS(log, "choose a directory outside it");
  }
  for (const char* made : {"course", "lm/a", "lm/course", "tools/course", "new"})
    EXPECT_FALSE(fs::exists(root / made)) << made << " was made inside the checkout";
  for (const fs::path& out : {root / "build/course-check", t / "outside"}) {
    const auto [code, log] = student(out);
    EXPECT_EQ(code, 0) << out << ": " << log;
    EXPECT_TRUE(fs::exists(out / ".mosgrad-student")) << out << ": " << log;
  }
  // Made again over a student tree: refused while a file differs from what it wrote there (the
  // student's work), written again once it is moved away; a file of the student's own stays.
  std::ofstream(t / "outside/lm/x.h", std::ios::app) << "// the student's answer\n";
  std::ofstream(t / "outside/notes.txt") << "mine\n";
  const auto [code, log] = student(t / "outside");
  EXPECT_EQ(code, 2) << log;
  EXPECT_HAS(log, "has files changed since make student wrote them: lm/x.h;");
  EXPECT_EQ(read(t / "outside/lm/x.h"), "#pragma once\n// the student's answer\n");
  // The kit's own copies under build/ (make clean removes them) are regenerated whatever they hold:
  // a fairness check killed with a bug planted leaves no tree that refuses the next check.
  std::ofstream(root / "build/course-check/lm/x.h", std::ios::app) << "// a planted bug\n";
  EXPECT_EQ(student(root / "build/course-check").first, 0);
  EXPECT_EQ(read(root / "build/course-check/lm/x.h"), "#pragma once\n");
  fs::rename(t / "outside/lm/x.h", t / "x.h.mine");
  EXPECT_EQ(student(t / "outside").first, 0);
  EXPECT_EQ(read(t / "outside/lm/x.h"), "#pragma once\n");
  EXPECT_EQ(read(t / "outside/notes.txt"), "mine\n");
  fs::remove_all(t);
}
