#include "train/text_data.h"

#include <algorithm>

#include "hf/export.h"
#include "tensor/error.h"
#include "train/data_parallel.h"

namespace tfm::training {

namespace {

constexpr double kValidFraction = 0.1;  // of the text, held out when there is no validation file

}  // namespace

TextStreamTask::TextStreamTask(const tfm::TextData& s, const std::string& kind, const models::StackConfig& chosen,
                               const ModelSettings& settings, const std::optional<io::Checkpoint>& resumed,
                               const std::string& resume_path, const std::function<int64_t(const models::StackConfig&)>& window,
                               int64_t batch, std::ostream& out)
    : kind_(kind), batch_(batch) {
  TFM_CHECK(batch >= 1, "batch must be at least 1");
  TFM_CHECK(!s.text.empty(), "the task's data has no training text (TextData's text; --text on the command line)");
  const std::string text = data::read_text(s.text);
  if (resumed) {
    io::check_model_kind(resumed->model_kind, {kind}, resume_path, "a " + kind + " one");
    auto it = resumed->metadata.find("tfm.tokenizer");
    TFM_CHECK(it != resumed->metadata.end(), resume_path << ": records no tokenizer");
    tokenizer_ = data::Tokenizer::from_record(it->second, resume_path, s.vocab);
    if (const auto source = resumed->metadata.find(hf::kSourceKey); source != resumed->metadata.end()) carried_.insert(*source);
    config_ = settings.kept(chosen, models::StackConfig::from_json(resumed->config_json, resume_path, kind), resume_path);
  } else {  // the chosen configuration, completed by the tokenizer
    tokenizer_ = s.vocab.empty() ? data::Tokenizer::characters(text) : data::Tokenizer::sentencepiece(s.vocab);
    TFM_CHECK(chosen.vocab == 0 || chosen.vocab == tokenizer_.size(),
              settings.origin() << ": vocab " << chosen.vocab << " disagrees with the tokenizer's " << tokenizer_.size()
                                << "; leave it out (the tokenizer decides it)");
    config_ = chosen;
    config_.vocab = tokenizer_.size();
    config_.validate(settings.origin());
  }
  std::vector<int> ids = tokenizer_.encode(text);
  // A resumed run's text may hold characters its vocabulary never saw (the review's F13).
  if (const auto unknown = std::count(ids.begin(), ids.end(), tokenizer_.unk_id()); unknown > 0)
    out << "warning: " << unknown << " tokens of " << s.text << " are not in the vocabulary" << (resumed ? " of " + resume_path : "")
        << "; they are read as the unknown token" << std::endl;
  if (s.valid_text.empty()) {
    const auto split = static_cast<std::ptrdiff_t>(static_cast<double>(ids.size()) * (1.0 - kValidFraction));
    train_.assign(ids.begin(), ids.begin() + split);
    valid_.assign(ids.begin() + split, ids.end());
  } else {
    train_ = std::move(ids);
    valid_ = tokenizer_.encode(data::read_text(s.valid_text));
  }
  window_ = window(config_);
  TFM_CHECK(window_ >= 1, "the model's max_len leaves no room for text");
  // The window follows from the model's length (lm --context, bert --max-len); hints name the file that is short.
  TFM_CHECK(static_cast<int64_t>(train_.size()) >= window_, s.text << ": too short: training needs at least " << window_
                                                                    << " tokens (one window), the text has " << train_.size());
  TFM_CHECK(static_cast<int64_t>(valid_.size()) >= window_,
            (s.valid_text.empty() ? s.text + ": the part held out for validation" : s.valid_text + ":")
                << " is too short: validation needs at least " << window_ << " tokens (one window), it has " << valid_.size());
  // A batch of more windows than the text holds sees it several times a step (and a
  // billion of them asked 24 GB before failing): refused with the most that make sense.
  const int64_t most = static_cast<int64_t>(train_.size()) / window_;
  TFM_CHECK(batch_ <= most, "--batch " << batch_ << " windows of " << window_ << " tokens is more than the training text's " << train_.size()
                                       << " tokens hold; at most " << most);
  out << "text: " << train_.size() << " training and " << valid_.size() << " validation tokens, vocabulary " << tokenizer_.size()
      << " (" << tokenizer_.describe() << ")" << "\n";
}

int64_t TextStreamTask::begin_epoch(int64_t epoch, uint64_t seed) {
  seed_ = seed, epoch_ = epoch;
  return std::max<int64_t>(1, static_cast<int64_t>(train_.size()) / (batch_ * window_));
}

std::vector<int64_t> TextStreamTask::window_starts(int64_t index, Rng& rng) const {
  rng = substream(seed_, static_cast<uint64_t>(epoch_), static_cast<uint64_t>(index));
  std::vector<int64_t> starts(static_cast<size_t>(batch_));
  for (int64_t& s : starts) s = rng.randint(0, static_cast<int64_t>(train_.size()) - window_ + 1);
  return starts;
}

void TextStreamTask::for_each_valid_batch(const std::function<void(const std::vector<int64_t>&, int64_t)>& f) const {
  constexpr int64_t kBatch = 32;
  const int64_t windows = static_cast<int64_t>(valid_.size()) / window_;
  const dist::Range mine = share((windows + kBatch - 1) / kBatch);
  for (int64_t b = mine.begin; b < mine.end; ++b) {
    std::vector<int64_t> starts;
    for (int64_t w = b * kBatch; w < std::min(windows, (b + 1) * kBatch); ++w) starts.push_back(w * window_);
    f(starts, b);
  }
}

std::string TextStreamTask::data_fingerprint() const {
  return fingerprint(train_.size(), "training tokens", fnv1a(train_.data(), train_.size() * sizeof(int)));
}

}  // namespace tfm::training
