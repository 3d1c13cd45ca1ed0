#pragma once
// How tfm::Encoder, tfm::Generator and tfm::Classifier load their checkpoint.
#include <cstdint>
#include <string>
#include <utility>

namespace tfm {

struct ModelOptions {
  ModelOptions() = default;
  // The three settings every model takes; the others keep their defaults.
  ModelOptions(std::string vocab_path, std::string precision_name, std::string device_name)
      : vocab(std::move(vocab_path)), precision(std::move(precision_name)), device(std::move(device_name)) {}

  std::string vocab;              // SentencePiece model, if not at the path the checkpoint records (text models)
  std::string precision = "f32";  // the linear layers' products: f32, bf16 or int8 (int8: the CPU only)
  std::string device = "cpu";     // where the model computes: cpu, or cuda (a GPU of a build with TFM_CUDA)
  // tfm::Generator: the most bytes the running batch's keys and values may take (0: no
  // bound). Each running sequence counts as its whole context window could take, so
  // requests beyond what fits wait for others to finish.
  int64_t max_cache_bytes = 0;
  std::string lora;  // a language model's LoRA adapter directory (PEFT's layout), merged into its weights
};

}  // namespace tfm
