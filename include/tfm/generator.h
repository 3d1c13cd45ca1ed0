#pragma once
// tfm::Generator: a language model from `tfm lm train`, continuing text.
//
//   tfm::Generator generator("runs/lm/best.safetensors");
//   std::string text = generator.generate("ROMEO:", {.max_new_tokens = 100, .temperature = 0.8f},
//                                         [](const std::string& piece) { std::cout << piece << std::flush; });
//
// Safe to call from many threads at once; each call generates on the calling thread.
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "tfm/model_options.h"

namespace tfm {

struct GenerationOptions {
  int64_t max_new_tokens = 500;
  float temperature = 0.8f;  // 0: greedy (always the most likely token)
  int64_t top_k = 0;         // sample from the k most likely tokens (0: all)
  float top_p = 1.0f;        // nucleus sampling: the smallest set with this probability (1: all)
  uint64_t seed = 1;
};

class Generator {
 public:
  // Loads the checkpoint; throws std::runtime_error with one line saying what is wrong.
  explicit Generator(const std::string& checkpoint, const ModelOptions& options = {});
  ~Generator();
  Generator(const Generator&) = delete;
  Generator& operator=(const Generator&) = delete;

  // The text that continues `prompt` (an empty prompt: a line break). `on_text`, when
  // given, hears each piece of text as soon as the token that completes it is chosen
  // (a character may take several tokens); the pieces make the returned text.
  std::string generate(const std::string& prompt, const GenerationOptions& options = {},
                       const std::function<void(const std::string&)>& on_text = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm
