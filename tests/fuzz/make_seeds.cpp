// Writes the seed corpus of the fuzz targets (make fuzz-seeds): small but complete inputs of every
// kind, so the fuzzer starts from files that load and mutates them, instead of having to discover
// the formats from nothing. The text seeds (corpus, flags) go to tests/fuzz/corpus/<target>/ and
// are committed; the model files to build/fuzz/model_seeds/<target>/ (tests/fuzz/model_seeds.h) and
// the binary crash reproducers built from them to build/fuzz/crash_reproducers/<target>/
// (tests/fuzz/crash_builders.h), which the fuzzers take as seeds too.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/crash_builders.h"
#include "tests/fuzz/model_seeds.h"

namespace {

void write(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir = std::filesystem::path("tests/fuzz/corpus") / target;
  std::filesystem::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

}  // namespace

int main() {
  mgfuzz::write_model_seeds("build/fuzz/model_seeds");  // binary: generated, not committed
  mgfuzz::write_crash_reproducers("build/fuzz/model_seeds", "build/fuzz/crash_reproducers");

  write("corpus", "ptb_lines", " the cat sat on the mat \n the <unk> sat \n\xff the dog sat \n");
  write("corpus", "crlf_no_final_newline",
        "a b\r\nc d\re f\xff"
        "a c\r\nz");
  write("corpus", "utf8_and_unicode_spaces",
        "caf\xc3\xa9 na\xc3\xafve\xe2\x80\x83word \xf0\x9f\x90\x88\n\xff"
        "caf\xc3\xa9\n");
  write("corpus", "wikitext_headings",
        " = Title = \n \n The @-@ test , 1 @.@ 5 . \n\xff = Title = \n");

  const std::string interval =
      "{\"kind\":\"interval\",\"epoch\":1,\"step\":200,\"batch\":200,\"tokens\":140000,"
      "\"loss\":5.12,\"ppl\":167.3,\"lr\":20,\"tok_per_s\":2650.1,\"elapsed_s\":52.8,"
      "\"grad_norm\":0.61}\n";
  const std::string epoch =
      "{\"kind\":\"epoch\",\"epoch\":1,\"step\":1327,\"tokens\":929000,\"train_loss\":5.3,"
      "\"train_ppl\":200.3,\"val_loss\":4.9,\"val_ppl\":134.3,\"elapsed_s\":350.2,"
      "\"epoch_s\":350.2,\"optimizer\":\"sgd\",\"best\":true}\n";
  write("metrics", "interval_and_epoch", interval + epoch);
  write("metrics", "diverged_nulls",
        "{\"kind\":\"interval\",\"tokens\":10,\"loss\":null,\"ppl\":null}\n" + epoch);
  write("metrics", "resumed_repeat", interval + epoch + interval + epoch);
  write("metrics", "torn_last_line", interval + epoch + "{\"kind\":\"inter");

  const auto line =
      [](std::vector<std::string> words) {  // the first byte picks the command (targets.h)
        std::string s;
        for (const std::string& w : words) s += w + std::string(1, '\0');
        return s;
      };
  write("flags", "train_small",
        line({std::string(1, 0) + "--preset", "tiny", "--emsize", "64", "--lr=20", "--resume",
              "--max-steps", "10", "--dropout", "0.4"}));
  write("flags", "finetune_adam",
        line({std::string(1, 1) + "--optimizer", "adam", "--batch-size", "20", "--bptt", "70",
              "--tf32", "false", "--device", "cpu"}));
  write("flags", "eval",
        line({std::string(1, 2) + "--model", "runs/x/best.ckpt", "--split", "valid", "--batch_size",
              "10", "--bptt", "70"}));
  write("flags", "dyneval",
        line({std::string(1, 3) + "--lamb", "0.075", "--ms", "true", "--lr", "0.002"}));
  write("flags", "generate",
        line({std::string(1, 4) + "--words", "50", "--temperature", "0.8", "--seed", "3"}));
  write("flags", "import", line({std::string(1, 6) + "--in", "a.safetensors", "--out", "b.ckpt"}));
  write("flags", "gradcheck",
        line({std::string(1, 9) + "--head", "mos", "--entries", "8", "--params",
              "rnns.0.weight_hh,decoder.bias", "--tolerance", "1e-2"}));
  return 0;
}
