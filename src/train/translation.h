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

#include "train/trainer.h"

namespace tfm::train {

struct TranslationOptions {
  std::string train_src, train_tgt, valid_src, valid_tgt;
  std::string src_vocab, tgt_vocab;  // SentencePiece models (the same file for a joint vocabulary)
  // The model: flags given > config_path > preset > defaults. Vocabulary sizes, pad_id
  // and (unless the file says otherwise) tied embeddings come from the vocabularies.
  std::optional<std::string> preset;  // default "small"
  std::string config_path;            // JSON over the preset
  std::optional<float> dropout;       // default: the preset's (0.1)
  std::optional<bool> norm_first;     // default: the preset's (pre-norm)
  int64_t max_tokens = 2500;         // padded tokens per batch
  float label_smoothing = 0.1f;
  int64_t max_sentence_tokens = 100;  // longer training pairs are skipped (and counted)
  int64_t valid_sentences = 0;        // sentences translated for validation BLEU; 0: all
  TrainerOptions trainer = default_trainer();

  // 30 epochs, the paper's schedule (factor 1, 1000 warm-up steps) and AdamW (0.9, 0.98,
  // 1e-9), clipping at norm 1, validation every 500 steps, runs/translation.
  static TrainerOptions default_trainer();
};

// Returns the process exit code (0 done, 130 interrupted).
int run_translation_training(const TranslationOptions& options, std::ostream& out);

}  // namespace tfm::train
