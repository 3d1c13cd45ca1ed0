// `tfm bert train`: a BERT-style encoder with the masked-language-model objective.
// `tfm embed`: sentence vectors from an encoder (mean-, max- or [CLS]-pooled).
// `tfm classify`: a BERT classifier's labels of sentences, or of their words (entities).
#include <iomanip>
#include <nlohmann/json.hpp>
#include <iostream>
#include <sstream>
#include <memory>
#include <optional>

#include "cli/commands.h"
#include "cli/trainer_flags.h"
#include "cli/stop_on_signal.h"
#include "cli/validators.h"
#include "data/text.h"
#include "io/output_file.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "train/masked_lm.h"
#include "tfm/encoder.h"
#include "train/progress.h"

namespace tfm::cli {

// `tfm bert classifier` and `tfm bert tagger`: a sentence or token classifier fine-tuned
// from a pretrained BERT on labelled sentences or words.
template <class Task>
void add_fine_tuning_command(CLI::App& bert, const char* name, const std::string& help, const std::string& data_help, int& exit_code) {
  struct Command {
    Task task;
    tfm::TrainingOptions training = Task::training_defaults();
    std::optional<TrainerFlags> flags;
  };
  auto c = std::make_shared<Command>();
  CLI::App* cmd = bert.add_subcommand(name, help);
  CLI::Option_group* data = cmd->add_option_group("data");
  data->add_option("--train", c->task.train, data_help)->required()->check(CLI::ExistingPath);
  data->add_option("--valid", c->task.valid, "Validation data, as --train (default: every 10th training sentence)")->check(CLI::ExistingPath);
  data->add_option("--batch", c->task.batch, "Sentences per batch")->capture_default_str()->check(at_least<int64_t>(1));
  data->add_option("--vocab", c->task.vocab, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  c->flags.emplace(cmd, c->training);
  cmd->callback([c, cmd, &exit_code] {
    tfm::TrainingOptions training = c->training;
    training.precision = to_string(precision_flag(*cmd));
    training.device = device_flag(*cmd);
    const StopOnSignal stop;  // Ctrl-C, SIGTERM, SIGHUP, a closed output pipe: stop after this step and save
    exit_code = tfm::train(training, c->task, stop.token()).stopped ? 130 : 0;
  });
}

void add_classifier_commands(CLI::App& bert, int& exit_code) {
  add_fine_tuning_command<tfm::SentenceClassifierTask>(
      bert, "classifier",
      "Fine-tune a sentence classifier (BertForSequenceClassification) from a pretrained BERT (--init-from: a checkpoint of tfm bert train "
      "or a Hugging Face directory) on labelled sentences; validation accuracy",
      "Labelled sentences: TSV (text<TAB>label), CSV (text,label; a header may name them), plain or .gz, or a folder DIR/<label>/<text files>",
      exit_code);
  add_fine_tuning_command<tfm::TokenClassifierTask>(
      bert, "tagger",
      "Fine-tune a token classifier (NER; BertForTokenClassification) from a pretrained BERT (--init-from) on labelled words; "
      "validation entity F1 (seqeval's)",
      "Labelled words in CoNLL columns (a word and its label a line, the label last; a blank line between sentences), plain or .gz", exit_code);
}

void add_bert_command(CLI::App& app, int& exit_code) {
  CLI::App* bert = app.add_subcommand("bert", "BERT-style encoders (masked language model)");
  help_without_subcommand(*bert, exit_code);
  CLI::App* cmd = bert->add_subcommand("train", "Train a masked-language-model encoder on a text file");
  auto c = std::make_shared<StackTrainCommand<tfm::MaskedLmTask>>(cmd, training::default_masked_lm());
  add_text_flags(cmd, c->task.data);
  c->model_flags.bind(c->model_flags.group()->add_option("--max-len", c->model.max_len, "Input length in tokens, [CLS] included")
                          ->capture_default_str()->check(in_range<int64_t>(2, 100000)),
                      "max_len");
  cmd->add_option("--batch", c->task.batch, "Windows of --max-len tokens per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--mask-fraction", c->task.mask_fraction, "Fraction of tokens chosen for prediction")
      ->capture_default_str()->check(strictly_between(0.0, 1.0));
  add_training_flags_and_run(cmd, c, exit_code);
  add_classifier_commands(*bert, exit_code);
}

namespace {

void warn_truncated(int64_t truncated, int64_t max_tokens) {
  if (truncated)
    std::cerr << "tfm: warning: " << training::count_of(truncated, "line", "lines") << " longer than "
              << training::count_of(max_tokens, "token", "tokens") << (truncated == 1 ? " was" : " were") << " truncated\n";
}

std::string fixed(float p, int digits = 4) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(digits) << p;
  return s.str();
}

// One sentence's verdict: "LABEL<tab>probability", then with `all` every label's
// "label=probability" (or, as JSON, {"label": ..., "probabilities": {...}}).
std::string sentence_line(const tfm::Encoder& encoder, const tfm::SentenceLabels& s, bool all, bool json_lines) {
  const std::vector<std::string>& labels = encoder.labels();
  const float* p = s.probabilities.data();
  std::string best = labels[static_cast<size_t>(s.labels[0])];
  if (encoder.multi_label()) {  // every label of probability 0.5 or more, comma-separated (none: "-")
    best.clear();
    for (int64_t k = 0; k < s.classes; ++k)
      if (p[k] >= 0.5f) best += (best.empty() ? "" : ",") + labels[static_cast<size_t>(k)];
    if (best.empty()) best = "-";
  }
  if (json_lines) {
    nlohmann::ordered_json probabilities;
    for (int64_t k = 0; k < s.classes; ++k) probabilities[labels[static_cast<size_t>(k)]] = p[k];
    return nlohmann::ordered_json{{"label", best}, {"probabilities", probabilities}}.dump() + "\n";
  }
  std::string line = best + "\t" + fixed(p[s.labels[0]]);
  for (int64_t k = 0; all && k < s.classes; ++k) line += "\t" + labels[static_cast<size_t>(k)] + "=" + fixed(p[k]);
  return line + "\n";
}

// One sentence's entities, "TYPE: text (score)" separated by tabs (none: an empty line);
// with `all` every word as "word/LABEL" first (or, as JSON, words and entities).
std::string tagged_line(const tfm::Encoder& encoder, const tfm::TaggedSentence& t, bool all, bool json_lines) {
  const std::vector<std::string>& labels = encoder.labels();
  if (json_lines) {
    nlohmann::ordered_json words = nlohmann::ordered_json::array(), entities = nlohmann::ordered_json::array();
    for (const tfm::TaggedWord& w : t.words)
      words.push_back({{"word", w.text}, {"label", labels[static_cast<size_t>(w.label)]}, {"probability", w.probability}});
    for (const tfm::Entity& e : t.entities)
      entities.push_back({{"type", e.type}, {"text", e.text}, {"first_word", e.first_word}, {"end_word", e.end_word}, {"score", e.score}});
    return nlohmann::ordered_json{{"entities", entities}, {"words", words}}.dump() + "\n";
  }
  std::string line;
  for (size_t i = 0; all && i < t.words.size(); ++i) line += (i ? " " : "") + t.words[i].text + "/" + labels[static_cast<size_t>(t.words[i].label)];
  for (const tfm::Entity& e : t.entities) line += (line.empty() ? "" : "\t") + e.type + ": " + e.text + " (" + fixed(e.score, 3) + ")";
  return line + "\n";
}

}  // namespace

void add_classify_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, input = "-", output = "-", spm, format = "text";
    bool all = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "classify", "Labels of text with a BERT classifier, one line per input line: a sentence classifier's label and probability "
                  "(BertForSequenceClassification), or a token classifier's entities (BertForTokenClassification: NER)");
  add_model_flag(cmd, o->checkpoint, "A BertForSequenceClassification or BertForTokenClassification: its tfm checkpoint");
  cmd->add_option("--input,-i", o->input, "Text, one sentence a line, plain or .gz ('-': standard input)")->capture_default_str();
  cmd->add_option("--output,-o", o->output, "Results, one line per input line ('-': standard output, line by line); a file is replaced only once all are done")
      ->capture_default_str();
  cmd->add_flag("--all", o->all, "Sentences: every label's probability after the best; tokens: every word's label before the entities");
  cmd->add_option("--format", o->format, "text (tab-separated) or json (one object a line)")->capture_default_str()->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  cmd->callback([o, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    const tfm::Encoder encoder(o->checkpoint, {o->spm, to_string(precision_flag(*cmd)), device_flag(*cmd)});
    const bool tokens = encoder.head() == "token", json_lines = o->format == "json";
    TFM_CHECK(tokens || encoder.head() == "sequence", o->checkpoint << ": is not a classifier (its head is " << encoder.head()
                                                                    << "); tfm classify takes a BertForSequenceClassification or BertForTokenClassification");
    data::LineReader in(o->input);
    int64_t truncated = 0;
    for (std::string line; in.next(line);) {
      if (tokens) {
        const tfm::TaggedSentence t = encoder.tag({line})[0];
        truncated += t.truncated;
        out.write(tagged_line(encoder, t, o->all, json_lines));
      } else {
        const tfm::SentenceLabels s = encoder.classify({line});
        truncated += s.truncated;
        out.write(sentence_line(encoder, s, o->all, json_lines));
      }
    }
    out.finish();
    warn_truncated(truncated, encoder.max_tokens());
    exit_code = 0;
  });
}

