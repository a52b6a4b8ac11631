// A regular expression for the tests that read docs, logs and error messages: ECMAScript syntax,
// as std::regex, which it wraps. <regex> is compiled in tests/pattern.cpp alone: each test file
// that included it spent a third to half of its compile time instantiating it.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace mgtest {

class Pattern {
 public:
  explicit Pattern(const std::string& expression);
  ~Pattern();
  Pattern(const Pattern&) = delete;
  Pattern& operator=(const Pattern&) = delete;

  // The first match in text: the whole match, then each group ("" for one that took no part);
  // empty when nothing matches.
  std::vector<std::string> search(const std::string& text) const;
  // Every match in text, left to right, each as search() gives it.
  std::vector<std::vector<std::string>> search_all(const std::string& text) const;
  // True when the whole of text matches.
  bool matches(const std::string& text) const;
  // text with every match replaced by format ($& the match, $1 the first group, ...).
  std::string replace(const std::string& text, const std::string& format) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace mgtest
