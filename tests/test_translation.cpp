// The translation pipeline on a small synthetic corpus: reading, batching,
// vocabularies, search, and training with exact resume.
#include <gtest/gtest.h>
#include <zlib.h>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <set>
#include <thread>

#include "autograd/autograd.h"
#include "data/batching.h"
#include "train/seq2seq.h"
#include "data/text.h"
#include "data/vocab.h"
#include "decode/beam_search.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "eval/metrics.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "ops/softmax.h"
#include "support/datasets.h"
#include "support/devices.h"
#include "support/fixture.h"
#include "support/compare.h"
#include "support/process.h"
#include "tensor/error.h"
#include "tensor/rng.h"
#include "train/progress.h"
#include "tfm/training.h"

namespace tfm {
namespace {

using testing::error_of;
using testing::SyntheticCorpus;
using testing::TempDir;
using testing::write_file;

// A vocabulary trained on other text: checkpoints from corpus() must refuse it.
void write_unrelated_vocab(const std::string& path) {
  std::vector<std::string> words;
  for (int i = 0; i < 200; ++i) words.push_back("zebra quokka axolotl " + std::to_string(i));
  data::VocabOptions vo;
  vo.size = 40;
  data::Vocab::train(words, vo, path);
}

SyntheticCorpus& corpus() {
  static SyntheticCorpus c;
  return c;
}

TEST(TextData, ReadsGzipAndCrlfAndNamesBadLines) {
  TempDir dir;
  const std::string gz = dir.path("a.txt.gz");
  gzFile f = gzopen(gz.c_str(), "wb");
  gzputs(f, "eins\r\nzwei\ndrei");
  gzclose(f);
  EXPECT_EQ(data::read_lines(gz), (std::vector<std::string>{"eins", "zwei", "drei"}));

  write_file(dir.path("bad.txt"), "fine\nbad \xff byte\n");
  EXPECT_EQ(error_of([&] { data::read_lines(dir.path("bad.txt")); }), dir.path("bad.txt") + ":2: invalid UTF-8");
  EXPECT_NE(error_of([&] { data::read_lines(dir.path("missing.txt")); }).find("cannot open"), std::string::npos);
  write_file(dir.path("trunc.gz"), std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x4b\x4c", 12));
  EXPECT_NE(error_of([&] { data::read_lines(dir.path("trunc.gz")); }).find("truncated or corrupted gzip"), std::string::npos);
}

TEST(TextData, ParallelCorpusChecksAlignmentAndSkipsEmptyPairs) {
  TempDir dir;
  write_file(dir.path("s"), "a\n\nc\nd\n");
  write_file(dir.path("t"), "A\nB\n \nD\n");
  data::ParallelCorpus c = data::read_parallel(dir.path("s"), dir.path("t"));
  EXPECT_EQ(c.src, (std::vector<std::string>{"a", "d"}));
  EXPECT_EQ(c.empty_skipped, 2);
  write_file(dir.path("t3"), "A\nB\nC\n");
  EXPECT_NE(error_of([&] { data::read_parallel(dir.path("s"), dir.path("t3")); }).find("has 4 lines but"), std::string::npos);
}

// What SentencePiece refuses is said in tfm's words: no source locations, no options tfm lacks.
TEST(Vocab, ExplainsWhatSentencePieceRefuses) {
  TempDir dir;
  data::VocabOptions vo;
  vo.size = 30;
  vo.origin = "corp.txt";
  EXPECT_EQ(error_of([&] { data::Vocab::train({"", " ", "\t"}, vo, dir.path("v.model")); }),
            "no non-empty lines in corp.txt to train a vocabulary on");
  std::vector<std::string> words;
  for (int i = 0; i < 200; ++i) words.push_back("zebra quokka axolotl " + std::to_string(i));  // 23 characters with the space
  vo.size = 8;
  EXPECT_EQ(error_of([&] { data::Vocab::train(words, vo, dir.path("v.model")); }),
            "a vocabulary of 8 pieces is too small for corp.txt: its 23 distinct characters and the 4 special tokens need --size 27 or more");
  vo.size = 27;
  EXPECT_NO_THROW(data::Vocab::train(words, vo, dir.path("v.model")));
  for (const char* type : {"bpe", "unigram"}) {
    vo.model_type = type, vo.size = 5000;
    const std::string e = error_of([&] { data::Vocab::train(words, vo, dir.path("v.model")); });
    const size_t at = e.find("use --size ");
    ASSERT_EQ(e.rfind("a vocabulary of 5000 pieces is too large for corp.txt, which yields at most ", 0), 0u) << e;
    ASSERT_NE(at, std::string::npos) << e;
    vo.size = std::stoll(e.substr(at + 11));  // the size it suggests works
    EXPECT_NO_THROW(data::Vocab::train(words, vo, dir.path("v.model"))) << type;
  }
}

// SentencePiece drops lines over 4192 bytes and its BPE aborts on 64 Ki-character words:
// long lines are cut into pieces instead, so a corpus of one long line still trains.
TEST(Vocab, TrainsOnLinesLongerThanSentencePieceTakes) {
  TempDir dir;
  std::string line;
  for (int i = 0; i < 20000; ++i) line += std::string(i % 3 ? "katze " : "hund ") + std::to_string(i % 10) + " ";
  data::VocabOptions vo;
  vo.size = 24;
  data::Vocab::train({line}, vo, dir.path("words.model"));
  EXPECT_EQ(data::Vocab::load(dir.path("words.model")).decode(data::Vocab::load(dir.path("words.model")).encode("hund 7")), "hund 7");
  vo.size = 12;
  data::Vocab::train({std::string(100000, 'a') + "\xc3\xa4"}, vo, dir.path("one_word.model"));  // no space to cut at
  EXPECT_EQ(data::Vocab::load(dir.path("one_word.model")).decode(data::Vocab::load(dir.path("one_word.model")).encode("aaa\xc3\xa4")), "aaa\xc3\xa4");
}

TEST(Vocab, RoundTripsAndRejectsOtherFiles) {
  data::Vocab v = data::Vocab::load(corpus().vocab);
  EXPECT_EQ(v.size(), 60);
  EXPECT_EQ(v.decode(v.encode("katze sitzt")), "katze sitzt");
  EXPECT_EQ(v.piece(data::Vocab::kEos), "</s>");
  EXPECT_NE(error_of([] { data::Vocab::load(testing::fixture_path("losses.safetensors")); }).find("not a valid SentencePiece model"),
            std::string::npos);
}

TEST(Batching, CoversEveryExampleOnceWithinTheTokenBudget) {
  data::Vocab v = data::Vocab::load(corpus().vocab);
  data::EncodedCorpus enc = data::encode_corpus(data::read_parallel(corpus().src, corpus().tgt), v, v, 100);
  ASSERT_EQ(enc.examples.size(), 300u);
  for (uint64_t seed : {0ull, 7ull}) {
    std::multiset<int64_t> seen;
    for (const auto& batch : data::make_batches(enc.examples, 64, seed)) {
      training::Seq2SeqBatch b = training::collate(enc.examples, batch, models::TransformerConfig());
      EXPECT_LE(b.src.rows() * std::max(b.src.cols(), b.tgt_in.cols()), 64);
      seen.insert(batch.begin(), batch.end());
    }
    EXPECT_EQ(seen.size(), 300u);
    EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 300u);
  }
  // Source ends with </s>; decoder input starts with <s>; targets end with </s>; then padding.
  training::Seq2SeqBatch b = training::collate(enc.examples, {0}, models::TransformerConfig());
  const data::Example& e = enc.examples[0];
  const std::vector<int> src = b.src.values(), tgt_in = b.tgt_in.values();
  EXPECT_EQ(src.back(), data::Vocab::kEos);
  EXPECT_EQ(tgt_in[0], data::Vocab::kBos);
  const std::vector<int> tgt_out = b.tgt_out.values();
  EXPECT_EQ(tgt_out[e.tgt.size()], data::Vocab::kEos);
  EXPECT_EQ(std::vector<int>(tgt_in.begin() + 1, tgt_in.end()), std::vector<int>(tgt_out.begin(), tgt_out.end() - 1));
}

TEST(BeamSearch, CachedDecodingEqualsRecomputingThePrefix) {
  testing::ModelFixture f = testing::load_model_fixture("model_pre_gelu.safetensors");
  auto model = f.make_model();
  model->eval();
  models::Tokens src = f.tokens("input.src");
  decode::SearchOptions o;
  o.beam = 3, o.nbest = 3, o.bos = 1, o.eos = 2, o.max_len_a = 1.0f, o.max_len_b = 4;
  auto cached = decode::beam_search(*model, src, o);
  o.use_cache = false;
  auto full = decode::beam_search(*model, src, o);
  ASSERT_EQ(cached.size(), full.size());
  for (size_t b = 0; b < cached.size(); ++b) {
    ASSERT_EQ(cached[b].size(), 3u);
    ASSERT_EQ(cached[b].size(), full[b].size());
    for (size_t k = 0; k < cached[b].size(); ++k) {
      EXPECT_EQ(cached[b][k].tokens, full[b][k].tokens) << "sentence " << b << " hypothesis " << k;
      EXPECT_NEAR(cached[b][k].score, full[b][k].score, 1e-5);
    }
    EXPECT_GE(cached[b][0].score, cached[b][1].score);
  }
}

// Each hypothesis's log-probability is what the model gives its tokens when it reads
// them whole (teacher forcing, one sentence alone, no cache): the search's bookkeeping
// (which beam each child came from, the first step's single beam per sentence,
// sentences leaving the batch) never mixes up a history and its score.
TEST(BeamSearch, HypothesesScoreWhatTheModelGivesTheirTokensPerWord) {
  testing::ModelFixture f = testing::load_model_fixture("model_pre_gelu.safetensors");
  auto model = f.make_model();
  model->eval();
  autograd::NoGradGuard no_grad;
  models::Tokens src = f.tokens("input.src");
  decode::SearchOptions o;
  o.beam = 4, o.nbest = 4, o.bos = 1, o.eos = 2, o.max_len_a = 1.0f, o.max_len_b = 3;
  const auto result = decode::beam_search(*model, src, o);
  ASSERT_EQ(static_cast<int64_t>(result.size()), src.rows());
  const int pad = f.config.pad_id;
  for (int64_t b = 0; b < src.rows(); ++b) {
    const std::vector<int> row(src.data() + b * src.cols(), src.data() + (b + 1) * src.cols());
    const models::Tokens one(row, 1, src.cols());
    const int64_t max_len = std::count_if(row.begin(), row.end(), [&](int t) { return t != pad; }) + *o.max_len_b;
    ASSERT_EQ(result[b].size(), 4u);
    for (const decode::Hypothesis& h : result[b]) {
      const bool ended = static_cast<int64_t>(h.tokens.size()) < max_len;  // else cut at the length limit, no end symbol
      std::vector<int> targets = h.tokens;
      if (ended) targets.push_back(o.eos);
      std::vector<int> ids{o.bos};
      ids.insert(ids.end(), targets.begin(), targets.end() - 1);
      const models::Tokens input(ids, 1, static_cast<int64_t>(targets.size()));
      Tensor log_probs = ops::log_softmax(model->generator->logits(model->forward(one, input)));  // [1, len, vocab]
      const int64_t V = log_probs.size(-1);
      double expected = 0;
      for (size_t i = 0; i < targets.size(); ++i) expected += log_probs.data()[static_cast<int64_t>(i) * V + targets[i]];
      EXPECT_NEAR(h.log_prob, expected, 1e-4) << "sentence " << b << ", " << h.tokens.size() << " tokens";
      // Ranked as CTranslate2 ranks (length penalty 1): by log-probability per word, the end symbol not counted.
      if (!h.tokens.empty()) EXPECT_DOUBLE_EQ(h.score, h.log_prob / static_cast<double>(h.tokens.size()));
    }
  }
}

// Sentences sorted into batches come back in input order, each as it would alone (padding
// and batch order do not leak); an empty source stays empty; an error reaches the caller.
TEST(Translator, BatchesGiveResultsInInputOrderAsEachSentenceAlone) {
  testing::ModelFixture f = testing::load_model_fixture("model_pre_gelu.safetensors");
  auto model = f.make_model();
  model->eval();
  decode::SearchOptions o;
  o.beam = 2, o.bos = 1, o.eos = 2, o.max_len_a = 1.0f, o.max_len_b = 3;
  Rng rng(11);
  std::vector<std::vector<int>> sources(23);
  for (size_t i = 0; i < sources.size(); ++i)
    if (i != 7)
      for (int64_t n = rng.randint(1, 9); n > 0; --n) sources[i].push_back(static_cast<int>(rng.randint(3, f.config.src_vocab)));
  const auto batched = decode::translate(*model, sources, o, 3);
  ASSERT_EQ(batched.size(), sources.size());
  EXPECT_TRUE(batched[7][0].tokens.empty());
  for (size_t i : {0, 5, 22}) {
    const auto alone = decode::translate(*model, {sources[i]}, o, 3);
    EXPECT_EQ(alone[0][0].tokens, batched[i][0].tokens) << "sentence " << i;
    EXPECT_NEAR(alone[0][0].score, batched[i][0].score, 1e-5) << "sentence " << i;
  }
  sources[20] = {static_cast<int>(f.config.src_vocab) + 5};  // not in the vocabulary
  EXPECT_NE(error_of([&] { decode::translate(*model, sources, o, 3); }), "");
}

// What beam search is for: on a trained model (tests/fixtures/beam/make.sh: 64 wide,
// 2 + 2 layers, 3,000 steps of Multi30k), beam 4 translates val's first 500 sentences
// clearly better than greedy search does.
TEST(TranslationQuality, BeamFourBeatsGreedyOnATrainedModel) {
  const std::string dir = testing::fixture_path("beam");
  decode::TranslationModel tm = decode::TranslationModel::load(dir + "/mt.safetensors");
  std::vector<std::vector<int>> sources;
  for (const std::string& line : data::read_lines(dir + "/val500.de")) sources.push_back(tm.src_vocab.encode(line));
  const std::vector<std::string> refs = data::read_lines(dir + "/val500.en");
  auto bleu = [&](int64_t beam) {
    decode::SearchOptions o;
    o.beam = beam;
    std::vector<std::string> hyps;
    for (const auto& h : decode::translate(*tm.model, sources, o, 32)) hyps.push_back(tm.tgt_vocab.decode(h[0].tokens));
    return eval::corpus_bleu(hyps, refs);
  };
  const eval::BleuScore greedy = bleu(1), beam4 = bleu(4);
  EXPECT_GE(beam4.score, greedy.score + 0.8) << "greedy " << greedy.format() << "\nbeam 4 " << beam4.format();
}

struct MtRun {
  TrainingOptions options = TranslationTask::training_defaults();
  TranslationTask task;
};

MtRun tiny_run(const TempDir& dir, const std::string& out, int64_t max_steps) {
  write_file(dir.path("tiny.json"), R"({"d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1,
                                        "dropout": 0.1, "norm_first": true})");
  MtRun r;
  r.task.train_src = r.task.valid_src = corpus().src;
  r.task.train_tgt = r.task.valid_tgt = corpus().tgt;
  r.task.src_vocab = r.task.tgt_vocab = corpus().vocab;
  r.task.config = dir.path("tiny.json");
  r.task.max_tokens = 400, r.task.valid_sentences = 20;
  r.options.out_dir = dir.path(out);
  r.options.validate_every = 4, r.options.schedule.warmup = 4, r.options.log_every = 1, r.options.max_steps = max_steps;
  return r;
}

// Trains through the library's call (tfm::train), logging to `log`.
TrainingResult run_training(const MtRun& r, std::ostream& log) { return tfm::train(r.options, r.task, {}, &log); }

TEST(TranslationTraining, ResumeEndsWithTheSameWeightsAsAnUninterruptedRun) {
  TempDir dir;
  std::ostringstream log;
  MtRun straight = tiny_run(dir, "straight", 8);
  ASSERT_FALSE(run_training(straight, log).stopped) << log.str();

  MtRun first = tiny_run(dir, "split", 4);
  ASSERT_FALSE(run_training(first, log).stopped) << log.str();
  MtRun rest = tiny_run(dir, "split", 8);
  rest.options.resume = dir.path("split/last.safetensors");
  ASSERT_FALSE(run_training(rest, log).stopped) << log.str();

  testing::expect_same_checkpoint_tensors(dir.path("straight/last.safetensors"), dir.path("split/last.safetensors"));
  EXPECT_TRUE(std::filesystem::exists(dir.path("straight/best.safetensors")));
  EXPECT_NE(testing::read_file(dir.path("straight/metrics.jsonl")).find("\"bleu\""), std::string::npos);
}

// On the simulated device (tensor/device.h: the CPU's kernels, its memory out of reach of
// everything else), resumed there, with validation's greedy decoding and BLEU: the
// CPU's weights bit for bit.
TEST(TranslationTraining, TrainsOnTheSimulatedDeviceAsOnTheCpu) {
  TempDir dir;
  const MtRun run = tiny_run(dir, "", 8);
  testing::expect_the_simulated_device_trains_and_resumes_as_the_cpu(dir.path(""), run.options, run.task);
}

// No waits inside a training step: on the simulated device, whose copies to the host
// stand for a GPU's waits, a step copies back once (its losses and gradient norm:
// OptimizationStep::gradients), whatever its batch's ids, packed sequences and embeddings
// (indices go from the host to the device, checked on the host, never back).
TEST(TranslationTraining, AStepOnTheSimulatedDeviceCopiesToTheHostOnce) {
  TempDir dir;
  std::ostringstream log;
  auto copies_for = [&](int64_t steps) {
    MtRun run = tiny_run(dir, "steps" + std::to_string(steps), steps);
    run.options.device = "sim", run.options.validate_every = 0, run.task.valid_sentences = 0;
    const size_t before = simulated_copies_to_host();
    EXPECT_FALSE(run_training(run, log).stopped) << log.str();
    return static_cast<int64_t>(simulated_copies_to_host() - before);
  };
  const int64_t four = copies_for(4), eight = copies_for(8);
  EXPECT_EQ(eight - four, 4) << "copies to the host: " << four << " in 4 steps, " << eight << " in 8";
}

TEST(TranslationTraining, RefusesACheckpointFromOtherVocabularies) {
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 1);
  ASSERT_FALSE(run_training(o, log).stopped);
  write_unrelated_vocab(dir.path("other.model"));
  o.task.src_vocab = o.task.tgt_vocab = dir.path("other.model");
  o.options.resume = dir.path("run/last.safetensors");
  o.options.max_steps = 2;
  EXPECT_NE(error_of([&] { run_training(o, log); }).find("was trained with other vocabularies"), std::string::npos);
}

