#include "tfm/generator.h"

#include "api/inference.h"
#include "data/text.h"
#include "decode/sampling.h"
#include "tensor/error.h"

namespace tfm {

struct Generator::Impl : api::FamilyModel<models::GPT> {
  Impl(const std::string& path, const ModelOptions& o)
      : FamilyModel(path, "gpt", "a language model from `tfm lm train`", o.vocab, o.precision) {}
};

Generator::Generator(const std::string& checkpoint, const ModelOptions& options)
    : impl_(std::make_unique<Impl>(checkpoint, options)) {}

Generator::~Generator() = default;

std::string Generator::generate(const std::string& prompt, const GenerationOptions& o,
                                const std::function<void(const std::string&)>& on_text) const {
  const char* problem = data::text_problem(prompt);
  TFM_CHECK(!problem, "the prompt: " << problem);
  TFM_CHECK(o.max_new_tokens >= 0 && o.top_k >= 0 && o.temperature >= 0 && o.top_p >= 0 && o.top_p <= 1,
            "generation options out of range (max_new_tokens, top_k and temperature at least 0; top_p in [0, 1])");
  const data::Tokenizer& tokenizer = *impl_->checkpoint.tokenizer;
  const std::vector<int> prompt_ids = prompt.empty() ? std::vector<int>{tokenizer.line_break_id()} : tokenizer.encode(prompt);
  TFM_CHECK(!prompt_ids.empty(), "the prompt encodes to no tokens");
  decode::SamplingOptions sampling;
  sampling.max_new_tokens = o.max_new_tokens, sampling.temperature = o.temperature, sampling.top_k = o.top_k;
  sampling.top_p = o.top_p, sampling.seed = o.seed;
  // SentencePiece drops the leading space of a piece decoded alone: decode the whole text
  // each time and hand on what it adds (once it extends what was handed on: a character
  // may take several byte pieces).
  std::vector<int> ids = prompt_ids;
  const std::string start = tokenizer.decode(ids);
  std::string shown = start;
  decode::generate(impl_->model, prompt_ids, sampling, [&](int id) {
    ids.push_back(id);
    std::string text = tokenizer.decode(ids);
    if (text.compare(0, shown.size(), shown) != 0) return;
    if (on_text) on_text(text.substr(shown.size()));
    shown = std::move(text);
  });
  return shown.substr(start.size());
}

}  // namespace tfm
