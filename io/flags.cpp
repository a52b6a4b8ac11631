#include "io/flags.h"

#include <limits.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace mg {

namespace {

std::string normalise(std::string name) {
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

std::string number_str(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// Edit distance, for "did you mean" on a mistyped flag.
size_t distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

}  // namespace

int64_t parse_int_flag(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const long long v = text.empty() ? 0 : std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0])))
    throw std::invalid_argument("--" + flag + " expects a whole number, got '" + text + "'");
  if (errno == ERANGE)
    throw std::invalid_argument("--" + flag + " is out of range: '" + text + "'");
  return v;
}

double parse_number_flag(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  // strtod also reads hexadecimal (0x1p-3); the whole-number flags do not, and neither do these.
  if (text.empty() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0])) ||
      text.find_first_of("xX") != std::string::npos)
    throw std::invalid_argument("--" + flag + " expects a number, got '" + text + "'");
  if (errno == ERANGE && std::fabs(v) < 1)
    throw std::invalid_argument("--" + flag + " is too close to 0 to hold, got '" + text +
                                "' (write 0, or a number above 1e-300)");
  if (errno == ERANGE || !std::isfinite(v))
    throw std::invalid_argument("--" + flag + " must be a finite number, got '" + text + "'");
  return v;
}

Flag int_flag(const std::string& name, const std::string& section, const std::string& help,
              int64_t& target, int64_t low, int64_t high) {
  return {name,
          "N",
          help,
          section,
          [name, &target, low, high](const std::string& text) {
            const int64_t v = parse_int_flag(name, text);
            if (v < low || v > high)
              throw std::invalid_argument("--" + name + " must be in [" + std::to_string(low) +
                                          ", " + std::to_string(high) + "], got " + text);
            target = v;
          },
          [&target] { return std::to_string(target); }};
}

std::string flag_number_text(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

namespace {
template <typename T>
Flag real_flag(const std::string& name, const std::string& section, const std::string& help,
               T& target, double low, double high, bool high_open) {
  return {name,
          "X",
          help,
          section,
          [name, &target, low, high, high_open](const std::string& text) {
            const double v = parse_number_flag(name, text);
            // Checked as stored too: 0.99999999999 is below 1 but is 1 as a float.
            if (v < low || (high_open ? v >= high : v > high) ||
                (high_open && static_cast<T>(v) >= high))
              throw std::invalid_argument("--" + name + " must be in [" + number_str(low) + ", " +
                                          number_str(high) + (high_open ? ")" : "]") + ", got " +
                                          text);
            target = static_cast<T>(v);
          },
          [&target] { return flag_number_text(target); }};
}
}  // namespace

Flag float_flag(const std::string& name, const std::string& section, const std::string& help,
                float& target, double low, double high, bool high_open) {
  return real_flag(name, section, help, target, low, high, high_open);
}

Flag double_flag(const std::string& name, const std::string& section, const std::string& help,
                 double& target, double low, double high, bool high_open) {
  return real_flag(name, section, help, target, low, high, high_open);
}

Flag bool_flag(const std::string& name, const std::string& section, const std::string& help,
               bool& target) {
  return {
      name,
      "true|false",
      help,
      section,
      [name, &target](const std::string& text) {
        if (text == "1" || text == "true" || text == "yes")
          target = true;
        else if (text == "0" || text == "false" || text == "no")
          target = false;
        else
          throw std::invalid_argument("--" + name + " expects true or false, got '" + text + "'");
      },
      [&target] { return std::string(target ? "1" : "0"); }};
}

Flag choice_flag(const std::string& name, const std::string& section, const std::string& help,
                 std::string& target, const std::vector<std::string>& choices) {
  std::string joined;
  for (const std::string& c : choices) joined += (joined.empty() ? "" : "|") + c;
  return {name,
          joined,
          help,
          section,
          [name, &target, choices, joined](const std::string& text) {
            if (std::find(choices.begin(), choices.end(), text) == choices.end())
              throw std::invalid_argument("--" + name + " expects one of " + joined + ", got '" +
                                          text + "'");
            target = text;
          },
          [&target] { return target; }};
}

namespace {

// A path the system would refuse with ENAMETOOLONG ("filesystem error: status: File name too
// long"), checked as the flag is read: a name in it longer than NAME_MAX (255 bytes on Linux's
// file systems), or the whole longer than PATH_MAX.
void require_usable_path(const std::string& flag, const std::string& path) {
  if (path.size() >= PATH_MAX)
    throw std::invalid_argument("--" + flag + " is a path of " + std::to_string(path.size()) +
                                " bytes; a path may have at most " + std::to_string(PATH_MAX - 1));
  for (size_t begin = 0; begin <= path.size();) {
    size_t end = path.find('/', begin);
    if (end == std::string::npos) end = path.size();
    if (end - begin > NAME_MAX)
      throw std::invalid_argument("--" + flag + ": the name '" + path.substr(begin, 20) +
                                  "...' in the path is " + std::to_string(end - begin) +
                                  " bytes long; a file or folder name may have at most " +
                                  std::to_string(NAME_MAX) + " bytes");
    begin = end + 1;
  }
}

}  // namespace

Flag text_flag(const std::string& name, const std::string& value, const std::string& section,
               const std::string& help, std::string& target, bool allow_empty) {
  return {name,
          value,
          help,
          section,
          [name, value, &target, allow_empty](const std::string& text) {
            if (text.empty() && !allow_empty)
              throw std::invalid_argument("--" + name + " needs a value");
            if (value == "FILE" || value == "DIR") require_usable_path(name, text);
            target = text;
          },
          [&target] { return target; }};
}

void apply_flag(const FlagTable& table, const std::string& command, const std::string& raw_name,
                const std::string& text) {
  const std::string name = normalise(raw_name);
  for (const Flag& f : table)
    if (normalise(f.name) == name) return f.set(text);
  require_known_flag(table, command, raw_name);
}

void require_known_flag(const FlagTable& table, const std::string& command,
                        const std::string& raw_name) {
  const std::string name = normalise(raw_name);
  if (name == "help")  // --help=yes: the help switch with a value
    throw std::invalid_argument("--help takes no value: write --help alone");
  for (const Flag& f : table)
    if (normalise(f.name) == name) return;
  std::string closest;
  size_t best = 4;  // suggest only near misses
  for (const Flag& f : table) {
    const size_t d = distance(name, normalise(f.name));
    if (d < best) best = d, closest = f.name;
  }
  throw std::invalid_argument("unknown flag --" + raw_name + " for " + command +
                              (closest.empty() ? "" : " (did you mean --" + closest + "?)") +
                              "; see mosgrad " + command + " --help");
}

std::string flag_default_text(const Flag& f) {
  std::string def = f.get ? f.get() : "";
  if (f.value == "true|false" || f.value.empty())
    return def == "1" ? "true" : def == "0" ? "false" : def;
  if (def.find_first_of(".e") != std::string::npos) {  // 0.400000006 -> 0.4
    char* end = nullptr;
    const double v = std::strtod(def.c_str(), &end);
    if (end && *end == '\0') {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v);
      return buf;
    }
  }
  return def;
}

