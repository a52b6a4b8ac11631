// A flag given that the run it configures never reads is refused before any work, as every flag
// that would do nothing beside another is (docs/cli.md). The model's own flags are not among them:
// a run's flags may serve every head of a comparison (reproduce gives K to softmax too), and a
// model flag the model never reads is no part of the run (ModelConfig::reads: a resume or finetune
// does not compare it).
#pragma once

#include "cli/command_line.h"

namespace mg {

// train and finetune: --tf32 true on the CPU, --max_seq_len_delta without variable BPTT. Throws
// std::invalid_argument "<command>: --<flag> does nothing with <the other flag>; drop it".
void refuse_flags_that_do_nothing(const CommandLine& c);

}  // namespace mg