// A checkpoint trained for a few steps through the CLI, shared by the CLI tests.
struct TrainedModel {
  TempDir dir;
  std::string model;
  TrainedModel() {
    write_file(dir.path("tiny.json"), R"({"d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1})");
    const SyntheticCorpus& c = corpus();
    testing::CliResult r = testing::run_tfm("train --train-src " + c.src + " --train-tgt " + c.tgt + " --valid-src " + c.src +
                                            " --valid-tgt " + c.tgt + " --src-vocab " + c.vocab + " --tgt-vocab " + c.vocab +
                                            " --config " + dir.path("tiny.json") + " --steps 3 --valid-sentences 5 --out " + dir.path("run"));
    EXPECT_EQ(r.code, 0) << r.output;
    model = dir.path("run/last.safetensors");
  }
};

TrainedModel& trained() {
  static TrainedModel m;
  return m;
}

// What a Counter prints on a pseudo-terminal (everything its master side has received).
std::string counter_output_on_a_terminal(const std::function<void(training::Counter&)>& use) {
  const int master = ::posix_openpt(O_RDWR | O_NOCTTY);
  EXPECT_TRUE(master >= 0 && ::grantpt(master) == 0 && ::unlockpt(master) == 0);
  std::FILE* terminal = std::fopen(::ptsname(master), "w");
  EXPECT_NE(terminal, nullptr);
  {
    training::Counter counter("sentences translated", terminal);
    use(counter);
  }
  std::fclose(terminal);
  std::string got;
  char buf[256];
  for (pollfd p{master, POLLIN, 0}; ::poll(&p, 1, 100) > 0 && (p.revents & POLLIN);) {
    const ssize_t n = ::read(master, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(master);
  return got;
}

// Long translations show how far they are on a terminal, and nothing in pipelines.
TEST(TranslateCli, CountsSentencesOnATerminalOnly) {
  const std::string tty = counter_output_on_a_terminal([](training::Counter& c) { c.add(3), c.add(4); });
  EXPECT_NE(tty.find("\rsentences translated: 3 ("), std::string::npos) << tty;
  EXPECT_NE(tty.find("\rsentences translated: 7 ("), std::string::npos) << tty;
  EXPECT_EQ(tty.back(), '\n') << tty;  // the line is ended for what follows
  EXPECT_EQ(counter_output_on_a_terminal([](training::Counter&) {}), "");

  TempDir dir;
  write_file(dir.path("in.txt"), "haus blau\nkatze sitzt\n");
  const std::string translate = std::string(TFM_BINARY) + " translate --model " + trained().model + " -i " + dir.path("in.txt");
  testing::CliResult piped = testing::run_command(translate + " -o " + dir.path("out.txt"));
  ASSERT_EQ(piped.code, 0) << piped.output;
  EXPECT_EQ(piped.output, "");
  testing::CliResult terminal = testing::run_command("script -qec '" + translate + " -o " + dir.path("out.txt") + "' /dev/null");
  ASSERT_EQ(terminal.code, 0) << terminal.output;
  EXPECT_NE(terminal.output.find("sentences translated: 2 ("), std::string::npos) << terminal.output;
}

TEST(TranslateCli, KeepsLineAlignmentAcrossEmptyLinesAndWritesNBest) {
  TempDir dir;
  write_file(dir.path("in.txt"), "haus blau\n\nkatze sitzt\n");
  testing::CliResult r = testing::run_tfm("translate --model " + trained().model + " -i " + dir.path("in.txt") + " -o " + dir.path("out.txt"));
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("warning: line 2 is empty"), std::string::npos) << r.output;
  const std::string out = testing::read_file(dir.path("out.txt"));
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 3) << out;
  EXPECT_EQ(out.substr(out.find('\n') + 1, 1), "\n") << "line 2 must be the empty translation";

  testing::CliResult n = testing::run_tfm("translate --model " + trained().model + " --beam 3 --nbest 2 < " + dir.path("in.txt"));
  ASSERT_EQ(n.code, 0) << n.output;
  EXPECT_NE(n.output.find("0 ||| "), std::string::npos) << n.output;
  EXPECT_NE(n.output.find("2 ||| "), std::string::npos) << n.output;
}