std::string flags_help(const FlagTable& table) {
  std::vector<std::string> sections;
  for (const Flag& f : table)
    if (std::find(sections.begin(), sections.end(), f.section) == sections.end())
      sections.push_back(f.section);
  size_t width = 0;
  for (const Flag& f : table) width = std::max(width, f.name.size() + f.value.size() + 3);
  std::ostringstream os;
  for (const std::string& s : sections) {
    os << s << ":\n";
    for (const Flag& f : table) {
      if (f.section != s) continue;
      std::string left = "--" + f.name + (f.value.empty() ? "" : " " + f.value);
      left.resize(std::max(width, left.size()) + 2, ' ');
      const std::string def = flag_default_text(f);
      os << "  " << left << f.help << (def.empty() ? "" : " (default " + def + ")") << '\n';
    }
  }
  return os.str();
}

bool ParsedArgs::has(const std::string& name) const {
  for (const auto& [n, v] : flags)
    if (n == name) return true;
  return false;
}

std::string ParsedArgs::get(const std::string& name, const std::string& fallback) const {
  std::string value = fallback;
  for (const auto& [n, v] : flags)
    if (n == name) value = v;
  return value;
}

ParsedArgs parse_command_line(const std::string& command, int argc, char** argv, int first,
                              const std::vector<std::string>& switches) {
  ParsedArgs a;
  std::string bare_switch;  // a switch just read without a value: "--tied maybe" is its mistake
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-h" || s == "--help") {
      a.help = true;
      continue;
    }
    if ((s.rfind("--", 0) != 0 || s.size() == 2) && !bare_switch.empty())
      throw std::invalid_argument("--" + bare_switch + " expects true or false, got '" + s +
                                  "' (--" + bare_switch + " alone means true)");
    if (s.rfind("---", 0) == 0)
      throw std::invalid_argument("unexpected argument '" + s + "' for " + command +
                                  ": one dash too many; flags are written --name value");
    if (s.size() > 1 && s[0] == '-' && s[1] != '-' &&
        std::isalpha(static_cast<unsigned char>(s[1])))
      throw std::invalid_argument("unexpected argument '" + s + "' for " + command +
                                  ": one dash too few; flags are written --name value (-" + s +
                                  ")");
    if (s.rfind("--", 0) != 0 || s.size() == 2)
      throw std::invalid_argument("unexpected argument '" + s + "' for " + command +
                                  ": flags are written --name value (for example --preset " + s +
                                  ")");
    bare_switch.clear();
    s = s.substr(2);
    std::string value;
    const size_t eq = s.find('=');
    const bool inline_value = eq != std::string::npos;
    if (inline_value) value = s.substr(eq + 1), s = s.substr(0, eq);
    s = normalise(s);
    if (!inline_value) {
      const bool is_switch = std::find(switches.begin(), switches.end(), s) != switches.end();
      const std::string next = i + 1 < argc ? argv[i + 1] : "";
      static const std::vector<std::string> bools = {"true", "false", "1", "0", "yes", "no"};
      if (is_switch) {  // --resume, or --resume false
        value = "true";
        if (std::find(bools.begin(), bools.end(), next) != bools.end())
          value = argv[++i];
        else
          bare_switch = s;
      } else if (i + 1 < argc && next.rfind("--", 0) != 0) {
        value = argv[++i];
      } else {
        throw std::invalid_argument("--" + s + " needs a value (write --" + s + " VALUE)");
      }
    }
    a.flags.emplace_back(s, value);
  }
  return a;
}

}  // namespace mg
