// Command-line flags as tables: one row per flag with its name, what its value looks like, its help
// line and a setter that parses and checks the value. The same table parses the command line,
// rejects unknown flags and bad values (naming the flag, the value and what is allowed) before any
// work starts, and prints `--help`; docs/cli.md is generated from the tables (cli_markdown).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace mg {

struct Flag {
  std::string name;     // "batch_size": written --batch_size or --batch-size
  std::string value;    // what the value looks like: "N", "P", "DIR", "true|false"; "" for a switch
  std::string help;     // one line
  std::string section;  // heading the flag is listed under in --help
  // Parses `text` and stores it; throws std::invalid_argument "--name expects ..., got 'text'".
  std::function<void(const std::string& text)> set;
  // The value as text (integers in full, numbers to 9 digits, booleans 1/0): what a checkpoint
  // records of the config (TrainConfig::to_map). Empty: not recorded.
  std::function<std::string()> get;
};
using FlagTable = std::vector<Flag>;

// Numbers as the checkpoint records them: 9 significant digits (a float round-trips).
std::string flag_number_text(double v);

// Rows for the usual kinds, each checking its range and reading its value back (get): integers in
// [low, high], numbers in [low, high] (or [low, high) when high_open), booleans (true/false, 1/0,
// yes/no), one of a list of words, and free text (non-empty unless allow_empty).
Flag int_flag(const std::string& name, const std::string& section, const std::string& help,
              int64_t& target, int64_t low, int64_t high);
Flag float_flag(const std::string& name, const std::string& section, const std::string& help,
                float& target, double low, double high, bool high_open = false);
Flag double_flag(const std::string& name, const std::string& section, const std::string& help,
                 double& target, double low, double high, bool high_open = false);
Flag bool_flag(const std::string& name, const std::string& section, const std::string& help,
               bool& target);
Flag choice_flag(const std::string& name, const std::string& section, const std::string& help,
                 std::string& target, const std::vector<std::string>& choices);
Flag text_flag(const std::string& name, const std::string& value, const std::string& section,
               const std::string& help, std::string& target, bool allow_empty = false);

// Strict number parsing shared by the rows (the whole text must be the number): "10xyz" and "" are
// errors naming --flag, never 10 or a bare "stoll".
int64_t parse_int_flag(const std::string& flag, const std::string& text);
double parse_number_flag(const std::string& flag, const std::string& text);

// Finds `name` ('-' and '_' alike) in the table and sets it; an unknown name throws
// "unknown flag --name for <command> (did you mean --closest?); see mosgrad <command> --help", the
// question only when a known name is near.
void apply_flag(const FlagTable& table, const std::string& command, const std::string& name,
                const std::string& text);
// The same error for a name the table lacks, and nothing when it has it: for the names of a
// command line before their values are read (an unknown last flag is unknown, not "needs a value").
void require_known_flag(const FlagTable& table, const std::string& command,
                        const std::string& name);

// A flag's default as --help and docs/cli.md print it: what its get() reads back from the command's
// defaults (true/false for switches, numbers to 6 digits); empty when the row has no get or no value.
std::string flag_default_text(const Flag& f);

// The --help text of a table: sections in first-appearance order, one aligned line per flag, each
// ending with its default (flag_default_text), so that no help line types a default of its own.
std::string flags_help(const FlagTable& table);

// A command line after the subcommand: --name value, --name=value, and bare switches (names in
// `switches`). Positional words and a flag missing its value are errors that say what to write.
struct ParsedArgs {
  std::vector<std::pair<std::string, std::string>>
      flags;  // in command-line order, names normalised ('-' -> '_')
  bool help = false;
  bool has(const std::string& name) const;
  std::string get(const std::string& name,
                  const std::string& fallback = "") const;  // the last one given
};
ParsedArgs parse_command_line(const std::string& command, int argc, char** argv, int first,
                              const std::vector<std::string>& switches);

}  // namespace mg
