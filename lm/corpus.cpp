#include "lm/corpus.h"

#include <cstdlib>
#include <filesystem>
#include <stdexcept>

#include "io/crc32.h"
#include "io/json.h"
#include "io/read_file.h"
#include "io/strf.h"

#ifndef MOSGRAD_SOURCE_DIR
#define MOSGRAD_SOURCE_DIR "."
#endif

namespace fs = std::filesystem;

namespace mg {

// ---------------------------------------------------------------- Vocab

int64_t Vocab::add(const std::string& word) {
  auto it = ids_.find(word);
  if (it != ids_.end()) return it->second;
  const int64_t id = size();
  ids_.emplace(word, id);
  words_.push_back(word);
  return id;
}

int64_t Vocab::find(const std::string& word) const {
  auto it = ids_.find(word);
  return it == ids_.end() ? -1 : it->second;
}

int64_t Vocab::id(const std::string& word) const {
  const int64_t i = find(word);
  if (i < 0) throw std::out_of_range("Vocab::id: the word '" + word + "' is not in the vocabulary");
  return i;
}

const std::string& Vocab::word(int64_t id) const {
  if (id < 0 || id >= size())
    throw std::out_of_range("Vocab::word: id " + std::to_string(id) + " is outside [0, " +
                            std::to_string(size()) + ")");
  return words_[static_cast<size_t>(id)];
}

// ---------------------------------------------------------------- reading

namespace {

const char* kHowToGetData =
    "Point mosgrad at the data with --data DIR or the environment variable MOSGRAD_DATA, "
    "or run `make data` to download Penn Treebank into data/ptb.";

std::string hex_byte(unsigned char c) {
  const char* digits = "0123456789abcdef";
  return std::string("0x") + digits[c >> 4] + digits[c & 15];
}

// Decodes the UTF-8 sequence at text[i] (strictly: no overlong forms, no surrogates, nothing above
// U+10FFFF — what Python's utf-8 codec accepts). Returns its length in bytes and sets *cp; 0 when
// the bytes are not valid UTF-8.
size_t decode_utf8(const std::string& text, size_t i, uint32_t* cp) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char c = byte(i);
  size_t len;
  uint32_t v, min;
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  if ((c & 0xE0) == 0xC0) {
    len = 2;
    v = c & 0x1F;
    min = 0x80;
  } else if ((c & 0xF0) == 0xE0) {
    len = 3;
    v = c & 0x0F;
    min = 0x800;
  } else if ((c & 0xF8) == 0xF0) {
    len = 4;
    v = c & 0x07;
    min = 0x10000;
  } else
    return 0;
  if (i + len > text.size()) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (byte(i + k) & 0x3F);
  }
  if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return 0;
  *cp = v;
  return len;
}

// Python's str.isspace() (the separators of str.split()), minus the line ends handled separately.
bool is_python_space(uint32_t cp) {
  if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F)) return true;
  if (cp < 0x85) return false;
  return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
         cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

}  // namespace

std::vector<int64_t> tokenize_file(const std::string& path, Vocab& vocab, bool grow,
                                   int64_t* unk_count) {
  return tokenize_text(read_file(path, "corpus file", std::string(". ") + kHowToGetData), path,
                       vocab, grow, unk_count);
}

