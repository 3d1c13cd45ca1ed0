#include "train/text_data.h"

#include "tensor/error.h"

namespace tfm::train {

TextData load_text_data(const TextSource& s, const std::optional<io::Checkpoint>& resumed, const std::string& resume_path,
                        const std::string& kind) {
  TextData d;
  const std::string text = data::read_text(s.text);
  if (resumed) {
    auto it = resumed->metadata.find("tfm.tokenizer");
    TFM_CHECK(resumed->model_kind == kind && it != resumed->metadata.end(),
              resume_path << ": is a '" << resumed->model_kind << "' checkpoint, not a " << kind << " one");
    d.tokenizer = data::Tokenizer::from_record(it->second, resume_path, s.spm);
  } else {
    d.tokenizer = s.spm.empty() ? data::Tokenizer::characters(text) : data::Tokenizer::sentencepiece(s.spm);
  }
  std::vector<int> ids = d.tokenizer.encode(text);
  if (s.valid_text.empty()) {
    TFM_CHECK(s.valid_fraction > 0 && s.valid_fraction < 1, "the validation fraction must be in (0, 1)");
    const auto split = static_cast<std::ptrdiff_t>(static_cast<double>(ids.size()) * (1.0 - s.valid_fraction));
    d.train.assign(ids.begin(), ids.begin() + split);
    d.valid.assign(ids.begin() + split, ids.end());
  } else {
    d.train = std::move(ids);
    d.valid = d.tokenizer.encode(data::read_text(s.valid_text));
  }
  return d;
}

}  // namespace tfm::train
