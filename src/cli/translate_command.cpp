// `tfm translate`: plain text in, plain text out, with beam or greedy search.
#include <iostream>
#include <memory>
#include <sstream>

#include "cli/commands.h"
#include "cli/validators.h"
#include "data/text.h"
#include "data/vocab.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "io/output_file.h"
#include "ops/reduced_precision.h"
#include "tensor/error.h"
#include "train/progress.h"

namespace tfm::cli {

namespace {

struct Options {
  std::string model, input = "-", output = "-", src_vocab, tgt_vocab;
  decode::SearchOptions search;
  int64_t batch = 32, chunk = 2000;
  int workers = 0;
  bool greedy = false;
};

void run(const Options& o, const CLI::App& cmd) {
  // Opened first, so that a directory or an unwritable path is refused before the model loads.
  io::TextOutput out_text(o.output);
  decode::TranslationModel tm = decode::TranslationModel::load(o.model, o.src_vocab, o.tgt_vocab);
  models::EncoderDecoder& model = *tm.model;
  const data::Vocab &src_vocab = tm.src_vocab, &tgt_vocab = tm.tgt_vocab;
  use_for_inference(model, cmd);

  decode::SearchOptions search = o.search;
  if (o.greedy) search.beam = 1;
  data::LineReader in(o.input);

  int64_t line_no = 0;
  std::vector<std::string> chunk;
  train::Counter progress("sentences translated");  // on a terminal only
  auto flush = [&] {
    std::vector<std::vector<int>> sources;
    for (size_t i = 0; i < chunk.size(); ++i) {
      const int64_t n = line_no - static_cast<int64_t>(chunk.size()) + static_cast<int64_t>(i) + 1;
      sources.push_back(src_vocab.encode(chunk[i]));
      if (sources.back().empty()) std::cerr << "tfm: warning: line " << n << " is empty; its translation is an empty line\n";
    }
    std::vector<std::vector<decode::Hypothesis>> results =
        decode::translate(model, sources, search, o.batch, o.workers, [&](int64_t n) { progress.add(n); });
    std::ostringstream out;
    for (size_t i = 0; i < results.size(); ++i) {
      const int64_t n = line_no - static_cast<int64_t>(chunk.size()) + static_cast<int64_t>(i);
      if (search.nbest == 1) {
        out << tgt_vocab.decode(results[i][0].tokens) << "\n";
        continue;
      }
      for (const decode::Hypothesis& h : results[i]) out << n << " ||| " << tgt_vocab.decode(h.tokens) << " ||| " << h.score << "\n";
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
  cmd->add_option("--length-penalty", o->search.length_penalty, "Rank by log-probability / length^penalty")->capture_default_str()->check(finite_number<float>());
  cmd->add_option("--max-len-a", o->search.max_len_a, "Maximum output length: a * source length + b")->capture_default_str()->check(finite_nonneg<float>());
  cmd->add_option("--max-len-b", o->search.max_len_b, "Maximum output length: a * source length + b")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--batch", o->batch, "Sentences per batch")->capture_default_str()->check(at_least<int64_t>(1));
  cmd->add_option("--workers", o->workers,
                  "Batches translated at once, sharing the threads (0: one per thread; 1: one batch at a time on all threads, "
                  "the lowest latency per batch)")
      ->capture_default_str()
      ->check(in_range(0, 1024));
  cmd->add_option("--src-vocab", o->src_vocab, "Source vocabulary (default: the path the checkpoint records)");
  cmd->add_option("--tgt-vocab", o->tgt_vocab, "Target vocabulary (default: the path the checkpoint records)");
  cmd->callback([o, cmd] {
    // Asking for more hypotheses than the search keeps would silently give fewer.
    const std::string nbest = "--nbest " + std::to_string(o->search.nbest);
    require_usage(o->search.nbest == 1 || !o->greedy, nbest + " needs beam search; --greedy keeps one hypothesis");
    require_usage(o->search.nbest <= o->search.beam, nbest + " must be at most --beam " + std::to_string(o->search.beam));
    run(*o, *cmd);
  });
}

}  // namespace tfm::cli
