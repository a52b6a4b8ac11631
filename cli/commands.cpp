#include "cli/commands.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>

#include "cli/flag_tables.h"
#include "cli/run_commands.h"
#include "tensor/parallel.h"

namespace mg {

const std::vector<Command>& commands() {
  static const std::vector<Command> rows = {
      {"train", "train a model (start from --preset NAME; any flag below overrides it)",
       "mosgrad train [--preset NAME] [flags]", train_defaults, train_flags, train_finish, nullptr,
       run_train},
      {"finetune",
       "the MoS paper's second stage: ASGD from <save>/best.ckpt until validation stops improving",
       "mosgrad finetune [--preset NAME] [flags]", train_defaults, train_flags, train_finish,
       nullptr, run_finetune},
      {"eval", "perplexity of a saved model on the valid or test split", "mosgrad eval [flags]",
       nullptr, eval_flags, model_finish, nullptr, run_eval},
      {"dyneval", "dynamic evaluation (Krause et al. 2018) of a saved model",
       "mosgrad dyneval [flags]", nullptr, dyneval_flags, model_finish, nullptr, run_dyneval},
      {"pointer",
       "the neural cache pointer (Grave et al. 2017) on a saved model, with --grid on valid",
       "mosgrad pointer [flags]", nullptr, pointer_flags, model_finish, nullptr, run_pointer},
      {"generate", "sample words from a saved model", "mosgrad generate [flags]", nullptr,
       generate_flags, model_finish, nullptr, run_generate},
      {"export",
       "write a saved model as .safetensors (PyTorch parameter names, flags in __metadata__)",
       "mosgrad export [flags]", export_defaults, export_flags, model_finish, nullptr, run_export},
      {"import", "turn a .safetensors file back into a mosgrad model checkpoint",
       "mosgrad import --in FILE [flags]", import_defaults, import_flags, nullptr, nullptr,
       run_import},
      {"plot",
       "draw RUN_DIR/metrics.jsonl as RUN_DIR/curves.svg (and a finetune's as finetune_curves.svg)",
       "mosgrad plot RUN_DIR [--title TEXT]", nullptr, plot_flags, nullptr, "RUN_DIR", run_plot},
      {"rank",
       "the softmax bottleneck on a saved model: numerical rank of its log-probability matrix",
       "mosgrad rank [flags]", rank_defaults, rank_flags, model_finish, nullptr, run_rank},
      {"graph",
       "the autograd graph of one forward pass of a model built from the train flags, as DOT",
       "mosgrad graph [--preset NAME] [model flags] [--out FILE]", graph_defaults, graph_flags,
       nullptr, nullptr, run_graph},
      {"gradcheck",
       "autograd's gradients of a small model against central differences, per parameter",
       "mosgrad gradcheck [--preset NAME] [model flags] [--vocab V] [--entries N] [--tolerance X] "
       "[--params all|NAME,...]",
       gradcheck_defaults, gradcheck_flags, gradcheck_finish, nullptr, run_gradcheck},
      {"bottleneck-demo",
       "Softmax, MoC, Sigsoftmax and MoS fitted to a high-rank distribution (synthetic, < 1 min)",
       "mosgrad bottleneck-demo [flags]", demo_defaults, demo_flags, nullptr, nullptr,
       run_bottleneck_demo_command},
      {"presets", "list the presets and their settings", "mosgrad presets", nullptr, nullptr,
       nullptr, nullptr, run_presets},
      {"reproduce",
       "a comparison plan of every head (train, finetune, dyneval, pointer, rank), resumable",
       "mosgrad reproduce --plan NAME [flags]", nullptr, reproduce_flags, reproduce_finish, nullptr,
       run_reproduce_command},
  };
  return rows;
}

const Command& find_command(const std::string& name) {
  std::string names;
  for (const Command& row : commands()) {
    if (name == row.name) return row;
    names += (names.empty() ? "" : ", ") + std::string(row.name);
  }
  throw std::invalid_argument("unknown command '" + name + "' (the commands: " + names + ")");
}

FlagTable command_flags(const std::string& name, CommandLine& c) {
  const Command& row = find_command(name);
  return row.flags ? row.flags(c) : FlagTable{};
}

namespace {

// The switches of a table: flags whose value is true/false may stand alone (--resume, --tf32).
std::vector<std::string> switches_of(const FlagTable& table) {
  std::vector<std::string> names;
  for (const Flag& f : table)
    if (f.value.empty() || f.value == "true|false") names.push_back(f.name);
  return names;
}

bool takes_value(const std::string& word, const std::vector<std::string>& switches) {
  if (word.rfind("--", 0) != 0 || word.find('=') != std::string::npos || word == "--help")
    return false;
  std::string name = word.substr(2);
  std::replace(name.begin(), name.end(), '-', '_');
  return std::find(switches.begin(), switches.end(), name) == switches.end();
}

}  // namespace

CommandLine parse_command(int argc, char** argv) {
  if (argc < 2) throw std::invalid_argument("no command given (mosgrad help lists them)");
  CommandLine c;
  c.command = argv[1];
  c.words.assign(argv, argv + argc);
  const Command& row = find_command(c.command);
  CommandLine probe;  // the table's shape alone: its names, and which flags are switches
  const FlagTable names = row.flags ? row.flags(probe) : FlagTable{};
  const std::vector<std::string> switches = switches_of(names);
  // The positional word (plot's RUN_DIR) is taken out; every other word is a flag or its value.
  std::vector<char*> words(argv, argv + 2);
  std::string positional;
  for (int i = 2; i < argc; ++i) {
    const std::string w = argv[i];
    const bool is_flag = w.rfind("-", 0) == 0;
    if (row.positional && !is_flag) {
      if (!positional.empty())
        throw std::invalid_argument(c.command + " takes one " + row.positional + ", got '" +
                                    positional + "' and '" + w + "'");
      positional = w;
      continue;
    }
    // An unknown name is named as such first, before its value is looked for.
    if (w.rfind("--", 0) == 0 && w.size() > 2 && w[2] != '-' && w != "--help")
      require_known_flag(names, c.command, w.substr(2, w.find('=') - 2));
    words.push_back(argv[i]);
    if (row.positional && takes_value(w, switches) && i + 1 < argc) words.push_back(argv[++i]);
  }
  const ParsedArgs a =
      parse_command_line(c.command, static_cast<int>(words.size()), words.data(), 2, switches);
  c.help = a.help;
  if (row.defaults) row.defaults(c, a.get("preset", ""));
  if (c.help) return c;
  if (row.positional && positional.empty())
    throw std::invalid_argument(c.command + " needs " + row.positional + ": " + row.usage);
  c.run_dir = positional;
  const FlagTable table = row.flags ? row.flags(c) : FlagTable{};
  for (const auto& [name, value] : a.flags)
    apply_flag(table, c.command, name, value), c.given.push_back(name);
  if (row.finish) row.finish(c);
  return c;
}

CommandLine parse_command(std::vector<std::string> words) {
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  return parse_command(static_cast<int>(argv.size()), argv.data());
}

std::string usage() {
  std::string text =
      "mosgrad — train and evaluate AWD-LSTM / Mixture-of-Softmaxes language models\n\n"
      "usage: mosgrad <command> [--flag value ...]\n\ncommands:\n";
  for (const Command& c : commands()) {
    const std::string name = c.name;
    text +=
        "  " + name + std::string(name.size() < 10 ? 11 - name.size() : 2, ' ') + c.summary + "\n";
  }
  return text +
         "\n'mosgrad <command> --help' lists that command's flags; 'mosgrad help --markdown' all "
         "of them\n(docs/cli.md).\n";
}

std::string command_help(CommandLine c) {
  const Command& row = find_command(c.command);
  std::string text = std::string(row.usage) + "\n\n" + row.summary + "\n";
  if (row.defaults == train_defaults) {
    std::string presets;
    for (const std::string& name : preset_names()) presets += (presets.empty() ? "" : ", ") + name;
    text += "presets: " + presets + " (default small-mos); flags after the preset override it\n";
  }
  if (row.flags) text += "\n" + flags_help(row.flags(c));
  return text;
}

namespace {

std::string escape_bars(std::string s) {
  for (size_t at = 0; (at = s.find('|', at)) != std::string::npos; at += 2) s.replace(at, 1, "\\|");
  return s;
}

// One command's flags as Markdown tables, one per section; the default is flag_default_text's.
std::string markdown_table(const Command& row) {
  std::string md =
      "## " + std::string(row.name) + "\n\n`" + row.usage + "`: " + row.summary + ".\n";
  CommandLine c;
  if (row.defaults) row.defaults(c, "");
  const FlagTable table = row.flags ? row.flags(c) : FlagTable{};
  std::vector<std::string> sections;
  for (const Flag& f : table)
    if (std::find(sections.begin(), sections.end(), f.section) == sections.end())
      sections.push_back(f.section);
  for (const std::string& section : sections) {
    md += "\n*" + section + "*\n\n| flag | value | default | what it does |\n|---|---|---|---|\n";
    for (const Flag& f : table) {
      if (f.section != section) continue;
      const std::string def = flag_default_text(f);
      md += "| `--" + f.name + "` | " + (f.value.empty() ? "" : "`" + escape_bars(f.value) + "`") +
            " | " + (def.empty() ? "" : "`" + def + "`") + " | " + escape_bars(f.help) + " |\n";
    }
  }
  return md + "\n";
}

}  // namespace

std::string cli_markdown() {
  std::string md =
      "# The `mosgrad` command line\n\n"
      "Generated from the command table the parser uses (`mosgrad help --markdown > docs/cli.md`; "
      "`tests/cli/test_flags.cpp` checks that this file is that output), so every default and "
      "range "
      "here is the program's own. `mosgrad <command> --help` prints the same per command. A flag "
      "is written `--name value`, `--name=value`, and with `-` or `_` alike; a true/false flag "
      "alone means true; a flag given twice takes its last value; a flag that would do nothing "
      "beside another is refused (`--model` with `--save` or `--preset`, `--save` with `--preset`, "
      "`pointer --grid` with `--theta` or `--lambdasm`, `reproduce --report` with `--runs`, "
      "`--data` or `--device`, `--tf32` on the CPU, `--max_seq_len_delta` without variable "
      "BPTT; a model flag its head or size never reads, such as `--n_experts` of a softmax "
      "head, is taken and is no part of the run: a resume or finetune does not compare it). "
      "Defaults are those of each "
      "command's default preset (small-mos for "
      "train and finetune, tiny for graph and gradcheck), which `--preset` changes before the "
      "other flags apply; `--help` prints the same defaults.\n\n";
  const Command* previous = nullptr;
  for (const Command& row : commands()) {
    if (previous && row.flags && row.flags == previous->flags &&
        row.defaults == previous->defaults)  // finetune: train's flags again
      md += "## " + std::string(row.name) + "\n\n`" + row.usage + "`: " + row.summary +
            ". The same flags as " + previous->name + ".\n\n";
    else
      md += markdown_table(row);
    previous = &row;
  }
  return md;
}

namespace {

// A standard stream the caller closed (`mosgrad presets >&-`) would give its number to the next
// file mosgrad opens, and the lines meant for the terminal would be written into a checkpoint or
// metrics.jsonl: each closed one is held by /dev/null instead (open takes the lowest free number,
// so in this order it is the one closed). Returns whether standard output was closed.
bool hold_closed_standard_streams() {
  bool stdout_closed = false;
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) {
      ::open("/dev/null", O_RDWR);
      stdout_closed = stdout_closed || fd == 1;
    }
  return stdout_closed;
}

int run_command_line(int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  if (command == "help" && argc > 2 && std::string(argv[2]) == "--markdown") {
    std::fputs(cli_markdown().c_str(), stdout);  // docs/cli.md
    return 0;
  }
  if (command.empty() || command == "--help" || command == "-h" || command == "help") {
    std::fputs(usage().c_str(), stdout);
    return command.empty() ? 2 : 0;
  }
  bool known = false;
  for (const Command& row : commands()) known = known || command == row.name;
  if (!known) {
    std::fprintf(stderr, "mosgrad: unknown command '%s'\n\n%s", command.c_str(), usage().c_str());
    return 2;
  }
  CommandLine c = parse_command(argc, argv);
  if (c.help) {
    std::fputs(command_help(c).c_str(), stdout);
    return 0;
  }
  if (c.threads() > 0) set_num_threads(static_cast<int>(c.threads()));
  try {
    return find_command(command).run(c);
  } catch (const std::bad_alloc&) {
    // What std::bad_alloc says ("std::bad_alloc") tells a student nothing. (A tensor's allocation
    // says which tensor, tensor/allocator.cpp; this is any other: a file read whole, a matrix.)
    throw std::runtime_error(
        "out of memory: mosgrad " + command +
        " needed more memory than this machine, or the limit it runs under (ulimit -v, a "
        "container's), allows. Free memory, raise the limit, or ask for less (a smaller model, "
        "--batch_size, rank's --contexts)");
  }
}

}  // namespace

