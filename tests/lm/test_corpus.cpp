// Corpus reading (lm/corpus.h) and batching (lm/batching.h). Small hand-made corpora always; the
// real PTB / WikiText-2 figures when the data is present ($MOSGRAD_DATA or data/ptb), else skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>

#include "lm/batching.h"
#include "lm/corpus.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

namespace fs = std::filesystem;

namespace {

using mgtest::TempDir;

void write_ptb(const TempDir& d, const std::string& train, const std::string& valid,
               const std::string& test) {
  d.write("ptb.train.txt", train);
  d.write("ptb.valid.txt", valid);
  d.write("ptb.test.txt", test);
}

using mgtest::error_of;

std::vector<std::string> words_of(const mg::Vocab& v, const std::vector<int64_t>& ids) {
  std::vector<std::string> out;
  for (int64_t id : ids) out.push_back(v.word(id));
  return out;
}

// Sets or unsets an environment variable for the scope of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_.c_str(), old_.c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

}  // namespace

// ---------------------------------------------------------------- Vocab / Corpus

TEST(Corpus, VocabLookup) {
  mg::Vocab v;
  EXPECT_EQ(v.add("the"), 0);
  EXPECT_EQ(v.add("cat"), 1);
  EXPECT_EQ(v.add("the"), 0);
  EXPECT_EQ(v.size(), 2);
  EXPECT_EQ(v.find("dog"), -1);
  EXPECT_EQ(v.eos(), -1);
  EXPECT_EQ(v.word(1), "cat");
  EXPECT_EQ(v.id("cat"), 1);
  EXPECT_THROW(v.id("dog"), std::out_of_range);
  EXPECT_THROW(v.word(2), std::out_of_range);
  EXPECT_THROW(v.word(-1), std::out_of_range);
}

TEST(Corpus, ReadsLikeAwdLstm) {
  TempDir d;
  // Tabs and runs of spaces separate words; an empty line still gets <eos>; so does a last line
  // without "\n". "\r\n" and a lone "\r" are one line end each, as in Python's text mode.
  write_ptb(d, "the cat  sat\n\n the\tdog\r\nsat on\rthe mat", "the cow sat\n", "a dog\n");
  const mg::Corpus c = mg::load_corpus(d.str());
  EXPECT_EQ(c.format, "ptb");
  // Order of first appearance in train, <eos> after the first line's words; then <unk>, appended
  // because valid has a word ("cow") outside train and train had no <unk> of its own.
  const std::vector<std::string> words = {"the", "cat", "sat", "<eos>",
                                          "dog", "on",  "mat", "<unk>"};
  ASSERT_EQ(c.vocab.words(), words);
  EXPECT_EQ(words_of(c.vocab, c.train),
            (std::vector<std::string>{"the", "cat", "sat", "<eos>", "<eos>", "the", "dog", "<eos>",
                                      "sat", "on", "<eos>", "the", "mat", "<eos>"}));
  EXPECT_EQ(c.vocab.unk(), 7);
  EXPECT_EQ(words_of(c.vocab, c.valid), (std::vector<std::string>{"the", "<unk>", "sat", "<eos>"}));
  EXPECT_EQ(words_of(c.vocab, c.test), (std::vector<std::string>{"<unk>", "dog", "<eos>"}));
  EXPECT_EQ(c.unk_valid, 1);
  EXPECT_EQ(c.unk_test, 1);
}

