#pragma once
// Checkpoint averaging, the habit of fairseq (scripts/average_checkpoints.py) and
// Marian: the mean of every weight over a run's last few saves, a model that is
// usually better than any one of them (the saves sample the noisy end of training).
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace tfm::io {

// The mean of each weight over `paths` (checkpoints of one model: the same kind,
// configuration, names and shapes, else one line naming the first difference),
// summed in double and rounded once. The result keeps the last file's metadata (its
// vocabularies and tokenizer) without its training state or optimizer moments, and
// names its sources in "tfm.averaged".
SafeTensors average_checkpoints(const std::vector<std::string>& paths);

// The last `n` step-N checkpoints (`--save-every`) of a run directory, oldest first;
// fewer than `n` there is an error that says how many there are.
std::vector<std::string> last_step_checkpoints(const std::string& dir, int n);

}  // namespace tfm::io