// --precision bf16 and int8 (either side of the subcommand) translate every line.
TEST(TranslateCli, TranslatesInBf16AndInt8) {
  TempDir dir;
  write_file(dir.path("in.txt"), "haus blau\nkatze sitzt\n");
  for (const std::string flags : {"--precision bf16 translate", "translate --precision int8"}) {
    testing::CliResult r = testing::run_tfm(flags + " --model " + trained().model + " --beam 2 -i " + dir.path("in.txt") +
                                            " -o " + dir.path("out.txt"));
    ASSERT_EQ(r.code, 0) << flags << ": " << r.output;
    const std::string out = testing::read_file(dir.path("out.txt"));
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << flags << ": " << out;
  }
}

TEST(TranslateCli, RefusesAnotherVocabularyAndNeverClobbersOutputOnError) {
  TempDir dir;
  write_unrelated_vocab(dir.path("other.model"));
  testing::CliResult r = testing::run_tfm("translate --model " + trained().model + " --src-vocab " + dir.path("other.model") + " < /dev/null");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.output.find("is not the src vocabulary"), std::string::npos) << r.output;

  write_file(dir.path("out.txt"), "KEEP");
  write_file(dir.path("bad.txt"), "haus\nbad \xff\n");
  testing::CliResult bad = testing::run_tfm("translate --model " + trained().model + " -i " + dir.path("bad.txt") + " -o " + dir.path("out.txt"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find(":2: invalid UTF-8"), std::string::npos) << bad.output;
  EXPECT_EQ(testing::read_file(dir.path("out.txt")), "KEEP");
  EXPECT_FALSE(std::filesystem::exists(dir.path("out.txt.tmp")));
}

