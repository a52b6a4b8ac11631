// Cross-check with PyTorch on real text: a small MoS model written by tools/torch_eval.py (PyTorch
// reference model, fixed weights, as safetensors) is imported and evaluated on the first 5,000
// tokens of PTB valid; the loss must equal PyTorch's (float64) within 1e-4 relative.
#include <gtest/gtest.h>

#include <cmath>

#include "lm/batching.h"
#include "lm/evaluate.h"
#include "lm/model_io.h"
#include "tests/test_trainer_util.h"
#include "tests/test_util.h"

using namespace mg;

TEST(PtbEval, PerplexityEqualsPyTorchOnAPtbSlice) {
  const std::string dir = mgtest::ptb_dir();
  MG_SKIP_WITHOUT_PTB(dir);
  const Corpus corpus = load_corpus(dir);
  const mgtest::Fixtures expected("ptb_eval.txt");
  const LoadedModel loaded = import_safetensors(mgtest::fixture_path("ptb_eval_model.safetensors"));
  ASSERT_EQ(loaded.model->config.ntoken, corpus.vocab.size());
  const auto tokens = static_cast<int64_t>(expected.get("tokens").item());
  const std::vector<int64_t> slice(corpus.valid.begin(), corpus.valid.begin() + tokens);
  const Batched data = batchify(slice, static_cast<int64_t>(expected.get("batch_size").item()));
  for (bool fused : {true, false}) {
    loaded.model->paths.fused_lstm = fused;
    loaded.model->paths.fused_head = fused;
    const EvalResult r =
        evaluate(*loaded.model, data, static_cast<int64_t>(expected.get("bptt").item()));
    EXPECT_EQ(r.targets, static_cast<int64_t>(expected.get("targets").item()));
    const double ref = expected.get("loss").item();
    std::printf("%s path: mosgrad loss %.7f, PyTorch float64 %.7f, relative difference %.2e\n",
                fused ? "fused" : "plain", r.loss, ref, std::fabs(r.loss - ref) / ref);
    EXPECT_NEAR(r.loss, ref, 1e-4 * ref)
        << (fused ? "fused" : "plain") << " path: mosgrad loss " << r.loss << " (ppl "
        << r.perplexity() << "), PyTorch " << ref;
  }
}
