#include "tests/pattern.h"

#include <regex>

namespace mgtest {

struct Pattern::Compiled {
  std::regex re;
};

namespace {

std::vector<std::string> groups_of(const std::smatch& m) {
  std::vector<std::string> groups;
  for (const auto& g : m) groups.push_back(g.str());
  return groups;
}

}  // namespace

Pattern::Pattern(const std::string& expression)
    : compiled_(std::make_unique<Compiled>(Compiled{std::regex(expression)})) {}

Pattern::~Pattern() = default;

std::vector<std::string> Pattern::search(const std::string& text) const {
  std::smatch m;
  if (!std::regex_search(text, m, compiled_->re)) return {};
  return groups_of(m);
}

std::vector<std::vector<std::string>> Pattern::search_all(const std::string& text) const {
  std::vector<std::vector<std::string>> all;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), compiled_->re);
       it != std::sregex_iterator(); ++it)
    all.push_back(groups_of(*it));
  return all;
}

bool Pattern::matches(const std::string& text) const {
  return std::regex_match(text, compiled_->re);
}

std::string Pattern::replace(const std::string& text, const std::string& format) const {
  return std::regex_replace(text, compiled_->re, format);
}

}  // namespace mgtest