std::vector<int64_t> tokenize_text(const std::string& text, const std::string& path, Vocab& vocab,
                                   bool grow, int64_t* unk_count) {
  if (text.empty()) throw std::runtime_error("corpus file " + path + " is empty (0 bytes)");

  std::vector<int64_t> ids;
  ids.reserve(text.size() / 5);  // ~5 bytes per token in PTB: avoids most regrowth
  int64_t words = 0, unknown = 0;
  // <eos> gets its id when first needed (after the first line's words), as in AWD-LSTM.
  int64_t eos = vocab.find(Vocab::kEos);
  std::string word;

  const auto flush_word = [&]() {
    if (word.empty()) return;
    ++words;
    int64_t id = grow ? vocab.add(word) : vocab.find(word);
    if (id < 0) {
      ++unknown;
      id = vocab.add(Vocab::kUnk);  // usually already there; appended when train had none
    }
    ids.push_back(id);
    word.clear();
  };

  // A UTF-8 byte order mark at the start (some editors write one) marks the encoding; it is no
  // part of the first word.
  size_t i = text.compare(0, 3, "\xEF\xBB\xBF") == 0 ? 3 : 0;
  bool line_open =
      false;  // bytes seen since the last line end: a last line without "\n" still gets <eos>
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == 0)
      throw std::runtime_error("corpus file " + path + " contains a NUL byte at offset " +
                               std::to_string(i) +
                               ": it looks like a binary file, not a text corpus");
    if (c == '\n' || c == '\r') {
      // Python's text mode turns "\r\n" and a lone "\r" into "\n": each is one line end.
      flush_word();
      if (eos < 0) eos = vocab.add(Vocab::kEos);
      ids.push_back(eos);
      line_open = false;
      i += (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ? 2 : 1;
      continue;
    }
    line_open = true;
    uint32_t cp;
    const size_t len = decode_utf8(text, i, &cp);
    if (len == 0)
      throw std::runtime_error("corpus file " + path + " is not UTF-8 text: invalid byte " +
                               hex_byte(c) + " at offset " + std::to_string(i) +
                               " (a binary file, or a text file in another encoding?)");
    if (is_python_space(cp)) {
      flush_word();
    } else if (cp < 0x20 || (cp >= 0x7F && cp <= 0x9F)) {
      // A word with a control character in it would be printed raw by generate (a terminal
      // escape sequence acts on the terminal), and is no word of a text corpus.
      throw std::runtime_error("corpus file " + path + " contains the control character " +
                               strf("U+%04X", cp) + " at offset " + std::to_string(i) +
                               ": mosgrad reads plain text (a terminal escape sequence, or a "
                               "binary file?)");
    } else {
      word.append(text, i, len);
    }
    i += len;
  }
  if (line_open) {
    flush_word();
    if (eos < 0) eos = vocab.add(Vocab::kEos);
    ids.push_back(eos);
  }
  if (words == 0)
    throw std::runtime_error("corpus file " + path + " is empty: it has " +
                             std::to_string(text.size()) + " bytes but no words, only whitespace");
  if (unk_count) *unk_count = unknown;
  return ids;
}

Corpus load_corpus(const std::string& dir, int64_t max_vocab) {
  struct Layout {
    const char* format;
    const char* prefix;
    const char* ext;
  };
  const Layout layouts[] = {{"ptb", "ptb.", ".txt"}, {"wikitext-2", "wiki.", ".tokens"}};
  const auto file = [&](const Layout& l, const char* split) {
    return (fs::path(dir) / (std::string(l.prefix) + split + l.ext)).string();
  };

  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    const char* env = std::getenv("MOSGRAD_DATA");
    const std::string from = env && dir == env ? " (from $MOSGRAD_DATA)" : "";
    if (fs::exists(dir, ec))
      throw std::runtime_error("data directory " + dir + from +
                               " is a file, not a directory: give the folder that holds the "
                               "corpus's train, valid and test files. " +
                               kHowToGetData);
    throw std::runtime_error("data directory " + dir + from + " does not exist. " + kHowToGetData);
  }
  const Layout* layout = nullptr;
  for (const Layout& l : layouts)
    if (fs::exists(file(l, "train"), ec)) {
      layout = &l;
      break;
    }
  if (!layout)
    throw std::runtime_error(
        "no corpus in " + dir +
        ": expected ptb.train.txt, ptb.valid.txt, ptb.test.txt "
        "(Penn Treebank) or wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens "
        "(WikiText-2). " +
        kHowToGetData);
  // Check all three before the slow reading, so a half-copied directory fails at once.
  for (const char* split : {"valid", "test"})
    if (!fs::exists(file(*layout, split), ec))
      throw std::runtime_error("corpus file " + file(*layout, split) + " does not exist (found " +
                               file(*layout, "train") + " beside it). " + kHowToGetData);

  Corpus c;
  c.dir = dir;
  c.format = layout->format;
  c.train = tokenize_file(file(*layout, "train"), c.vocab, /*grow=*/true);
  if (max_vocab > 0 && c.vocab.size() > max_vocab)
    throw std::runtime_error("corpus file " + file(*layout, "train") + " has a vocabulary of " +
                             std::to_string(c.vocab.size()) + " words, more than the limit of " +
                             std::to_string(max_vocab) +
                             " (is this a word-level corpus? raise the "
                             "limit if it really is)");
  c.valid = tokenize_file(file(*layout, "valid"), c.vocab, /*grow=*/false, &c.unk_valid);
  c.test = tokenize_file(file(*layout, "test"), c.vocab, /*grow=*/false, &c.unk_test);
  return c;
}

