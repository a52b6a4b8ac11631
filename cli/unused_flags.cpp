#include "cli/unused_flags.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace mg {

void refuse_flags_that_do_nothing(const CommandLine& c) {
  const TrainConfig& t = c.train;
  const std::vector<std::pair<std::string, std::string>> unused = {
      {"tf32", t.tf32 && t.device == Device::CPU ? "--device cpu (TF32 is the GPU's)" : ""},
      {"max_seq_len_delta", t.variable_bptt ? "" : "--variable_bptt false"}};
  for (const auto& [flag, why] : unused)
    if (!why.empty() && c.gave(flag))
      throw std::invalid_argument(c.command + ": --" + flag + " does nothing with " + why +
                                  "; drop it");
}

}  // namespace mg