// -o through a symlink or into a FIFO writes what they name and keeps them; a directory,
// the file-size limit or a full standard output are one-line errors with status 1, and
// no temporary file stays behind.
TEST(TranslateCli, WritesThroughSymlinksAndFifosAndReportsEveryFailedWrite) {
  namespace fs = std::filesystem;
  TempDir dir;
  std::string lines;
  for (int i = 0; i < 300; ++i) lines += "haus blau katze\n";
  write_file(dir.path("in.txt"), lines);
  const std::string translate = "translate --model " + trained().model + " --greedy --max-len-a 0 --max-len-b 8 -i " + dir.path("in.txt");
  auto line_count = [](const std::string& text) { return std::count(text.begin(), text.end(), '\n'); };

  write_file(dir.path("real.txt"), "old");
  fs::create_symlink("real.txt", dir.path("link.txt"));
  testing::CliResult link = testing::run_tfm(translate + " -o " + dir.path("link.txt"));
  ASSERT_EQ(link.code, 0) << link.output;
  EXPECT_TRUE(fs::is_symlink(dir.path("link.txt")));
  EXPECT_EQ(line_count(testing::read_file(dir.path("real.txt"))), 300);

  const std::string fifo = dir.path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  testing::CliResult piped = testing::run_command("cat " + fifo + " > " + dir.path("got.txt") + " & " + TFM_BINARY + " " + translate +
                                                  " -o " + fifo + "; wait");
  ASSERT_EQ(piped.code, 0) << piped.output;
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_EQ(line_count(testing::read_file(dir.path("got.txt"))), 300);

  fs::create_directories(dir.path("d"));
  testing::CliResult directory = testing::run_tfm(translate + " -o " + dir.path("d"));
  EXPECT_EQ(directory.code, 1);
  EXPECT_EQ(directory.output, "tfm: error: cannot write " + dir.path("d") + ": it is a directory\n");
  EXPECT_FALSE(fs::exists(dir.path("d.tmp")));

  ASSERT_GT(testing::read_file(dir.path("real.txt")).size(), 1024u) << "the output must exceed the 1 KiB limit below";
  write_file(dir.path("out.txt"), "KEEP");
  testing::CliResult limited =
      testing::run_command("bash -c 'ulimit -f 1; exec " + std::string(TFM_BINARY) + " " + translate + " -o " + dir.path("out.txt") + "'");
  EXPECT_EQ(limited.code, 1) << limited.output;
  EXPECT_EQ(limited.output, "tfm: error: cannot write " + dir.path("out.txt") + ": write failed (File too large); the previous file is untouched\n");
  EXPECT_EQ(testing::read_file(dir.path("out.txt")), "KEEP");
  EXPECT_FALSE(fs::exists(dir.path("out.txt.tmp")));

  testing::CliResult full = testing::run_command("{ " + std::string(TFM_BINARY) + " " + translate + " > /dev/full; }");
  EXPECT_EQ(full.code, 1);
  EXPECT_EQ(full.output, "tfm: error: writing stdout: No space left on device\n");
}

