// The gdb walkthroughs in docs/debugging.md and docs/gdb.md, run as written: every `(gdb)` line of every
// session goes to gdb in batch mode on the debug build (build/debug/run_tests, build/debug/mosgrad,
// which `make check-gdb` builds), and the lines shown under each command must appear in what gdb and the
// program print for it, in that order. So a renamed function, a moved breakpoint or a changed
// printout fails here instead of in a student's first session.
//
// A session is a fenced block with a `$ gdb OPTIONS --args PROGRAM ARGS` line (OPTIONS as written,
// e.g. `-x tools/gdb/gdbinit` for the pretty-printers); `(gdb) CMD` lines follow, each with the
// lines it prints. In those lines `…` stands for any text (addresses, line numbers, numbers that
// depend on the data), and runs of spaces and tabs count as one space. The program runs as written
// but for two things: --save gets a fresh temporary directory (train refuses one that holds a run),
// and MOSGRAD_DATA names a generated corpus with PTB's vocabulary size, so shapes print as on PTB.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tests/pattern.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

namespace {

namespace fs = std::filesystem;
const std::string kSourceDir = MOSGRAD_SOURCE_DIR;
const std::string kAnything = "\xe2\x80\xa6";  // "…"

struct Command {
  std::string text;
  std::vector<std::string> expected;  // lines it prints, in order (a subsequence of the output)
};

struct Session {
  std::string where;    // "README.md:123", for messages
  std::string options;  // between `gdb` and `--args`: " -q -x tools/gdb/gdbinit"
  std::string program;  // "build/debug/run_tests"
  std::string args;     // the rest of the line, as a shell would read it
  std::vector<Command> commands;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Tabs and runs of spaces as one space, no space at either end: gdb's `list` indents with a tab.
std::string squeeze(const std::string& line) {
  std::string out;
  for (char c : line) {
    const bool blank = c == ' ' || c == '\t' || c == '\r';
    if (blank && (out.empty() || out.back() == ' ')) continue;
    out += blank ? ' ' : c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// `expected` with each … standing for any text, against the whole of `actual`.
bool line_matches(const std::string& expected, const std::string& actual) {
  std::vector<std::string> parts;
  for (size_t from = 0;;) {
    const size_t at = expected.find(kAnything, from);
    parts.push_back(expected.substr(from, at == std::string::npos ? std::string::npos : at - from));
    if (at == std::string::npos) break;
    from = at + kAnything.size();
  }
  if (actual.compare(0, parts.front().size(), parts.front()) != 0) return false;
  if (parts.size() == 1) return actual.size() == parts.front().size();
  size_t pos = parts.front().size();
  for (size_t i = 1; i + 1 < parts.size(); ++i) {
    pos = actual.find(parts[i], pos);
    if (pos == std::string::npos) return false;
    pos += parts[i].size();
  }
  const std::string& last = parts.back();
  return actual.size() >= pos + last.size() &&
         actual.compare(actual.size() - last.size(), last.size(), last) == 0;
}

// The sessions of one Markdown file, and how many `(gdb)` lines it has in all (each must be in
// one).
std::vector<Session> sessions_in(const std::string& file, int* gdb_lines) {
  std::vector<Session> sessions;
  std::istringstream in(read_text(kSourceDir + "/" + file));
  bool in_block = false, in_session = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block, in_session = false;
      continue;
    }
    if (line.rfind("(gdb) ", 0) == 0) ++*gdb_lines;
    if (!in_block) continue;
    const size_t args_at = line.find(" --args ");
    if (line.rfind("$ gdb ", 0) == 0 && args_at != std::string::npos) {
      std::istringstream rest(line.substr(args_at + 8));
      Session s;
      s.where = file + ":" + std::to_string(number);
      s.options = line.substr(5, args_at - 5);
      rest >> s.program;
      std::getline(rest, s.args);
      sessions.push_back(s);
      in_session = true;
    } else if (in_session && line.rfind("(gdb) ", 0) == 0) {
      sessions.back().commands.push_back({line.substr(6), {}});
    } else if (in_session && !sessions.back().commands.empty() && !squeeze(line).empty()) {
      sessions.back().commands.back().expected.push_back(squeeze(line));
    }
  }
  return sessions;
}

// Train, valid and test text whose vocabulary has PTB's 10,000 words (9,998 + <unk> + <eos>).
std::string write_ptb_sized_corpus() {
  const std::string dir = mgtest::temp_dir("gdb_corpus");
  auto word = [](int64_t i) {
    return i % 9999 == 9998 ? std::string("<unk>") : "w" + std::to_string(i % 9999);
  };
  for (const auto& [file, tokens] : {std::pair<std::string, int64_t>{"ptb.train.txt", 12000},
                                     {"ptb.valid.txt", 1200},
                                     {"ptb.test.txt", 1200}}) {
    std::ofstream out(dir + "/" + file);
    for (int64_t i = 0; i < tokens; ++i) out << word(i * 7919) << ((i + 1) % 20 == 0 ? "\n" : " ");
  }
  return dir;
}

// Runs the session's commands in one gdb, each after a marker line; returns each command's output.
std::vector<std::vector<std::string>> run_session(const Session& s, const std::string& data,
                                                  std::string* all) {
  const std::string dir = mgtest::temp_dir("gdb_session");
  std::ofstream script(dir + "/commands.gdb");
  for (size_t i = 0; i < s.commands.size(); ++i)
    script << "echo \\n@@walkthrough " << i << "@@\\n\n" << s.commands[i].text << "\n";
  script.close();
  const std::string args =
      mgtest::Pattern("--save +[^ ]+").replace(s.args, "--save " + dir + "/run");
  const std::string shell = "cd '" + kSourceDir + "' && MOSGRAD_DATA='" + data +
                            "' DEBUGINFOD_URLS= timeout 300 " + "gdb -nx -q -batch" + s.options +
                            " -x '" + dir + "/commands.gdb' --args " + s.program + args + " > '" +
                            dir + "/out.txt' 2>&1 < /dev/null";
  (void)std::system(shell.c_str());  // gdb's status says little; what it printed says what happened
  *all = read_text(dir + "/out.txt");
  std::vector<std::vector<std::string>> outputs(s.commands.size());
  std::istringstream out(*all);
  int current = -1;
  for (std::string line; std::getline(out, line);) {
    if (line.rfind("@@walkthrough ", 0) == 0)
      current = std::stoi(line.substr(14));
    else if (current >= 0)
      outputs[current].push_back(squeeze(line));
  }
  return outputs;
}

}  // namespace

TEST(GdbWalkthrough, EveryCommandPrintsWhatTheDocsShow) {
  if (std::system("gdb --version > /dev/null 2>&1") != 0)
    GTEST_SKIP() << "gdb is not installed, so the gdb walkthroughs in docs/ are not checked "
                    "(apt-get install gdb)";
  for (const char* program : {"build/debug/run_tests", "build/debug/mosgrad"})
    if (!fs::exists(kSourceDir + "/" + program))
      GTEST_SKIP() << program
                   << " is missing, so the gdb walkthrough is not checked: `make debug` builds it "
                   << "(`make check-gdb` does so before running the gdb tests)";
  int gdb_lines = 0, commands = 0;
  std::vector<Session> sessions;
  for (const char* file : {"README.md", "docs/debugging.md", "docs/gdb.md"})
    for (const Session& s : sessions_in(file, &gdb_lines)) sessions.push_back(s);
  bool runs_tests = false, runs_mosgrad = false;
  for (const Session& s : sessions) {
    commands += static_cast<int>(s.commands.size());
    runs_tests = runs_tests || s.program == "build/debug/run_tests";
    runs_mosgrad = runs_mosgrad || s.program == "build/debug/mosgrad";
  }
  ASSERT_TRUE(runs_tests && runs_mosgrad)
      << "the docs must walk through both build/debug/run_tests and build/debug/mosgrad";
  ASSERT_EQ(commands, gdb_lines)
      << "every (gdb) line must be inside a session (a block with `$ gdb ... --args`)";

  const std::string data = write_ptb_sized_corpus();
  for (const Session& s : sessions) {
    SCOPED_TRACE(s.where + ": gdb --args " + s.program + s.args);
    std::string all;
    const std::vector<std::vector<std::string>> outputs = run_session(s, data, &all);
    if (all.find("ptrace: Operation not permitted") != std::string::npos)
      GTEST_SKIP() << "gdb may not trace programs here (ptrace is not permitted), so the "
                      "walkthrough is not checked";
    EXPECT_EQ(all.find("Error in sourced command file"), std::string::npos)
        << "gdb stopped at an error:\n"
        << all;
    for (size_t i = 0; i < s.commands.size(); ++i) {
      const Command& c = s.commands[i];
      size_t next = 0;  // the expected lines in order, others in between allowed
      for (const std::string& want : c.expected) {
        while (next < outputs[i].size() && !line_matches(want, outputs[i][next])) ++next;
        if (next == outputs[i].size()) {
          std::string got;
          for (const std::string& line : outputs[i]) got += "  | " + line + "\n";
          ADD_FAILURE() << "(gdb) " << c.text << "\ndid not print, in order,\n  " << want
                        << "\nit printed:\n"
                        << got;
          break;
        }
        ++next;
      }
    }
  }
}
