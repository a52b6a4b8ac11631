#include "cli/unused_flags.h"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "nn/heads.h"

namespace mg {

void refuse_flags_that_do_nothing(const CommandLine& c) {
  const TrainConfig& t = c.train;
  const ModelConfig& m = t.model;
  const bool mixture = is_mixture(m.head);
  const std::string head = "--head " + head_kind_name(m.head);
  // ModelConfig::layer_sizes: nlayers - 1 layers of nhid, then the last of nhidlast (emsize for a
  // tied head without a mixture, whose decoder is the embedding).
  const bool last_is_emsize = !mixture && m.tied;
  const std::vector<std::pair<std::string, std::string>> unused = {
      {"n_experts", mixture ? "" : head + ", which mixes no components"},
      {"dropoutl", mixture ? "" : head + ", which has no latent layer"},
      {"nhidlast", last_is_emsize ? head + " tied: its last layer has --emsize units" : ""},
      {"nhid", m.nlayers == 1 ? std::string("--nlayers 1: its one layer is the last, of ") +
                                    (last_is_emsize ? "--emsize" : "--nhidlast") + " units"
                              : ""},
      {"tf32", t.tf32 && t.device == Device::CPU ? "--device cpu (TF32 is the GPU's)" : ""},
      {"max_seq_len_delta", t.variable_bptt ? "" : "--variable_bptt false"}};
  for (const auto& [flag, why] : unused)
    if (!why.empty() && c.gave(flag))
      throw std::invalid_argument(c.command + ": --" + flag + " does nothing with " + why +
                                  "; drop it");
}

}  // namespace mg