// Ctrl-C while the output is being written (here: waiting for input) removes the temporary file.
TEST(TranslateCli, CtrlCLeavesNoTemporaryFile) {
  TempDir dir;
  const std::string fifo = dir.path("in.fifo"), out = dir.path("out.txt");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t pid = testing::start_tfm({"translate", "--model", trained().model, "-i", fifo, "-o", out}, dir.path("log"));
  for (int i = 0; i < 6000 && !std::filesystem::exists(out + ".tmp"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_TRUE(std::filesystem::exists(out + ".tmp"));
  ::kill(pid, SIGINT);
  EXPECT_EQ(testing::wait_tfm(pid).code, 128 + SIGINT) << testing::read_file(dir.path("log"));
  EXPECT_FALSE(std::filesystem::exists(out + ".tmp"));
  EXPECT_FALSE(std::filesystem::exists(out));
}

TEST(TranslateCli, ReadsGzipAndRefusesDirectoriesAndNulBytes) {
  TempDir dir;
  write_file(dir.path("in.txt"), "haus blau\nkatze sitzt\n");
  ASSERT_EQ(testing::run_command("gzip -c " + dir.path("in.txt") + " > " + dir.path("in.txt.gz")).code, 0);
  testing::CliResult plain = testing::run_tfm("translate --model " + trained().model + " --greedy -i " + dir.path("in.txt"));
  testing::CliResult gz = testing::run_tfm("translate --model " + trained().model + " --greedy -i " + dir.path("in.txt.gz"));
  ASSERT_EQ(plain.code, 0) << plain.output;
  ASSERT_EQ(gz.code, 0) << gz.output;
  EXPECT_EQ(gz.output, plain.output);

  testing::CliResult d = testing::run_tfm("translate --model " + trained().model + " -i " + dir.path(""));
  EXPECT_EQ(d.code, 1);
  EXPECT_NE(d.output.find("is a directory, not a text file"), std::string::npos) << d.output;
  write_file(dir.path("nul.txt"), std::string("haus\nkat\0ze\n", 12));
  testing::CliResult nul = testing::run_tfm("translate --model " + trained().model + " -i " + dir.path("nul.txt"));
  EXPECT_EQ(nul.code, 1);
  EXPECT_NE(nul.output.find("nul.txt:2: contains a NUL byte"), std::string::npos) << nul.output;
}

TEST(TranslateCli, RefusesMoreHypothesesThanTheSearchKeeps) {
  for (const std::string flags : {"--nbest 2 --greedy", "--nbest 5 --beam 2"}) {
    testing::CliResult r = testing::run_tfm("translate --model " + trained().model + " " + flags + " < /dev/null");
    EXPECT_EQ(r.code, 2) << flags;
    EXPECT_NE(r.output.find(flags == "--nbest 2 --greedy" ? "--greedy keeps one hypothesis" : "--nbest 5 must be at most --beam 2"),
              std::string::npos)
        << r.output;
  }
}

// tfm translate streams its input: ten times the lines may not cost more memory.
// Each line is long (so holding the input, its tokens or the output would show) and
// the output short (so the test stays fast).
TEST(TranslateCli, MemoryStaysBoundedAsTheInputGrows) {
  TempDir dir;
  std::string line;
  for (int i = 0; i < 30; ++i) line += (i ? " " : "") + std::string(i % 2 ? "katze" : "haus");
  auto peak_kib = [&](int lines) {
    std::string text;
    for (int i = 0; i < lines; ++i) text += line + "\n";
    write_file(dir.path("in.txt"), text);
    const pid_t pid = testing::start_tfm({"translate", "--model", trained().model, "--greedy", "--max-len-a", "0", "--max-len-b", "2", "-i",
                                          dir.path("in.txt"), "-o", dir.path("out.txt")},
                                         dir.path("log.txt"));
    const testing::Finished f = testing::wait_tfm(pid);
    EXPECT_EQ(f.code, 0) << testing::read_file(dir.path("log.txt"));
    const std::string out = testing::read_file(dir.path("out.txt"));
    EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), lines);
    return f.max_rss_kib;
  };
  const long small = peak_kib(4000), large = peak_kib(40000);  // inputs of 0.6 MB and 6 MB
  std::cout << "  peak memory: " << small / 1024 << " MiB for 4,000 lines, " << large / 1024 << " MiB for 40,000 lines\n";
  // Holding the input and its tokens would add over 12 MiB.
  EXPECT_LT(large - small, 4 * 1024) << "memory grew with the input: the translator no longer streams";
}

