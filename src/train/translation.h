#pragma once
// Training a translation model on a parallel corpus: subword encoding, token-
// bounded batches, label-smoothed cross-entropy, Adam with warm-up, gradient
// accumulation and clipping, periodic validation (loss, perplexity, BLEU, chrF of
// greedy translations), checkpoints (last, best by BLEU, every N steps), exact
// resume, early stopping, and a clean stop on Ctrl-C.
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

namespace tfm::train {

struct TranslationOptions {
  std::string train_src, train_tgt, valid_src, valid_tgt;
  std::string src_vocab, tgt_vocab;  // SentencePiece models (the same file for a joint vocabulary)
  std::string out_dir = "runs/translation";
  // The model: flags given > config_path > preset > defaults. Vocabulary sizes, pad_id
  // and (unless the file says otherwise) tied embeddings come from the vocabularies.
  std::optional<std::string> preset;  // default "small"
  std::string config_path;            // JSON over the preset
  std::optional<float> dropout;       // default: the preset's (0.1)
  std::optional<bool> norm_first;     // default: the preset's (pre-norm)
  int64_t max_tokens = 2500;         // padded tokens per batch
  int64_t accumulate = 1;            // batches per optimiser step
  int64_t epochs = 30;
  int64_t max_steps = 0;             // 0: no limit
  double max_minutes = 0;            // stop (and save) after this much training time; 0: no limit
  float lr_factor = 1.0f;
  int64_t warmup = 1000;
  float label_smoothing = 0.1f;
  double clip_norm = 1.0;
  int64_t max_sentence_tokens = 100;  // longer training pairs are skipped (and counted)
  int64_t validate_every = 500;
  int64_t valid_sentences = 0;        // sentences translated for validation BLEU; 0: all
  int64_t save_every = 0;             // also keep step-N checkpoints; 0: never
  int64_t patience = 0;               // stop after this many validations without a better BLEU; 0: never
  bool skip_nonfinite = false;        // skip steps whose loss or gradient is not finite (default: stop with an error)
  uint64_t seed = 1;
  int64_t log_every = 50;
  std::string resume;                 // a last.safetensors to continue from
  bool force = false;                 // a fresh run may replace the run already in out_dir
};

// Returns the process exit code (0 done, 130 interrupted).
int run_translation_training(const TranslationOptions& options, std::ostream& out);

}  // namespace tfm::train
