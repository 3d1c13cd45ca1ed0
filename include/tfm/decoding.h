#pragma once
// How a request is decoded: the options of tfm::Translator's translations and of
// tfm::Generator's text. The engine's search and sampling take these same structs
// (decode::SearchOptions and decode::SamplingOptions extend them), so an option is
// defined once, here, for the library, the command line and the bindings alike.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tfm {

struct TranslationOptions {
  int64_t beam = 4;               // 1: greedy
  int64_t nbest = 1;              // hypotheses per sentence, at most `beam`
  // Ended hypotheses rank by log-probability / length^penalty (0: the raw log-probability).
  // tfm's models search as CTranslate2 does: the length counts the words, and a sentence is
  // done once K hypotheses have ended; Hugging Face models as transformers does: the
  // length counts the end symbol too, and a sentence is done once no open beam can beat
  // the K best ended. In both, an end counts only among the step's K best candidates.
  float length_penalty = 1.0f;
  // At most a * source length + b target tokens (a 1.5, b 10 where unset). A Hugging Face
  // model stops at its generation config's max_length too, and where neither is set, at
  // that alone, as transformers does.
  std::optional<float> max_len_a;
  std::optional<int64_t> max_len_b;
  bool return_attention = false;  // fill Translation::attention
  // A many-to-many model's languages (M2M100's "en", NLLB's "eng_Latn", mBART-50's "en_XX"): the source's
  // token starts every source, the target's every translation (both needed by such a
  // model, refused by any other).
  std::string source_language, target_language;
  bool operator==(const TranslationOptions&) const = default;
};

// The choice of each token: first the penalties on tokens the text already has (greedy
// too), then temperature, top_k, top_p and min_p, in that order (transformers' order).
struct GenerationOptions {
  int64_t max_new_tokens = 500;
  float temperature = 0.8f;  // 0: greedy (always the most likely token)
  int64_t top_k = 0;         // sample from the k most likely tokens (0: all)
  float top_p = 1.0f;        // nucleus sampling: the smallest set with this probability (1: all)
  float min_p = 0.0f;        // only tokens at least min_p times as likely as the most likely (0: all)
  float repetition_penalty = 1.0f;  // transformers': each token of the prompt or text, its logit / p if positive, * p if not (1: none)
  float frequency_penalty = 0.0f;   // OpenAI's: each generated token's logit minus this times its count so far
  float presence_penalty = 0.0f;    // OpenAI's: each generated token's logit minus this once
  uint64_t seed = 1;
  std::vector<std::string> stop;  // the text ends before the first of these it contains (not part of the text)
};

}  // namespace tfm
