// `tfm vocab`: trains SentencePiece subword vocabularies on training text.
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/text.h"
#include "data/vocab.h"
#include "io/output_file.h"
#include "tensor/error.h"

namespace tfm::cli {

void add_vocab_command(CLI::App& app, int&) {
  struct Options {
    std::string text, src, tgt, out = "vocab";
    bool joint = false, force = false;
    data::VocabOptions vocab;
  };
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("vocab", "Train subword vocabularies (SentencePiece BPE or unigram) on training text");
  cmd->add_option("--text", o->text, "One training text (plain or .gz), for a language model or encoder: writes PREFIX.model")
      ->check(CLI::ExistingFile);
  cmd->add_option("--src", o->src, "Source training text (plain or .gz)")->check(CLI::ExistingFile);
  cmd->add_option("--tgt", o->tgt, "Target training text")->check(CLI::ExistingFile);
  cmd->add_option("--out", o->out, "Output prefix: PREFIX.model for --text or --joint, else PREFIX.src.model and PREFIX.tgt.model")
      ->capture_default_str();
  cmd->add_flag("--joint", o->joint, "One vocabulary for both languages (lets the model share its embeddings)");
  cmd->add_option("--size", o->vocab.size, "Vocabulary size (per vocabulary)")->capture_default_str()->check(in_range<int64_t>(8, 1000000));
  cmd->add_option("--type", o->vocab.model_type, "Subword model")->capture_default_str()->check(CLI::IsMember({"bpe", "unigram"}));
  cmd->add_flag("--force", o->force, "Replace vocabulary files that exist (checkpoints trained with them then refuse the new ones)");
  cmd->callback([o] {
    require_usage(o->text.empty() ? !o->src.empty() && !o->tgt.empty() : o->src.empty() && o->tgt.empty() && !o->joint,
                  "vocab needs either --text, or --src and --tgt (with --joint for one vocabulary)");
    const bool one = o->joint || !o->text.empty();
    for (const std::string& path : one ? std::vector<std::string>{o->out + ".model"} : std::vector<std::string>{o->out + ".src.model", o->out + ".tgt.model"})
      TFM_CHECK(o->force || !std::filesystem::exists(path),
                path << ": exists (checkpoints trained with it refuse another vocabulary); --force replaces it, or give another --out");
    io::create_directories(std::filesystem::path(o->out).parent_path().string());  // before the seconds of training, as `train` does
    std::vector<std::string> src = data::read_lines(o->text.empty() ? o->src : o->text);
    std::vector<std::string> tgt = o->text.empty() ? data::read_lines(o->tgt) : std::vector<std::string>{};
    o->vocab.progress = &std::cerr;
    if (one) {
      src.insert(src.end(), tgt.begin(), tgt.end());
      o->vocab.origin = o->text.empty() ? o->src + " and " + o->tgt : o->text;
      data::Vocab::train(src, o->vocab, o->out + ".model");
      std::cout << "wrote " << o->out << ".model (" << o->vocab.size << " pieces, " << o->vocab.model_type << ")\n";
      return;
    }
    o->vocab.origin = o->src;
    data::Vocab::train(src, o->vocab, o->out + ".src.model");
    o->vocab.origin = o->tgt;
    data::Vocab::train(tgt, o->vocab, o->out + ".tgt.model");
    std::cout << "wrote " << o->out << ".src.model and " << o->out << ".tgt.model (" << o->vocab.size << " pieces each, "
              << o->vocab.model_type << ")\n";
  });
}

}  // namespace tfm::cli