TEST(TrainCli, CtrlCSavesACheckpointAndExits) {
  TempDir dir;
  const SyntheticCorpus& c = corpus();
  testing::CliResult r = testing::run_tfm("train --train-src " + c.src + " --train-tgt " + c.tgt + " --valid-src " + c.src + " --valid-tgt " +
                                          c.tgt + " --src-vocab " + c.vocab + " --tgt-vocab " + c.vocab + " --config " +
                                          dir.path("none.json") + " --out " + dir.path("run") + " 2>&1; echo");
  EXPECT_NE(r.output.find("none.json"), std::string::npos) << "a missing config is reported: " << r.output;
  write_file(dir.path("tiny.json"), R"({"d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1})");
  // Ctrl-C once training is under way (the first progress line), however slow the machine;
  // SIGHUP (the terminal closed) the same.
  for (const int sig : {SIGINT, SIGHUP}) {
    const std::string run = dir.path("run" + std::to_string(sig)), log = dir.path("log" + std::to_string(sig));
    const pid_t pid = testing::start_tfm({"train", "--train-src", c.src, "--train-tgt", c.tgt, "--valid-src", c.src, "--valid-tgt", c.tgt,
                                          "--src-vocab", c.vocab, "--tgt-vocab", c.vocab, "--config", dir.path("tiny.json"),
                                          "--validate-every", "100000", "--epochs", "100000", "--log-every", "1", "--out", run},
                                         log);
    for (int i = 0; i < 6000 && testing::read_file(log).find("step 1/") == std::string::npos; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ::kill(pid, sig);
    EXPECT_EQ(testing::wait_tfm(pid).code, 130) << testing::read_file(log);
    EXPECT_NE(testing::read_file(log).find("interrupted: saved"), std::string::npos) << testing::read_file(log);
    EXPECT_NO_THROW(io::read_safetensors(run + "/last.safetensors"));
  }
}

