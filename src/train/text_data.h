#pragma once
// What the text families (language model, masked LM) share: a tokenizer
// (characters or SentencePiece, or the one a resumed checkpoint recorded), the
// training and validation token streams (a validation file, or the last fraction of
// the text), the model configuration, random training windows that depend only on
// (seed, epoch, batch), and the held-out text cut into whole windows.
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/stack_config.h"
#include "train/trainer.h"

namespace tfm::train {

struct TextSource {
  std::string text;        // training text (plain or .gz)
  std::string valid_text;  // optional
  double valid_fraction = 0.1;
  std::string spm;         // SentencePiece model; empty: characters
};

class TextStreamTask : public TrainingTask {
 protected:
  // Loads the text and resolves the configuration: the resumed checkpoint's, else `model`
  // (the command's: defaults, --config, flags) with family `kind` and the tokenizer's
  // vocabulary, validated with errors naming `config_origin`. `window` maps the
  // configuration to the tokens one example takes from the stream.
  TextStreamTask(const TextSource& source, const std::string& kind, const models::StackConfig& model, const std::string& config_origin,
                 const std::optional<io::Checkpoint>& resumed, const std::string& resume_path,
                 const std::function<int64_t(const models::StackConfig&)>& window, int64_t batch, std::ostream& out);

  io::Checkpoint describe_config(const std::string& config_json) const {
    return {kind_, config_json, {}, "", {{"tfm.tokenizer", tokenizer_.record()}}};
  }
  int64_t begin_epoch(int64_t epoch, uint64_t seed) override;
  // Start offsets of batch `index`'s windows, drawn from (seed, epoch, index).
  std::vector<int64_t> window_starts(int64_t index, Rng& rng) const;
  // Calls f with the start offsets of consecutive whole windows of the held-out text, 32 at a time.
  void for_each_valid_batch(const std::function<void(const std::vector<int64_t>&)>& f) const;

  std::string kind_;
  models::StackConfig config_;
  data::Tokenizer tokenizer_;
  std::vector<int> train_, valid_;
  int64_t window_ = 0, batch_ = 0;
  uint64_t seed_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace tfm::train
