// `tfm translate`: plain text in, plain text out, with beam or greedy search.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/text.h"
#include "io/output_file.h"
#include "ops/linear_products.h"
#include "tfm/translator.h"
#include "train/progress.h"

namespace tfm::cli {

namespace {

struct Options {
  std::string model, input = "-", output = "-";
  tfm::TranslatorOptions translator;
  tfm::TranslationOptions search;
  int64_t chunk = 2000;
  bool greedy = false;
};

void run(Options o, const CLI::App& cmd) {
  // Opened first, so that a directory or an unwritable path is refused before the model loads.
  io::TextOutput out_text(o.output);
  o.translator.precision = to_string(precision_flag(cmd));
  o.translator.device = device_flag(cmd);
  if (o.greedy) o.search.beam = 1;
  tfm::Translator translator(o.model, o.translator);
  data::LineReader in(o.input);

  int64_t line_no = 0;
  std::vector<std::string> chunk;
  training::Counter progress("sentences translated");  // on a terminal only
  auto flush = [&] {
    const int64_t first = line_no - static_cast<int64_t>(chunk.size());
    for (size_t i = 0; i < chunk.size(); ++i)
      if (chunk[i].find_first_not_of(" \t\r") == std::string::npos)
        std::cerr << "tfm: warning: line " << first + static_cast<int64_t>(i) + 1 << " is empty; its translation is an empty line\n";
    const std::vector<tfm::Translation> results = translator.submit(chunk, o.search, [&](int64_t n) { progress.add(n); }).get();
    for (size_t i = 0; i < results.size(); ++i)
      if (results[i].truncated)
        std::cerr << "tfm: warning: line " << first + static_cast<int64_t>(i) + 1 << " is longer than the model's "
                  << translator.max_source_tokens() << " source subwords; the rest was not translated\n";
    std::ostringstream out;
    for (size_t i = 0; i < results.size(); ++i) {
      if (o.search.nbest == 1) {
        out << results[i].hypotheses[0] << "\n";
        continue;
      }
      for (size_t h = 0; h < results[i].hypotheses.size(); ++h)
        out << first + static_cast<int64_t>(i) << " ||| " << results[i].hypotheses[h] << " ||| " << results[i].scores[h] << "\n";
    }
    out_text.write(out.str());  // standard output: stops at the first chunk that cannot be written
    chunk.clear();
  };
  for (std::string line; in.next(line);) {
    chunk.push_back(line);
    ++line_no;
    if (static_cast<int64_t>(chunk.size()) >= o.chunk) flush();
  }
  flush();
  out_text.finish();  // an existing file is replaced only by a complete translation
}

}  // namespace

void add_translate_command(CLI::App& app, int&) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("translate", "Translate plain text (one sentence a line) with a trained model");
  add_model_flag(cmd, o->model, "Checkpoint from `tfm train --train-src ...` (e.g. runs/x/best.safetensors)", /*positional=*/false);
  cmd->add_option("--input,-i", o->input, "Input text ('-': standard input)")->capture_default_str();
  cmd->add_option("--output,-o", o->output,
                  "Output text ('-': standard output); a file (or a symlink's target) is replaced only when translation completes, "
                  "a FIFO or device is written directly")
      ->capture_default_str();
  cmd->add_option("--beam", o->search.beam, "Beam size")->capture_default_str()->check(in_range<int64_t>(1, 64));
  cmd->add_flag("--greedy", o->greedy, "Greedy search (beam 1)");
  cmd->add_option("--nbest", o->search.nbest, "Hypotheses per sentence, written as 'line ||| text ||| score' (at most --beam)")->capture_default_str()->check(in_range<int64_t>(1, 64));
  cmd->add_option("--length-penalty", o->search.length_penalty, "Rank ended hypotheses by log-probability / length^penalty; tfm's models search as CTranslate2 (length: the words; done when --beam have ended), Hugging Face models as transformers (length: the words and the end; done when no open beam can beat the --beam best ended)")->capture_default_str()->check(finite_number<float>());
  const std::string lengths =
      "Maximum output length: a * source length + b (a 1.5, b 10 where not given; a Hugging Face model given neither stops at its "
      "generation config's max_length alone, as transformers does)";
  cmd->add_option("--max-len-a", o->search.max_len_a, lengths)->check(finite_nonneg<float>());
  cmd->add_option("--max-len-b", o->search.max_len_b, lengths)->check(at_least<int64_t>(0));
  cmd->add_option("--batch", o->translator.max_batch, "Sentences per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--workers", o->translator.workers,
                  "Batches translated at once, sharing the threads (0: one per thread; 1: one batch at a time on all threads, "
                  "the lowest latency per batch)")
      ->capture_default_str()
      ->check(in_range(0, 1024));
  cmd->add_option("--src-lang", o->search.source_language, "A many-to-many model's source language (M2M100's en, NLLB's eng_Latn, mBART-50's en_XX)");
  cmd->add_option("--tgt-lang", o->search.target_language, "A many-to-many model's target language (M2M100's de, NLLB's deu_Latn, mBART-50's de_DE)");
  cmd->add_option("--src-vocab", o->translator.src_vocab, "Source vocabulary (default: the path the checkpoint records)");
  cmd->add_option("--tgt-vocab", o->translator.tgt_vocab, "Target vocabulary (default: the path the checkpoint records)");
  cmd->callback([o, cmd] {
    // Asking for more hypotheses than the search keeps would silently give fewer.
    const std::string nbest = "--nbest " + std::to_string(o->search.nbest);
    require_usage(o->search.nbest == 1 || !o->greedy, nbest + " needs beam search; --greedy keeps one hypothesis");
    require_usage(o->search.nbest <= o->search.beam, nbest + " must be at most --beam " + std::to_string(o->search.beam));
    run(*o, *cmd);
  });
}

}  // namespace tfm::cli