void add_embed_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, input = "-", output = "-", spm, pool;
    bool normalize = false;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("embed", "Sentence vectors from an encoder (from `tfm bert train`, a Hugging Face BERT or a "
                                              "sentence-transformers directory): one line of numbers per input line");
  add_model_flag(cmd, o->checkpoint, "Checkpoint from `tfm bert train` (e.g. runs/bert/best.safetensors)");
  cmd->add_option("--input,-i", o->input, "Text, one sentence a line, plain or .gz ('-': standard input)")->capture_default_str();
  auto images = std::make_shared<std::vector<std::string>>();  // a ViT's image files instead of text (vit_command.cpp)
  cmd->add_option("--image", *images, "PNG or JPEG files, for a ViT (tfm's, or Hugging Face's ViT, ViTModel or DeiT): one vector per image")
      ->excludes("--input");
  cmd->add_option("--output,-o", o->output, "Vectors, one line per input line ('-': standard output, line by line); a file is replaced only once all are done")
      ->capture_default_str();
  cmd->add_option("--pool", o->pool,
                  "Sentences: mean or max over every token vector the encoder read, [CLS] and [SEP] included (as sentence-transformers "
                  "pools), or cls, the [CLS] vector (default: a sentence-transformers directory's own pooling, else mean). Images: pooler "
                  "(ViTModel's pooler_output, tanh of a dense layer on the final [CLS]; the default where the model has a pooler) or cls "
                  "(the final [CLS] state after the last LayerNorm, last_hidden_state[:, 0]; the default otherwise)")
      ->check(CLI::IsMember({"mean", "cls", "max", "pooler"}));
  cmd->add_flag("--normalize", o->normalize, "Scale each vector to length 1 (a sentence-transformers directory with a Normalize module always does)");
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  cmd->callback([o, images, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    if (!images->empty()) {
      TFM_CHECK(!o->normalize, "--normalize scales sentence vectors; image features are written as the model gives them");
      out.write(image_features(o->checkpoint, *images, cmd->get_option("--pool")->count() ? o->pool : "", *cmd));
      out.finish();
      exit_code = 0;
      return;
    }
    const tfm::Encoder encoder(o->checkpoint, {o->spm, to_string(precision_flag(*cmd)), device_flag(*cmd)});
    data::LineReader in(o->input);
    int64_t truncated = 0;
    for (std::string line; in.next(line);) {
      const tfm::Embeddings e = encoder.embed({line}, o->pool, o->normalize);
      truncated += e.truncated;
      std::ostringstream vector;
      vector << std::setprecision(6);
      for (int64_t i = 0; i < e.dim; ++i) vector << (i ? " " : "") << e.values[static_cast<size_t>(i)];
      vector << "\n";
      out.write(vector.str());
    }
    out.finish();  // the vectors complete (and written) before the warning below
    warn_truncated(truncated, encoder.max_tokens());
    exit_code = 0;
  });
}

}  // namespace tfm::cli
