// Every `mosgrad` command is one row of commands(): its name, one line on what it does, its usage
// line, its flags (cli/flag_tables.h) and the function that runs it (cli/run_commands.h). The
// program's usage text, each command's --help, the parser and docs/cli.md (`mosgrad help
// --markdown`, which a test compares with the committed page) all read these rows, so a command or
// a flag is added in one place.
#pragma once

#include <string>
#include <vector>

#include "cli/command_line.h"
#include "io/flags.h"

namespace mg {

struct Command {
  const char* name;     // "train"
  const char* summary;  // one line, for `mosgrad help`
  const char* usage;    // "mosgrad train [--preset NAME] [flags]"
  // The command's defaults before any flag applies; `preset` is --preset as given ("" if not).
  // nullptr: the defaults of a fresh CommandLine.
  void (*defaults)(CommandLine& c, const std::string& preset);
  FlagTable (*flags)(CommandLine& c);  // bound to the part of c the command reads; nullptr: none
  void (*finish)(CommandLine& c);      // checks needing every flag, before any work; may be nullptr
  const char* positional;      // the one word it takes besides flags ("RUN_DIR"), or nullptr
  int (*run)(CommandLine& c);  // the exit status
};

const std::vector<Command>& commands();
const Command& find_command(const std::string& name);  // throws, listing the commands, if unknown

// argv[1] is the command, argv[2..argc) its flags. Returns the command line with the command's
// defaults and then every flag applied and checked, in order, before any work starts; with
// .help = true (and nothing applied) when --help or -h was given. Bad flags and values throw
// std::invalid_argument naming the flag, the value and what is allowed.
CommandLine parse_command(int argc, char** argv);
// The same for a command line given as words ("mosgrad", "train", "--preset", "tiny", ...).
CommandLine parse_command(std::vector<std::string> words);
// The table of `name`'s flags bound to c (tests and tools apply single flags with it).
FlagTable command_flags(const std::string& name, CommandLine& c);

std::string usage();  // `mosgrad help`: every command, one line each
// `mosgrad <command> --help`: the usage, the summary and the flags with the defaults of `c` (the
// command's defaults, after --preset when one was given).
std::string command_help(CommandLine c);
// docs/cli.md: every command's flags, sections and defaults as Markdown, read from the rows.
std::string cli_markdown();

// The program: `mosgrad <command> [flags]`, `mosgrad help [--markdown]`. Returns the exit status;
// errors are exceptions (cli/mosgrad.cpp prints them), running out of memory one that says so.
int run_mosgrad(int argc, char** argv);

}  // namespace mg