int run_mosgrad(int argc, char** argv) {
  if (hold_closed_standard_streams())
    throw std::runtime_error(
        "standard output is closed: mosgrad prints what it computes there; send it to a file, "
        "or to /dev/null to discard it (> /dev/null, not >&-)");
  const int code = run_command_line(argc, argv);
  // What a command printed into a full disk is lost: an error, not exit 0 (the results of eval,
  // the samples of generate, docs/cli.md from help --markdown). Except a pipe whose reader left
  // while SIGPIPE was ignored: train and finetune ignore it so that `mosgrad train | head` goes
  // on training (their results are files); any other command is ended by the signal there.
  const int flush_error = std::fflush(stdout) != 0 ? errno : 0;
  struct stat out;
  struct sigaction pipe_signal {};
  const bool reader_left_by_choice = fstat(1, &out) == 0 && S_ISFIFO(out.st_mode) &&
                                     sigaction(SIGPIPE, nullptr, &pipe_signal) == 0 &&
                                     pipe_signal.sa_handler == SIG_IGN;
  if ((flush_error != 0 || std::ferror(stdout)) && !reader_left_by_choice)
    throw std::runtime_error(std::string("could not write to standard output (") +
                             (flush_error != 0 ? std::strerror(flush_error) : "a write failed") +
                             "): what mosgrad printed there is incomplete");
  return code;
}

}  // namespace mg
