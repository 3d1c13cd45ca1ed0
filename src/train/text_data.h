#pragma once
// What the text families (language model, masked LM) share: a tokenizer
// (characters or SentencePiece, or the one a resumed checkpoint recorded), the
// training and validation token streams (a validation file, or the last fraction of
// the text), the model configuration, random training windows that depend only on
// (seed, epoch, batch), and the held-out text cut into whole windows.
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/stack_config.h"
#include "tfm/training.h"
#include "train/model_settings.h"
#include "train/trainer.h"

namespace tfm::training {

class TextStreamTask : public TrainingTask {
 protected:
  // Loads the text (the last 10% held out unless there is a validation file) and resolves
  // the configuration: the resumed checkpoint's (which must keep the settings given),
  // else `chosen` (the family's defaults under `settings`) completed by the tokenizer's
  // vocabulary. `window` maps the configuration to the tokens one example takes from
  // the stream.
  TextStreamTask(const tfm::TextData& data, const std::string& kind, const models::StackConfig& chosen, const ModelSettings& settings,
                 const std::optional<io::Checkpoint>& resumed, const std::string& resume_path,
                 const std::function<int64_t(const models::StackConfig&)>& window, int64_t batch, std::ostream& out);

  io::Checkpoint describe_config(const std::string& config_json) const {
    io::Checkpoint c{kind_, config_json, {}, "", {{"tfm.tokenizer", tokenizer_.record()}}};
    c.metadata.insert(carried_.begin(), carried_.end());
    return c;
  }
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override;
  std::string data_fingerprint() const override;
  // Start offsets of batch `index`'s windows, drawn from (seed, epoch, index).
  std::vector<int64_t> window_starts(int64_t index, Rng& rng) const;
  // Calls f with the start offsets of consecutive whole windows of the held-out text, 32
  // at a time, and the batch's number: this process's share of those batches.
  void for_each_valid_batch(const std::function<void(const std::vector<int64_t>&, int64_t)>& f) const;

  std::string kind_;
  models::StackConfig config_;
  data::Tokenizer tokenizer_;
  std::vector<int> train_, valid_;
  std::map<std::string, std::string> carried_;  // what the resumed checkpoint recorded of a Hugging Face source (hf::kSourceKey)
  int64_t window_ = 0, batch_ = 0;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace tfm::training
