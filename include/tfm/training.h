#pragma once
// Training as a library call: tfm::train(options, task) runs the training loop behind
// `tfm train`, `tfm lm train`, `tfm vit train` and `tfm bert train` on one of five
// tasks. The fields are the command line's flags, one for one, and every task's model
// is chosen the same way: the family's defaults, then a JSON file of settings (`config`,
// --config), then a JSON object of settings over it (`model`, the model flags). A
// resumed run keeps its checkpoint's architecture: a setting given that disagrees with
// it is an error.
//
//   tfm::LanguageModelTask task;
//   task.data.text = "input.txt";
//   task.model = R"({"layers": 2})";
//   tfm::TrainingOptions options = tfm::LanguageModelTask::training_defaults();
//   options.max_steps = 500;
//   tfm::TrainingResult r = tfm::train(options, task);  // checkpoints in runs/lm
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

#include "tfm/export.h"

namespace tfm {

// Learning rate as a function of the step (counted from 1).
struct Schedule {
  enum class Kind { Noam, Cosine, Constant };
  Kind kind = Kind::Noam;
  // Rates above kMaxLr are refused: a peak rate is below 1, the paper's factor about 1 or 2;
  // a typo such as 1e30 would only make every step's loss infinite.
  static constexpr float kMaxLr = 1000;
  float lr = 1e-3f;        // Cosine/Constant: the peak rate; Noam: the factor
  float min_lr = 1e-4f;    // Cosine: the floor reached at decay_steps; Noam: a floor under the decay
  int64_t warmup = 1000;   // linear warm-up steps (Noam: its warm-up parameter)
  int64_t decay_steps = 0; // Cosine: step at which min_lr is reached (0: the run's last step)
  int64_t d_model = 512;   // Noam: lr = factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); set from the model
};

struct AdamOptions {
  float lr = 1e-3f;  // the schedule's rate replaces it at every step
  float beta1 = 0.9f, beta2 = 0.98f, eps = 1e-9f;  // the paper's settings
  float weight_decay = 0.0f;
  // false: L2 added to the gradient of every parameter, as torch.optim.Adam.
  // true (AdamW): p -= lr * weight_decay * p before the update, as torch.optim.AdamW,
  // for weight matrices and embeddings only (dim >= 2), as nanoGPT groups them.
  bool decoupled = false;
};

// The shared loop's settings. Each task has its own defaults: start from its
// training_defaults().
struct TrainingOptions {
  std::string out_dir = "runs/model";  // checkpoints (last, best, step-N), metrics.jsonl, curves.png
  int64_t epochs = 1;       // passes over the task's batches
  int64_t max_steps = 0;    // 0: no limit
  double max_minutes = 0;   // stop (and save) after this much training time; 0: no limit
  int64_t accumulate = 1;   // batches per optimiser step (its loss: the mean over all their tokens)
  Schedule schedule;
  AdamOptions adam;
  double clip_norm = 1.0;         // gradient clipping by global norm; 0: off
  int64_t validate_every = 500;   // steps; validation also runs at the end; 0: only then
  int64_t save_every = 0;         // also keep step-N checkpoints; 0: never
  int64_t patience = 0;           // stop after this many validations without a better score; 0: never
  bool skip_nonfinite = false;    // skip steps whose loss or gradient is not finite (default: stop)
  uint64_t seed = 1;              // initialisation, data order, dropout
  int64_t log_every = 50;         // progress and metrics interval in steps (when output is not a terminal)
  std::string resume;             // a last.safetensors to continue from
  // A new run that starts from these weights (fine-tuning): a tfm checkpoint or a Hugging
  // Face model directory, whose architecture and vocabulary the run takes (settings given
  // must agree with them); the optimiser and schedule start afresh.
  std::string init_from;
  bool force = false;             // a fresh run may replace the run already in out_dir
  std::string precision = "f32";  // the linear layers' products: f32 or bf16 (int8 is for inference only)
  // Where the model trains: "cpu", or "cuda" (the GPU of a build with TFM_CUDA; a clear
  // error where there is none). Checkpoints are the same on both.
  std::string device = "cpu";
  // With several processes (mpirun): each keeps and updates only its share of Adam's
  // moments (ZeRO stage 1), gradients reduce-scattered and weights all-gathered, so that
  // the optimiser's memory per process falls by their number.
  bool shard_optimizer = false;
  // With several processes: the gradient buckets' size in MiB (PyTorch DDP's
  // bucket_cap_mb). Each is summed across the processes as soon as the backward pass has
  // completed it, while the pass goes on; 0: one bucket, summed after the pass.
  double bucket_mb = 16;
};

// A translation model on a parallel corpus (`tfm train --train-src ...`).
struct TranslationTask {
  std::string train_src, train_tgt, valid_src, valid_tgt;  // one sentence a line, plain or .gz
  std::string src_vocab, tgt_vocab;  // SentencePiece models (the same file for a joint vocabulary)
  // The model: `preset` ("small" unless given; "base" is the paper's), then `config`, then
  // `model`. Vocabulary sizes, pad_id and (unless given) tied embeddings come from the
  // vocabularies.
  std::optional<std::string> preset;
  std::string config;  // a JSON file of settings (as a checkpoint's tfm.config holds them)
  std::string model;   // a JSON object of settings over config's, e.g. {"dropout": 0.3}
  int64_t max_tokens = 2500;          // padded tokens (source and target) per batch
  float label_smoothing = 0.1f;
  int64_t max_sentence_tokens = 100;  // longer training pairs are skipped (and counted)
  int64_t valid_sentences = 0;        // sentences translated for validation BLEU; 0: all
  // A many-to-many model's languages (fine-tuning M2M100, NLLB or mBART-50: "en", "eng_Latn",
  // "en_XX"): each
  // source starts with its language's token, each target with the other's.
  std::string source_language, target_language;
  // 30 epochs, the paper's schedule (factor 1, 1000 warm-up steps) and AdamW (0.9, 0.98,
  // 1e-9), clipping at norm 1, validation every 500 steps, runs/translation.
  TFM_API static TrainingOptions training_defaults();
};

// The Annotated Transformer's first example: copy random symbol sequences (`tfm train`
// without data). Its validation decodes `samples` sequences and reports the fraction
// copied exactly as the metric "copied".
struct CopyTask {
  std::string config, model;  // over the task's model: 2 + 2 layers, d_model 128, vocabulary 11
  int64_t batch = 48;
  int64_t seq_len = 10;  // including the leading start symbol
  int64_t samples = 5;
  // Batches in an epoch. They are fresh random ones, so an epoch is only a unit of count.
  static constexpr int64_t kEpochBatches = 800;
  // 800 steps, the paper's schedule with factor 1 and 200 warm-up steps, no clipping,
  // validation only at the end, runs/copy.
  TFM_API static TrainingOptions training_defaults();
};

// The text a language model or a masked LM trains on.
struct TextData {
  std::string text;        // plain or .gz; its last 10% is held out unless valid_text is given
  std::string valid_text;
  std::string vocab;       // a SentencePiece model; empty: characters
};

// A decoder-only (GPT) language model (`tfm lm train`). Model: nanoGPT's CPU recipe for
// shakespeare_char (4 layers, 4 heads, 128 dims, context "max_len" 64; d_ff 4 x d_model
// unless given).
struct LanguageModelTask {
  TextData data;
  std::string config, model;
  int64_t batch = 12;           // windows of max_len tokens
  int64_t sample_tokens = 300;  // sample printed at the end; 0: none
  // LoRA fine-tuning (lora_rank > 0, from TrainingOptions::init_from): the model's weights
  // frozen, adapters of rank lora_rank trained on the projections `lora_targets` names
  // (q, k, v, o, gate, up, down), each changing its output by (lora_alpha / lora_rank) B A x.
  // PEFT's defaults but the rank. Checkpoints hold the adapter (and record the base's
  // path); each is also written as PEFT's directory, last_adapter/ and best_adapter/.
  int64_t lora_rank = 0;
  double lora_alpha = 8.0;
  std::string lora_targets = "q,v";
  // AdamW 1e-3, beta2 0.99, weight decay 0.1, 100 warm-up steps, cosine decay to 1e-4
  // at 2,000 steps, clipping 1.0, runs/lm.
  TFM_API static TrainingOptions training_defaults();
};

// Fashion-MNIST from the Debian package dataset-fashion-mnist.
inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

// A Vision Transformer (`tfm vit train`) on an MNIST-style image set or a folder of
// images. Model: 28 x 28 pixels, patch 7 (16 patches + [CLS]), 6 layers, 128 dims, 4 heads,
// feed-forward 256; grey for MNIST-style files, RGB for a folder unless `model` says
// "channels": 1; a folder's class count.
struct VitTask {
  // MNIST-style idx files ({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]), or a folder
  // of PNG and JPEG images as torchvision's ImageFolder: DIR/<class>/<image>, or
  // DIR/train/<class>/... and DIR/val/<class>/... Any size: resized to the model's
  // (Pillow's bilinear filter); the checkpoint records the class names.
  std::string data_dir = kFashionMnistDir;
  std::string config, model;
  int64_t batch = 128;
  int64_t valid_images = 5000;  // MNIST-style files: the last training images, held out
  double valid_fraction = 0.1;  // a folder without train/ and val/: this part of each class held out (evenly spaced)
  bool flip = true;             // training images mirrored left-right at random
  // AdamW 1e-3, weight decay 0.05, 300 warm-up steps, cosine decay over 16 epochs, runs/vit.
  TFM_API static TrainingOptions training_defaults();
};

// A BERT-style encoder with the masked-language-model objective (`tfm bert train`).
// Model: 4 layers, 4 heads, 128 dims, inputs of 64 tokens.
struct MaskedLmTask {
  TextData data;
  std::string config, model;
  int64_t batch = 64;
  double mask_fraction = 0.15;
  // AdamW 2e-3, weight decay 0.01, 200 warm-up steps, cosine decay over 3,000 steps, runs/bert.
  TFM_API static TrainingOptions training_defaults();
};

// A BERT sentence classifier fine-tuned on labelled sentences (`tfm bert classifier`), as
// transformers fine-tunes BertForSequenceClassification: the encoder and pooler of the
// BERT that TrainingOptions::init_from names (a `tfm bert train` checkpoint or a Hugging
// Face directory, of any head), a new classifier of the training data's labels (or the
// checkpoint's own where it has exactly these labels). The run's checkpoints are
// sentence classifiers (`tfm classify`, tfm::Encoder::classify, `tfm export --hf`: a
// BertForSequenceClassification).
struct SentenceClassifierTask {
  // A TSV ("text<TAB>label") or CSV (text, label; a first line may name the columns) file,
  // plain or .gz, or a folder of one sub-folder of text files per label. Without `valid`,
  // every 10th training sentence is held out.
  std::string train, valid;
  std::string vocab;   // the SentencePiece model, if not at the path the checkpoint records
  int64_t batch = 32;  // sentences per batch
  // AdamW 5e-5, weight decay 0.01, 100 warm-up steps, cosine decay over 3 epochs,
  // validation every 200 steps, runs/classifier.
  TFM_API static TrainingOptions training_defaults();
};

// A BERT token classifier (NER) fine-tuned on labelled words (`tfm bert tagger`), as
// transformers fine-tunes BertForTokenClassification: the encoder of the BERT that
// TrainingOptions::init_from names, a classifier of the training data's labels on each
// word's first piece (its other pieces unlabelled). Validation: entity F1 as seqeval
// computes it (B-/I- labels grouped into entities; an entity right where its type and
// words are), token accuracy. The checkpoints tag words (`tfm classify`,
// tfm::Encoder::tag) and export as BertForTokenClassification.
struct TokenClassifierTask {
  // CoNLL columns (a word and its label a line, the label last; a blank line between
  // sentences), plain or .gz. Without `valid`, every 10th training sentence is held out.
  std::string train, valid;
  std::string vocab;   // the SentencePiece model, if not at the path the checkpoint records
  int64_t batch = 32;  // sentences per batch
  // As SentenceClassifierTask's, runs/tagger.
  TFM_API static TrainingOptions training_defaults();
};

struct TrainingResult {
  bool stopped = false;  // the stop token ended the run early (last.safetensors saved; resume it)
  int64_t steps = 0;     // the step the run ended at (counting a resumed run's earlier steps)
  // The last validation's metrics (e.g. {"valid_loss", 1.2}, {"bleu", 35.1}); empty if
  // the run had nothing to train.
  std::vector<std::pair<std::string, double>> metrics;
  std::string score_name;  // the metric that picks best.safetensors
  double best_score = 0;
  std::string report;      // the family's closing words (a sample, decoded copies...), also printed
};

// Trains, printing progress lines and the summary to `log` (null: the summary to standard
// output, progress to standard error, a bar on a terminal). Requesting
// a stop on `stop` ends the run after its current step, saving last.safetensors. Errors
// (bad data, settings, a used out_dir) are thrown as std::runtime_error with one line.
TFM_API TrainingResult train(const TrainingOptions& options, const TranslationTask& task, std::stop_token stop = {}, std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const CopyTask& task, std::stop_token stop = {}, std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const LanguageModelTask& task, std::stop_token stop = {},
                             std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const VitTask& task, std::stop_token stop = {}, std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const MaskedLmTask& task, std::stop_token stop = {}, std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const SentenceClassifierTask& task, std::stop_token stop = {},
                             std::ostream* log = nullptr);
TFM_API TrainingResult train(const TrainingOptions& options, const TokenClassifierTask& task, std::stop_token stop = {},
                             std::ostream* log = nullptr);

}  // namespace tfm