std::string resolve_data_dir(const std::string& explicit_dir) {
  std::string dir = explicit_dir;
  if (dir.empty()) {
    const char* env = std::getenv("MOSGRAD_DATA");
    if (env && *env) dir = env;
  }
  std::error_code ec;
  if (dir.empty()) {
    // data/ptb in the checkout (what `make data` fills), else a data folder shared by the
    // checkouts beside it (../shared/data/ptb), so `make run` needs no flag on a machine that keeps
    // one copy of PTB for several checkouts.
    const fs::path own = fs::path(MOSGRAD_SOURCE_DIR) / "data" / "ptb";
    const fs::path shared = fs::path(MOSGRAD_SOURCE_DIR).parent_path() / "shared" / "data" / "ptb";
    if (!fs::exists(own, ec) && fs::exists(shared / "ptb.train.txt", ec)) return shared.string();
    return own.string();
  }
  const fs::path p(dir);
  if (p.is_absolute() || fs::exists(p, ec)) return dir;
  // Not found from here: try the checkout, so the same relative setting works from any directory.
  const fs::path in_checkout = fs::path(MOSGRAD_SOURCE_DIR) / p;
  if (fs::exists(in_checkout, ec)) return in_checkout.lexically_normal().string();
  return dir;  // let load_corpus report it as missing, under the name the user gave
}

void check_same_vocab(const Vocab& corpus, const Vocab& trained, const std::string& what) {
  if (corpus.size() != trained.size())
    throw std::runtime_error(what + " was trained on a vocabulary of " +
                             std::to_string(trained.size()) + " words, the corpus has " +
                             std::to_string(corpus.size()) + " (another data set?)");
  for (int64_t i = 0; i < corpus.size(); ++i)
    if (corpus.word(i) != trained.word(i))
      throw std::runtime_error(
          what + " was trained on another vocabulary: word " + std::to_string(i) + " is " +
          shown_word(trained.word(i)) + " there and " + shown_word(corpus.word(i)) +
          " in the corpus (the same words in another order would score nonsense)");
}

bool corpus_can_hold(const std::string& word) {
  Vocab scratch;
  try {  // the line "word": the word itself, then the line's <eos>
    const std::vector<int64_t> ids = tokenize_text(word, "a stored word", scratch, true);
    return ids.size() == 2 && scratch.word(ids[0]) == word;
  } catch (const std::runtime_error&) {  // empty, a NUL byte or a control character
    return false;
  }
}

std::string shown_word(const std::string& word) {
  for (const char c : word)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) return json_string(word);
  // Bytes that are not UTF-8 would reach the terminal raw: each is shown as \xNN instead.
  std::string shown = "'";
  uint32_t cp;
  for (size_t i = 0; i < word.size();) {
    const size_t len = decode_utf8(word, i, &cp);
    if (len == 0)
      shown += strf("\\x%02x", static_cast<unsigned char>(word[i])), ++i;
    else
      shown.append(word, i, len), i += len;
  }
  return shown + "'";
}

std::string corpus_fingerprint(const Corpus& corpus) {
  uint32_t crc = 0;
  for (const std::string& w : corpus.vocab.words()) crc = crc32(w.data(), w.size() + 1, crc);
  for (const std::vector<int64_t>* ids : {&corpus.train, &corpus.valid, &corpus.test})
    crc = crc32(ids->data(), ids->size() * sizeof(int64_t), crc);
  return strf("%s, V=%lld, %zu/%zu/%zu tokens, crc32 %08x", corpus.format.c_str(),
              static_cast<long long>(corpus.vocab.size()), corpus.train.size(), corpus.valid.size(),
              corpus.test.size(), crc);
}

}  // namespace mg
