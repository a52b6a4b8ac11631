// A flag given that the run it configures never reads is refused before any work, as every flag
// that would do nothing beside another is (docs/cli.md): accepted, it would still be saved with the
// run, and every --resume and finetune of it would then ask for it again.
#pragma once

#include "cli/command_line.h"

namespace mg {

// train and finetune: --n_experts or --dropoutl with a head that mixes nothing (softmax,
// sigsoftmax), --nhidlast with such a head tied (its last layer has --emsize units), --nhid with
// one layer (the last), --tf32 true on the CPU, --max_seq_len_delta without variable BPTT. Throws
// std::invalid_argument "<command>: --<flag> does nothing with <the other flag>; drop it".
void refuse_flags_that_do_nothing(const CommandLine& c);

}  // namespace mg
