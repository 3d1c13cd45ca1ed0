// `tfm bert train`: a BERT-style encoder with the masked-language-model objective.
// `tfm embed`: sentence vectors from a trained encoder ([CLS] or mean-pooled).
#include <iomanip>
#include <iostream>
#include <sstream>
#include <memory>

#include "cli/commands.h"
#include "cli/trainer_flags.h"
#include "cli/validators.h"
#include "data/text.h"
#include "io/output_file.h"
#include "ops/linear_products.h"
#include "tensor/error.h"
#include "train/masked_lm.h"
#include "tfm/encoder.h"
#include "train/progress.h"

namespace tfm::cli {

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
}

void add_embed_command(CLI::App& app, int& exit_code) {
  struct Options {
    std::string checkpoint, input = "-", output = "-", spm, pool = "mean";
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("embed", "Sentence vectors from an encoder from `tfm bert train`: one line of numbers per input line");
  add_model_flag(cmd, o->checkpoint, "Checkpoint from `tfm bert train` (e.g. runs/bert/best.safetensors)");
  cmd->add_option("--input,-i", o->input, "Text, one sentence a line, plain or .gz ('-': standard input)")->capture_default_str();
  auto images = std::make_shared<std::vector<std::string>>();  // a ViT's image files instead of text (vit_command.cpp)
  cmd->add_option("--image", *images, "PNG or JPEG files, for a ViT (tfm's, or Hugging Face's ViT, ViTModel or DeiT): one vector per image")
      ->excludes("--input");
  cmd->add_option("--output,-o", o->output, "Vectors, one line per input line ('-': standard output, line by line); a file is replaced only once all are done")
      ->capture_default_str();
  cmd->add_option("--pool", o->pool, "mean: average of the token vectors; cls: the [CLS] vector. Images: pooler (ViTModel's pooler_output, "
                                     "tanh of a dense layer on the final [CLS]; the default where the model has a pooler) or cls (the final "
                                     "[CLS] state after the last LayerNorm, last_hidden_state[:, 0]; the default otherwise)")
      ->capture_default_str()->check(CLI::IsMember({"mean", "cls", "pooler"}));
  cmd->add_option("--vocab", o->spm, "SentencePiece model, if not at the path the checkpoint records")->check(CLI::ExistingFile);
  cmd->callback([o, images, cmd, &exit_code] {
    io::TextOutput out(o->output);  // first: a bad path is refused before the model loads
    if (!images->empty()) {
      out.write(image_features(o->checkpoint, *images, cmd->get_option("--pool")->count() ? o->pool : "", *cmd));
      out.finish();
      exit_code = 0;
      return;
    }
    const tfm::Encoder encoder(o->checkpoint, {o->spm, to_string(precision_flag(*cmd)), device_flag(*cmd)});
    data::LineReader in(o->input);
    int64_t truncated = 0;
    for (std::string line; in.next(line);) {
      const tfm::Embeddings e = encoder.embed({line}, o->pool);
      truncated += e.truncated;
      std::ostringstream vector;
      vector << std::setprecision(6);
      for (int64_t i = 0; i < e.dim; ++i) vector << (i ? " " : "") << e.values[static_cast<size_t>(i)];
      vector << "\n";
      out.write(vector.str());
    }
    out.finish();  // the vectors complete (and written) before the warning below
    if (truncated)
      std::cerr << "tfm: warning: " << training::count_of(truncated, "line", "lines") << " longer than "
                << training::count_of(encoder.max_tokens(), "token", "tokens") << (truncated == 1 ? " was" : " were") << " truncated\n";
    exit_code = 0;
  });
}

}  // namespace tfm::cli