TEST(Corpus, ExistingUnkWordIsReused) {
  TempDir d;
  write_ptb(d, "a <unk> b\n", "a zzz\n", "b\n");
  const mg::Corpus c = mg::load_corpus(d.str());
  EXPECT_EQ(c.vocab.size(), 4);  // a <unk> b <eos>: nothing appended
  EXPECT_EQ(c.valid, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(c.unk_valid, 1);
  EXPECT_EQ(c.unk_test, 0);
}

TEST(Corpus, UnicodeWhitespaceSplitsLikePython) {
  TempDir d;
  // U+00A0 (no-break space) and U+3000 separate words in Python's str.split(); U+2028 is a space
  // there too but not a line end when iterating over a file. Other UTF-8 is part of words.
  write_ptb(d,
            "caf\xC3\xA9\xC2\xA0"
            "b\xE3\x80\x80"
            "c\xE2\x80\xA8"
            "d\n",
            "b\n", "c\n");
  const mg::Corpus c = mg::load_corpus(d.str());
  EXPECT_EQ(c.vocab.words(), (std::vector<std::string>{"caf\xC3\xA9", "b", "c", "d", "<eos>"}));
}

TEST(Corpus, WikiTextLayout) {
  TempDir d;
  d.write("wiki.train.tokens", " = Valkyria = \n\n a b \n");
  d.write("wiki.valid.tokens", " a <unk> \n");
  d.write("wiki.test.tokens", " b \n");
  const mg::Corpus c = mg::load_corpus(d.str());
  EXPECT_EQ(c.format, "wikitext-2");
  EXPECT_EQ(c.train.size(), 8u);  // = Valkyria = <eos> <eos> a b <eos>
  EXPECT_EQ(c.vocab.words(),
            (std::vector<std::string>{"=", "Valkyria", "<eos>", "a", "b", "<unk>"}));
  EXPECT_EQ(c.unk_valid, 1);  // "<unk>" itself was not in train
}

TEST(Corpus, MissingDataSaysHowToGetIt) {
  TempDir d;
  const std::string no_dir = error_of([&] { mg::load_corpus(d.file("nope")); });
  EXPECT_NE(no_dir.find(d.file("nope")), std::string::npos) << no_dir;
  for (const char* hint : {"--data", "MOSGRAD_DATA", "make data"})
    EXPECT_NE(no_dir.find(hint), std::string::npos) << no_dir;

  const std::string empty_dir = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(empty_dir.find("ptb.train.txt"), std::string::npos) << empty_dir;
  EXPECT_NE(empty_dir.find("wiki.train.tokens"), std::string::npos) << empty_dir;

  d.write("ptb.train.txt", "a\n");
  d.write("ptb.test.txt", "a\n");
  const std::string no_valid = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(no_valid.find(d.file("ptb.valid.txt")), std::string::npos) << no_valid;
  EXPECT_NE(no_valid.find("MOSGRAD_DATA"), std::string::npos) << no_valid;

  // A split's file given where its folder belongs exists: it is not "missing".
  const std::string a_file = error_of([&] { mg::load_corpus(d.file("ptb.train.txt")); });
  EXPECT_HAS(a_file, "data directory " + d.file("ptb.train.txt") + " is a file, not a directory");
}

TEST(Corpus, EmptyAndBinaryFilesNameTheFile) {
  TempDir d;
  write_ptb(d, "a b\n", "", "a\n");
  std::string e = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(e.find(d.file("ptb.valid.txt")), std::string::npos) << e;
  EXPECT_NE(e.find("empty"), std::string::npos) << e;

  write_ptb(d, "a b\n", " \n\n\t\n", "a\n");
  e = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(e.find("no words"), std::string::npos) << e;

  write_ptb(d, std::string("a b\nc\0d\n", 8), "a\n", "a\n");
  e = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(e.find(d.file("ptb.train.txt")), std::string::npos) << e;
  EXPECT_NE(e.find("NUL byte at offset 5"), std::string::npos) << e;

  // A terminal escape in a word (generate would print it raw), or a C1 control: not text.
  for (const char* bad : {"a \x1b[31mb\n",
                          "a \xC2\x9B"
                          "b\n"}) {
    write_ptb(d, bad, "a\n", "a\n");
    e = error_of([&] { mg::load_corpus(d.str()); });
    EXPECT_HAS(e, "corpus file " + d.file("ptb.train.txt") + " contains the control character U+");
    EXPECT_HAS(e, " at offset 2: mosgrad reads plain text");
  }
  EXPECT_FALSE(mg::corpus_can_hold("\x1b[31mb"));
  // A byte order mark at a file's start is no part of its first word.
  write_ptb(d,
            "\xEF\xBB\xBF"
            "a b\n",
            "\xEF\xBB\xBF"
            "a\n",
            "a\n");
  const mg::Corpus bom = mg::load_corpus(d.str());
  EXPECT_EQ(bom.vocab.size(), 3);  // a, b, <eos>
  EXPECT_EQ(bom.vocab.word(bom.train[0]), "a");

  write_ptb(d, "a b\n", "a\n", "caf\xE9\n");  // Latin-1, not UTF-8
  e = error_of([&] { mg::load_corpus(d.str()); });
  EXPECT_NE(e.find(d.file("ptb.test.txt")), std::string::npos) << e;
  EXPECT_NE(e.find("not UTF-8"), std::string::npos) << e;
  EXPECT_NE(e.find("0xe9 at offset 3"), std::string::npos) << e;

  write_ptb(d, "a b\n", "a\n", "\xED\xA0\x80\n");  // an encoded surrogate: invalid in UTF-8
  EXPECT_NE(error_of([&] { mg::load_corpus(d.str()); }).find("not UTF-8"), std::string::npos);
}

TEST(Corpus, VocabularyLimit) {
  TempDir d;
  write_ptb(d, "a b c d\n", "a\n", "a\n");
  EXPECT_EQ(mg::load_corpus(d.str(), 5).vocab.size(), 5);  // a b c d <eos>
  const std::string e = error_of([&] { mg::load_corpus(d.str(), 4); });
  EXPECT_NE(e.find(d.file("ptb.train.txt")), std::string::npos) << e;
  EXPECT_NE(e.find("vocabulary of 5 words"), std::string::npos) << e;
  EXPECT_NE(e.find("limit of 4"), std::string::npos) << e;
}

TEST(Corpus, ResolveDataDir) {
  TempDir d;
  {
    ScopedEnv env("MOSGRAD_DATA", "/somewhere/else");
    EXPECT_EQ(mg::resolve_data_dir(d.str()), d.str());  // the flag wins over the environment
    EXPECT_EQ(mg::resolve_data_dir(), "/somewhere/else");
  }
  // Unset: data/ptb in the checkout, unless only the shared copy beside the checkout exists.
  const fs::path own = fs::path(MOSGRAD_SOURCE_DIR) / "data" / "ptb";
  const fs::path shared = fs::path(MOSGRAD_SOURCE_DIR).parent_path() / "shared" / "data" / "ptb";
  const fs::path expected = !fs::exists(own) && fs::exists(shared / "ptb.train.txt") ? shared : own;
  {
    ScopedEnv env("MOSGRAD_DATA", nullptr);
    EXPECT_EQ(fs::path(mg::resolve_data_dir()), expected);
  }
  {
    ScopedEnv env("MOSGRAD_DATA", "");  // set but empty counts as unset
    EXPECT_EQ(fs::path(mg::resolve_data_dir()), expected);
  }
  // A relative path that does not exist from here is looked up in the checkout ("tests" does).
  const fs::path cwd = fs::current_path();
  fs::current_path(d.str());
  const std::string resolved = mg::resolve_data_dir("tests");
  const std::string missing = mg::resolve_data_dir("no/such/dir");
  fs::current_path(cwd);
  EXPECT_EQ(fs::path(resolved), fs::path(MOSGRAD_SOURCE_DIR) / "tests");
  EXPECT_EQ(missing, "no/such/dir");
}

TEST(Corpus, PennTreebankFigures) {
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const mg::Corpus c = mg::load_corpus(dir, 10000);
  EXPECT_EQ(c.train.size(), 929589u);
  EXPECT_EQ(c.valid.size(), 73760u);
  EXPECT_EQ(c.test.size(), 82430u);
  EXPECT_EQ(c.vocab.size(), 10000);
  EXPECT_EQ(c.unk_valid, 0);
  EXPECT_EQ(c.unk_test, 0);
  // Ids as AWD-LSTM's data.py assigns them (computed with it): <eos> after the 24 words of line 1.
  EXPECT_EQ(c.vocab.eos(), 24);
  EXPECT_EQ(c.vocab.unk(), 26);
  EXPECT_EQ(c.vocab.word(0), "aer");
  EXPECT_EQ(std::vector<int64_t>(c.valid.begin(), c.valid.begin() + 5),
            (std::vector<int64_t>{2211, 396, 1129, 64, 831}));
  EXPECT_EQ(std::accumulate(c.train.begin(), c.train.end(), int64_t{0}), 1156603095);
  EXPECT_EQ(std::accumulate(c.valid.begin(), c.valid.end(), int64_t{0}), 90505708);
  EXPECT_EQ(std::accumulate(c.test.begin(), c.test.end(), int64_t{0}), 96492489);
}

TEST(Corpus, WikiText2Figures) {
  // WikiText-2 is looked for beside PTB (data/wikitext-2 next to data/ptb).
  const fs::path dir = fs::path(mgtest::ptb_dir()).parent_path() / "wikitext-2";
  if (!fs::exists(dir / "wiki.train.tokens")) GTEST_SKIP() << "WikiText-2 not found beside PTB";
  const mg::Corpus c = mg::load_corpus(dir.string());
  EXPECT_EQ(c.format, "wikitext-2");
  EXPECT_EQ(c.train.size(), 2088628u);
  EXPECT_EQ(c.valid.size(), 217646u);
  EXPECT_EQ(c.test.size(), 245569u);
  EXPECT_EQ(c.vocab.size(), 33278);
  EXPECT_EQ(c.unk_valid + c.unk_test, 0);
  EXPECT_EQ(std::accumulate(c.train.begin(), c.train.end(), int64_t{0}), 7397652102);
  EXPECT_EQ(std::accumulate(c.test.begin(), c.test.end(), int64_t{0}), 676583775);
}

// ---------------------------------------------------------------- batching
