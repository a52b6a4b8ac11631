// Word-level corpora (Penn Treebank, WikiText-2) as lists of token ids.
//
// The reading rules copy AWD-LSTM's data.py (Merity et al. 2017), so token counts, vocabulary
// order and therefore every id match the PyTorch reference exactly:
//   - a file is read line by line (line ends: "\n", "\r\n" or "\r", like Python's text mode);
//   - each line is split on whitespace (Python's str.split(): ASCII and Unicode spaces), and the
//     word "<eos>" is appended after every line — also after empty lines;
//   - the vocabulary is built from the train split only, in order of first appearance;
//   - a valid/test word missing from it becomes "<unk>" and is counted (PTB and WikiText-2 have
//     none: both ship with <unk> already substituted in all three splits).
// Where a file is not plain UTF-8 text mosgrad parts from data.py: a NUL, another control
// character (a terminal escape) or a byte that is not UTF-8 is an error naming the offset, and a
// UTF-8 byte order mark at a file's start is skipped (Python's "utf-8" would make it part of the
// first word). PTB and WikiText-2 have none of these.
//
// Dimension legend: V vocabulary size; a split is [n] token ids, each in [0, V).
// Token ids are plain std::vector<int64_t>, not tensors: batching (lm/batching.h) reorders them
// before anything becomes a tensor.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace mg {

// Word <-> id. Ids are dense: 0 .. size()-1, in order of insertion.
class Vocab {
 public:
  static constexpr const char* kEos = "<eos>";  // appended at each line end
  static constexpr const char* kUnk = "<unk>";  // stands for a word outside the vocabulary

  // The id of `word`, inserting it at the end when new.
  int64_t add(const std::string& word);
  // The id of `word`, or -1 when it is not in the vocabulary.
  int64_t find(const std::string& word) const;
  // The id of `word`; throws std::out_of_range naming the word when it is missing.
  int64_t id(const std::string& word) const;
  // The word with id `id`; throws std::out_of_range when id is not in [0, size()).
  const std::string& word(int64_t id) const;
  bool contains(const std::string& word) const { return find(word) >= 0; }
  int64_t size() const { return static_cast<int64_t>(words_.size()); }  // V

  // Shortcuts for the two special words; -1 when absent.
  int64_t eos() const { return find(kEos); }
  int64_t unk() const { return find(kUnk); }

  // All words, index = id (for writing a vocabulary file or printing samples).
  const std::vector<std::string>& words() const { return words_; }

 private:
  std::vector<std::string> words_;
  std::unordered_map<std::string, int64_t> ids_;
};

// A corpus with its three splits as token ids (<eos> included) and the vocabulary of train.
struct Corpus {
  std::string dir;                          // the directory it was read from
  std::string format;                       // "ptb" or "wikitext-2"
  Vocab vocab;                              // V words
  std::vector<int64_t> train, valid, test;  // token ids in [0, V)
  // Tokens of valid / test that were not in train's vocabulary and were read as <unk>. The caller
  // should warn when these are not zero: it usually means a wrong or differently tokenized file.
  // (When train itself has no "<unk>" word but valid/test need one, "<unk>" is appended to the
  // vocabulary, so V grows by one.)
  int64_t unk_valid = 0, unk_test = 0;
};

// Reads `dir`. The format is recognised by the file names present:
//   ptb.train.txt, ptb.valid.txt, ptb.test.txt                  -> "ptb"
//   wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens      -> "wikitext-2"
// max_vocab > 0 rejects a train vocabulary with more words (a guard against pointing at the wrong
// file: the output layer is V x hidden, so a huge V is a memory problem); 0 means no limit.
// Throws std::runtime_error naming the file for: a missing directory or file (with how to get the
// data), an empty file (no words), a binary / non-UTF-8 file, a vocabulary over max_vocab.
Corpus load_corpus(const std::string& dir, int64_t max_vocab = 0);

// What identifies a corpus in a record: "ptb, V=10000, 929589/73760/82430 tokens, crc32 1a2b3c4d"
// (the format, the vocabulary's size, the three splits' lengths, a CRC-32 of the words and of every
// token id), so that results of another corpus, or of another version of it, are never mixed in.
std::string corpus_fingerprint(const Corpus& corpus);

// Reads one text file into ids with the rules above. With grow = true new words are added to
// `vocab`; otherwise they become <unk> (added to vocab if it lacks one) and are counted in
// *unk_count (when not null). Throws like load_corpus.
std::vector<int64_t> tokenize_file(const std::string& path, Vocab& vocab, bool grow,
                                   int64_t* unk_count = nullptr);
// The same on text already in memory (`path` names it in errors); the fuzz target's entry.
std::vector<int64_t> tokenize_text(const std::string& text, const std::string& path, Vocab& vocab,
                                   bool grow, int64_t* unk_count = nullptr);

// Where the data lives, in this order of preference:
//   1. `explicit_dir` when not empty (the --data DIR flag),
//   2. the environment variable MOSGRAD_DATA,
//   3. data/ptb inside the source checkout (what `make data` fills), or, when that does not exist,
//      ../shared/data/ptb beside the checkout when it holds PTB.
// A relative path is taken relative to the current directory when it exists there, else relative
// to the checkout (so MOSGRAD_DATA=../shared/data/ptb works from the checkout and from build/).
// Returns the chosen path without checking the files in it; load_corpus does that.
std::string resolve_data_dir(const std::string& explicit_dir = "");

// Throws unless `corpus` and `trained` are the same vocabulary, word for word and in order: the
// same size is not enough (the same words in another order score nonsense). `what` names the file.
void check_same_vocab(const Vocab& corpus, const Vocab& trained, const std::string& what);

// Whether a corpus read by the rules above can hold `word` as one token: not empty, no whitespace
// (Python's, Unicode's too) and no NUL byte in it. A stored vocabulary with any other word could
// never match a corpus.
bool corpus_can_hold(const std::string& word);

// A word as error messages show it: 'word' (a byte that is not UTF-8 as \xNN), or a JSON string
// ("a\rb") when it holds a control character that would print invisibly or cut the message short.
std::string shown_word(const std::string& word);

}  // namespace mg