// The reader of standard output gone (`| head -1`): the run stops after its step, saved,
// rather than dying of SIGPIPE with its steps since the last save lost.
TEST(TrainCli, AClosedOutputPipeStopsTheRunSaved) {
  TempDir dir;
  const SyntheticCorpus& c = corpus();
  write_file(dir.path("tiny.json"), R"({"d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1})");
  testing::CliResult r = testing::run_command("bash -c 'set -o pipefail; " + std::string(TFM_BINARY) + " train --train-src " + c.src + " --train-tgt " +
                                              c.tgt + " --valid-src " + c.src + " --valid-tgt " + c.tgt + " --src-vocab " + c.vocab +
                                              " --tgt-vocab " + c.vocab + " --config " + dir.path("tiny.json") +
                                              " --validate-every 2 --epochs 100000 --out " + dir.path("run") + " 2>" + dir.path("log") +
                                              " | head -1'");
  // (Killed by SIGPIPE it would exit 141; ignoring it without stopping, it would train its
  // 100,000 epochs and time out.)
  EXPECT_EQ(r.code, 1) << testing::read_file(dir.path("log"));
  EXPECT_NE(testing::read_file(dir.path("log")).find("tfm: error: writing stdout: "), std::string::npos) << testing::read_file(dir.path("log"));
  EXPECT_NO_THROW(io::read_safetensors(dir.path("run/last.safetensors"))) << testing::read_file(dir.path("log"));
}

TEST(VocabCli, TrainsSeparateUnigramVocabularies) {
  TempDir dir;
  // Into a directory that does not exist yet (created, as `train` creates its --out).
  testing::CliResult r = testing::run_tfm("vocab --src " + corpus().src + " --tgt " + corpus().tgt + " --size 30 --type unigram --out " +
                                          dir.path("new/v"));
  ASSERT_EQ(r.code, 0) << r.output;
  // Seconds of SentencePiece are announced, not silent (on stderr).
  EXPECT_NE(r.output.find("training a 30-piece unigram vocabulary on 300 sentences of " + corpus().src + "...\ntrained in "), std::string::npos)
      << r.output;
  EXPECT_EQ(data::Vocab::load(dir.path("new/v.src.model")).size(), 30);
  EXPECT_EQ(data::Vocab::load(dir.path("new/v.tgt.model")).decode(data::Vocab::load(dir.path("new/v.tgt.model")).encode("red cat")), "red cat");
  testing::CliResult bad = testing::run_tfm("vocab --src " + corpus().src + " --tgt " + corpus().tgt + " --type wordpiece");
  EXPECT_NE(bad.code, 0);
}

TEST(AttentionCli, DrawsAHeatmapForEveryKind) {
  TempDir dir;
  for (const char* kind : {"encoder", "decoder", "cross"}) {
    const std::string png = dir.path(std::string(kind) + ".png");
    testing::CliResult r = testing::run_tfm("attention --model " + trained().model + " --src 'haus blau' --kind " + kind + " --out " + png);
    ASSERT_EQ(r.code, 0) << r.output;
    EXPECT_EQ(testing::read_file(png).substr(1, 3), "PNG") << kind;
  }
  testing::CliResult bad = testing::run_tfm("attention --model " + trained().model + " --src 'haus' --layer 7 --out " + dir.path("x.png"));
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.output.find("--layer 7 outside"), std::string::npos) << bad.output;
  testing::CliResult utf8 = testing::run_tfm("attention --model " + trained().model + " --src \"$(printf 'haus \\377')\" -o " + dir.path("x.png"));
  EXPECT_EQ(utf8.code, 1);
  EXPECT_NE(utf8.output.find("--src: invalid UTF-8"), std::string::npos) << utf8.output;
  testing::CliResult vit_flag = testing::run_tfm("attention --model " + trained().model + " --src haus --image 3 -o " + dir.path("x.png"));
  EXPECT_EQ(vit_flag.code, 1);
  EXPECT_NE(vit_flag.output.find("--image and --data are for ViT models"), std::string::npos) << vit_flag.output;
}

TEST(TranslationTraining, StopsEarlyWhenBleuStopsImproving) {
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 10);
  o.options.schedule.lr = 0.0f;  // the model never changes, so BLEU never improves after the first validation
  o.options.validate_every = 1, o.options.patience = 2;
  ASSERT_FALSE(run_training(o, log).stopped);
  EXPECT_NE(log.str().find("early stop: no better bleu in 2 validations"), std::string::npos) << log.str();
  io::Checkpoint info = io::checkpoint_info(io::read_safetensors(dir.path("run/last.safetensors")), "last");
  EXPECT_NE(info.train_state.find("\"step\":3"), std::string::npos) << info.train_state;
}

// A checkpoint of a tiny run's weights times 1e36: a forward pass from it overflows.
std::string overflowing_weights(const TempDir& dir) {
  std::ostringstream log;
  run_training(tiny_run(dir, "seed", 1), log);
  io::SafeTensors weights = io::read_safetensors(dir.path("seed/last.safetensors"));
  for (auto& [name, t] : weights.tensors) {
    std::vector<float> v = t.to_vector();
    for (float& x : v) x *= 1e36f;
    t = Tensor::from_vector(t.shape(), v);
  }
  io::write_safetensors(dir.path("overflowing.safetensors"), weights.tensors, weights.metadata);
  return dir.path("overflowing.safetensors");
}

TEST(TranslationTraining, NonFiniteStepsStopTrainingOrAreSkipped) {
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 3);
  o.options.init_from = overflowing_weights(dir), o.options.validate_every = 1000;
  EXPECT_NE(error_of([&] { run_training(o, log); }).find("non-finite loss at step 1"), std::string::npos) << log.str();
  o.options.skip_nonfinite = true;
  o.options.out_dir = dir.path("skip");
  o.options.epochs = 1;
  EXPECT_FALSE(run_training(o, log).stopped);
  EXPECT_NE(log.str().find("non-finite loss, step skipped"), std::string::npos) << log.str();
  EXPECT_THROW(io::serialize_safetensors({{"w", Tensor::full({1}, INFINITY)}}, {}), Error);
}

TEST(TranslationTraining, GivesUpAfter100SkippedStepsInARow) {
  // Weights whose forward pass overflows: every step would be skipped, for every epoch.
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 5);
  o.options.init_from = overflowing_weights(dir);
  o.options.validate_every = 1000, o.options.skip_nonfinite = true, o.options.epochs = 1000000;
  EXPECT_NE(error_of([&] { run_training(o, log); }).find("100 steps in a row had a non-finite loss"), std::string::npos);
}

TEST(TranslationTraining, RefusesAnEmptyValidationSetAndAMaxLenShorterThanTheSentences) {
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 1);
  write_file(dir.path("empty.txt"), "");
  o.task.valid_src = o.task.valid_tgt = dir.path("empty.txt");
  EXPECT_EQ(error_of([&] { run_training(o, log); }), dir.path("empty.txt") + ": no usable sentence pairs for validation");
  o = tiny_run(dir, "run", 1);
  write_file(dir.path("short.json"), R"({"d_model": 32, "heads": 2, "d_ff": 64, "encoder_layers": 1, "decoder_layers": 1, "max_len": 8})");
  o.task.config = dir.path("short.json");
  EXPECT_NE(error_of([&] { run_training(o, log); }).find("max_len 8 is too short for training pairs of up to 100 subwords; raise max_len or lower --max-sentence-tokens"),
            std::string::npos);
}

TEST(TranslationTraining, DrawsTrainingCurves) {
  TempDir dir;
  std::ostringstream log;
  MtRun o = tiny_run(dir, "run", 4);
  ASSERT_FALSE(run_training(o, log).stopped);
  EXPECT_EQ(testing::read_file(dir.path("run/curves.png")).substr(1, 3), "PNG");
}

// A checkpoint whose recorded vocabulary path is relative to where training ran
// (tests/fixtures/threads/mt.safetensors records "vocab.model") still finds it when
// used from another directory, beside the checkpoint, even where that directory holds
// another file of that name, and through a symlink to the checkpoint; with the file
// nowhere, one line says where it looked and which flag gives it (the review's U7).
TEST(TranslateCli, FindsTheVocabularyBesideTheCheckpointFromAnotherDirectory) {
  const std::string fixtures = std::string(TFM_FIXTURE_DIR) + "/threads";
  TempDir dir;
  testing::write_file(dir.path("vocab.model"), "not the vocabulary the model was trained with");
  const std::string cd = "cd '" + dir.path("") + "' && ";
  const testing::CliResult ok =
      testing::run_command(cd + TFM_BINARY + " translate --greedy --model " + fixtures + "/mt.safetensors -i " + fixtures + "/mt.de");
  EXPECT_EQ(ok.code, 0) << ok.output;
  std::filesystem::create_directory(dir.path("elsewhere"));
  std::filesystem::create_symlink(fixtures + "/mt.safetensors", dir.path("elsewhere/link.safetensors"));
  const testing::CliResult linked =
      testing::run_command(cd + TFM_BINARY + " translate --greedy --model elsewhere/link.safetensors -i " + fixtures + "/mt.de");
  EXPECT_EQ(linked.code, 0) << linked.output;
  EXPECT_EQ(linked.output, ok.output);
  std::filesystem::copy_file(fixtures + "/mt.safetensors", dir.path("mt.safetensors"));
  const testing::CliResult missing = testing::run_command(cd + TFM_BINARY + " translate --greedy --model mt.safetensors -i " + fixtures + "/mt.de");
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.output.find("the vocabulary it was trained with is at none of"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("vocab.model (another vocabulary)"), std::string::npos) << missing.output;
  EXPECT_NE(missing.output.find("give the file with --src-vocab"), std::string::npos) << missing.output;
  const testing::CliResult given = testing::run_command(cd + TFM_BINARY + " translate --greedy --model mt.safetensors -i " + fixtures +
                                                        "/mt.de --src-vocab " + fixtures + "/vocab.model --tgt-vocab " + fixtures + "/vocab.model");
  EXPECT_EQ(given.code, 0) << given.output;
  EXPECT_EQ(given.output, ok.output);
}

}  // namespace
}  // namespace tfm
