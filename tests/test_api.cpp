// The public library API (include/tfm): what a program embedding tfm calls.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "decode/family_checkpoint.h"
#include "decode/translation_model.h"
#include "io/checkpoint.h"
#include "decode/translator.h"
#include "support/fixture.h"
#include "data/idx.h"
#include "train/vit.h"
#include "support/process.h"
#include "tfm/checkpoint.h"
#include "tfm/classifier.h"
#include "tfm/encoder.h"
#include "tfm/generator.h"
#include "tfm/translator.h"

namespace tfm {
namespace {

const std::string kModel = testing::fixture_path("threads/mt.safetensors");

// The message of the std::runtime_error that f() throws ("no error" if none).
template <class F>
std::string message(F&& f) {
  try {
    f();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

std::vector<std::string> fixture_sentences() {
  std::vector<std::string> lines;
  std::ifstream in(testing::fixture_path("threads/mt.de"));
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  lines.insert(lines.begin() + 3, "");  // an empty line stays an empty translation
  return lines;
}

// What the plain path (decode::translate, batch by batch on this thread) gives.
std::vector<std::string> plain_translations(const std::vector<std::string>& lines, int64_t beam) {
  decode::TranslationModel tm = decode::TranslationModel::load(kModel);
  std::vector<std::vector<int>> sources;
  for (const std::string& line : lines) sources.push_back(tm.src_vocab.encode(line));
  decode::SearchOptions o;
  o.beam = beam;
  std::vector<std::string> out;
  for (const auto& h : decode::translate(*tm.model, sources, o, 4)) out.push_back(tm.tgt_vocab.decode(h[0].tokens));
  return out;
}

std::vector<std::string> best(const std::vector<Translation>& results) {
  std::vector<std::string> out;
  for (const Translation& t : results) out.push_back(t.hypotheses.at(0));
  return out;
}

// Any number of workers and any batch size give the plain path's translations, in
// input order, with n-best lists ranked by score.
TEST(TranslatorApi, GivesThePlainPathsTranslationsForAnyWorkersAndBatch) {
  const std::vector<std::string> lines = fixture_sentences();
  const std::vector<std::string> expected = plain_translations(lines, 4);
  EXPECT_EQ(expected[3], "");
  for (int workers : {0, 1, 3})
    for (int64_t batch : {1, 4, 32}) {
      TranslatorOptions options;
      options.workers = workers, options.max_batch = batch;
      Translator translator(kModel, options);
      EXPECT_EQ(best(translator.translate(lines)), expected) << "workers " << workers << ", batch " << batch;
    }
  Translator translator(kModel);
  TranslationOptions nbest;
  nbest.nbest = 3;
  const std::vector<Translation> results = translator.translate(lines, nbest);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;
    ASSERT_EQ(results[i].hypotheses.size(), 3u);
    EXPECT_EQ(results[i].hypotheses[0], expected[i]);
    EXPECT_GE(results[i].scores[0], results[i].scores[1]);
    EXPECT_EQ(results[i].token_ids.size(), 3u);
  }
}

// Callers on many threads at once, each with its own sentences and search options,
// each get exactly their own results; progress adds up to the sentences translated.
// M2M100, NLLB and mBART-50 directories translate text with the languages given
// (tests/fixtures/hf/*_tiny, made by transformers 4.39): the ids transformers generated,
// greedy and beam 4, their language first.
TEST(TranslatorApi, ManyToManyModelsTranslateBetweenTheLanguagesGiven) {
  for (const char* name : {"m2m100_tiny", "nllb_tiny", "mbart50_tiny"}) {
    SCOPED_TRACE(name);
    const std::string dir = testing::fixture_path(std::string("hf/") + name);
    std::ifstream in(dir + "/reference.json");
    const nlohmann::json reference = nlohmann::json::parse(in);
    Translator translator(dir);
    TranslationOptions o;
    o.source_language = reference.at("src_lang").get<std::string>(), o.target_language = reference.at("tgt_lang").get<std::string>();
    for (const int64_t beam : {1, 4}) {
      o.beam = beam;
      for (const nlohmann::json& c : reference.at("cases")) {
        std::vector<int> want = c.at(beam == 1 ? "greedy_ids" : "beam4_ids").get<std::vector<int>>();
        want.erase(want.begin());  // the start symbol
        if (want.back() == 2) want.pop_back();  // the end
        EXPECT_EQ(translator.translate({c.at("source_text").get<std::string>()}, o)[0].token_ids[0], want) << "beam " << beam;
      }
    }
    o.target_language = "";
    EXPECT_NE(message([&] { translator.translate({"A dog."}, o); }).find("give the source's and the target's (--src-lang and --tgt-lang"),
              std::string::npos);
    o.target_language = "xx";
    EXPECT_NE(message([&] { translator.translate({"A dog."}, o); }).find("'xx' is not a language of this model; its languages: "), std::string::npos);
  }
  TranslationOptions o;
  o.target_language = "de";
  EXPECT_EQ(message([&] { Translator(testing::fixture_path("threads/mt.safetensors")).translate({"Ein Hund."}, o); }),
            "the model translates between the languages it was trained on: it takes no language ('de')");
}

TEST(TranslatorApi, ManyCallersAtOnceGetTheirOwnResults) {
  const std::vector<std::string> lines = fixture_sentences();
  const std::vector<std::string> beam4 = plain_translations(lines, 4), greedy = plain_translations(lines, 1);
  TranslatorOptions options;
  options.workers = 2, options.max_batch = 6, options.batch_wait_us = 20000;
  Translator translator(kModel, options);
  std::vector<std::thread> callers;
  std::vector<std::string> failures(8);
  for (size_t c = 0; c < failures.size(); ++c)
    callers.emplace_back([&, c] {
      TranslationOptions o;
      o.beam = c % 2 ? 1 : 4;
      const std::vector<std::string>& want = c % 2 ? greedy : beam4;
      // Caller c translates sentences c, c + 1, ..., c + 4 (a few at a time, as a server gets them).
      const std::vector<std::string> mine(lines.begin() + static_cast<std::ptrdiff_t>(c), lines.begin() + static_cast<std::ptrdiff_t>(c + 5));
      int64_t progress = 0;
      const std::vector<std::string> got = best(translator.submit(mine, o, [&](int64_t n) { progress += n; }).get());
      for (size_t i = 0; i < mine.size(); ++i)
        if (got[i] != want[c + i]) failures[c] += "sentence " + std::to_string(c + i) + ": '" + got[i] + "' ";
      const int64_t nonempty = std::count_if(mine.begin(), mine.end(), [](const std::string& s) { return !s.empty(); });
      if (progress != nonempty) failures[c] += "progress " + std::to_string(progress) + " of " + std::to_string(nonempty);
    });
  for (std::thread& t : callers) t.join();
  for (size_t c = 0; c < failures.size(); ++c) EXPECT_EQ(failures[c], "") << "caller " << c;
}

// A batch that its queued sentences fill starts at once: with batches of one, a lone
// sentence does not wait `batch_wait_us` for company (it waited, 2 ms a sentence of
// `tfm translate --batch 1`, before). A 10-second wait leaves a wide margin either way.
TEST(TranslatorApi, AFullBatchDoesNotWaitForCompany) {
  TranslatorOptions options;
  options.workers = 1, options.max_batch = 1, options.batch_wait_us = 10'000'000;
  Translator translator(kModel, options);
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(translator.translate({"Ein Hund."}).size(), 1u);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

// A request that reaches an idle translator after a lull (nothing for batch_wait_us)
// starts at once, however much room its batch has left: one client's requests do not
// wait for company (it cost `tfm serve` 4 ms a request). A 2-second wait against a
// bound of 1 second leaves a wide margin either way.
TEST(TranslatorApi, ARequestAfterALullDoesNotWaitForCompany) {
  TranslatorOptions options;
  options.max_batch = 32, options.batch_wait_us = 2'000'000;
  Translator translator(kModel, options);
  for (int i = 0; i < 2; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(2'500));  // the lull
    const auto start = std::chrono::steady_clock::now();
    EXPECT_EQ(translator.translate({"Ein Hund."}).size(), 1u);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1)) << "request " << i;
  }
}

// Bad checkpoints and options are exceptions with tfm's one-line message.
TEST(TranslatorApi, BadInputIsAnExceptionWithAClearMessage) {
  EXPECT_NE(message([] { Translator("/nonexistent/model.safetensors"); }).find("/nonexistent/model.safetensors"), std::string::npos);
  TranslatorOptions bad_precision;
  bad_precision.precision = "f64";
  EXPECT_NE(message([&] { Translator(kModel, bad_precision); }).find("f64"), std::string::npos);
  Translator translator(kModel);
  TranslationOptions too_many;
  too_many.beam = 2, too_many.nbest = 3;
  EXPECT_EQ(message([&] { translator.translate({"Ein Hund."}, too_many); }), "nbest 3 must be between 1 and the beam, 2");
  EXPECT_EQ(translator.translate({}).size(), 0u);
  TranslationOptions nan_penalty;
  nan_penalty.length_penalty = NAN;
  EXPECT_EQ(message([&] { translator.translate({"Ein Hund."}, nan_penalty); }), "length_penalty must be a finite number, got nan");
  EXPECT_EQ(message([&] { translator.translate({"Ein Hund.", "a\xff"}); }), "source 2: invalid UTF-8");
  // A progress callback that throws fails its request, through the future.
  std::future<std::vector<Translation>> failing = translator.submit({"Ein Hund."}, {}, [](int64_t) { throw std::runtime_error("boom"); });
  EXPECT_EQ(message([&] { failing.get(); }), "boom");
  EXPECT_EQ(translator.translate({"Ein Hund."}).size(), 1u) << "the translator goes on";
  // A source longer than the model's positions is translated from its beginning, and says so.
  std::string long_source;
  for (int i = 0; i < 200; ++i) long_source += "Ein Hund. ";
  ASSERT_EQ(translator.max_source_tokens(), 127);
  const std::vector<Translation> cut = translator.translate({"Ein Hund.", long_source});
  EXPECT_FALSE(cut[0].truncated);
  EXPECT_TRUE(cut[1].truncated);
}

// With return_attention, each hypothesis comes with the last decoder layer's
// encoder-decoder attention: [target + 1, source + 1] rows of probabilities, the same
// whatever else shares the batch; without, none.
TEST(TranslatorApi, ReturnsAttentionWhenAsked) {
  Translator translator(kModel);
  TranslationOptions o;
  o.beam = 2, o.nbest = 2, o.return_attention = true;
  const std::vector<std::string> sources{"Ein Hund läuft.", "Zwei Männer spielen Fußball im Park."};
  const std::vector<Translation> out = translator.translate(sources, o);
  for (size_t s = 0; s < sources.size(); ++s) {
    ASSERT_EQ(out[s].attention.size(), 2u);
    for (size_t h = 0; h < 2; ++h) {
      const std::vector<float>& a = out[s].attention[h];
      const size_t rows = out[s].token_ids[h].size() + 1;
      ASSERT_EQ(a.size() % rows, 0u);
      const size_t cols = a.size() / rows;
      EXPECT_GT(cols, 1u);
      for (size_t r = 0; r < rows; ++r) {
        double total = 0;
        for (size_t c = 0; c < cols; ++c) total += a[r * cols + c];
        EXPECT_NEAR(total, 1.0, 1e-5) << "source " << s << " hypothesis " << h << " row " << r;
      }
    }
  }
  EXPECT_EQ(translator.translate({sources[1]}, o)[0].attention, out[1].attention) << "alone as in a batch";
  EXPECT_TRUE(translator.translate(sources)[0].attention.empty());
}

// Destroying a translator finishes what was submitted.
TEST(TranslatorApi, DestructionFinishesSubmittedRequests) {
  const std::vector<std::string> lines = fixture_sentences();
  std::future<std::vector<Translation>> pending;
  {
    Translator translator(kModel);
    pending = translator.submit(lines);
  }
  EXPECT_EQ(best(pending.get()), plain_translations(lines, 4));
}

// Sentence vectors: one row per sentence, each what the sentence gives alone, the same
// from many threads at once; [CLS] pooling differs from the mean.
TEST(EncoderApi, EmbedsSentencesAsEachAloneFromAnyThread) {
  const Encoder encoder(testing::fixture_path("threads/bert.safetensors"));
  const std::vector<std::string> sentences = {"To be, or not to be", "", "that is the question"};
  const Embeddings all = encoder.embed(sentences);
  ASSERT_EQ(all.count, 3);
  ASSERT_EQ(all.dim, encoder.dim());
  ASSERT_EQ(all.values.size(), static_cast<size_t>(3 * all.dim));
  for (size_t i = 0; i < sentences.size(); ++i) {
    const Embeddings one = encoder.embed({sentences[i]});
    EXPECT_EQ(one.values, std::vector<float>(all.values.begin() + static_cast<std::ptrdiff_t>(i * all.dim),
                                             all.values.begin() + static_cast<std::ptrdiff_t>((i + 1) * all.dim)));
  }
  EXPECT_NE(encoder.embed({sentences[0]}, "cls").values, encoder.embed({sentences[0]}, "mean").values);
  std::vector<std::thread> threads;
  std::vector<std::vector<float>> got(4);
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = encoder.embed(sentences).values; });
  for (std::thread& t : threads) t.join();
  for (const std::vector<float>& g : got) EXPECT_EQ(g, all.values);
  const Embeddings longer = encoder.embed({std::string(4000, 'a')});
  EXPECT_EQ(longer.truncated, 1);
}

TEST(EncoderApi, BadInputIsAnExceptionWithAClearMessage) {
  EXPECT_NE(message([] { Encoder e(kModel); }).find("not an encoder from `tfm bert train` or a Hugging Face BERT"), std::string::npos) << message([] { Encoder e(kModel); });
  const Encoder encoder(testing::fixture_path("threads/bert.safetensors"));
  EXPECT_EQ(message([&] { encoder.embed({"x"}, "min"); }), "unknown pooling 'min' (mean, cls or max)");
}

// Images classified through the library get the labels `tfm vit eval` counts correct,
// with probabilities that sum to 1; a wrong pixel count is a clear error.
TEST(ClassifierApi, ClassifiesAsTheEvaluationDoes) {
  const std::string path = testing::fixture_path("threads/vit.safetensors");
  const Classifier classifier(path);
  const data::ImageSet test = data::read_image_split(testing::fixture_path("threads/fashion"), false, classifier.classes());
  ASSERT_EQ(test.rows, classifier.image_size());
  const Classification c = classifier.classify(test.pixels, test.count);
  ASSERT_EQ(c.labels.size(), static_cast<size_t>(test.count));
  int64_t correct = 0;
  for (int64_t i = 0; i < test.count; ++i) {
    correct += c.labels[static_cast<size_t>(i)] == test.labels[static_cast<size_t>(i)];
    double sum = 0;
    for (int64_t k = 0; k < c.classes; ++k) sum += c.probabilities[static_cast<size_t>(i * c.classes + k)];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
  std::unique_ptr<models::ViT> model = std::make_unique<models::ViT>(
      decode::open_family_checkpoint(path, "vit", "a ViT").config);
  io::load_parameters(model->named_parameters(), io::read_safetensors(path), path);
  model->eval();
  EXPECT_EQ(correct, training::evaluate_images(*model, test, 0, test.count).correct);
  const Classification one = classifier.classify(std::vector<uint8_t>(test.pixels.begin(), test.pixels.begin() + test.rows * test.cols), 1);
  EXPECT_EQ(one.labels[0], c.labels[0]);
  EXPECT_EQ(message([&] { classifier.classify({1, 2, 3}, 1); }), "3 pixels given for 1 images of 1x28x28 (784 each)");
}

// Generation streams pieces that make the returned text; the same seed gives the same
// text on any thread, many at once; greedy ignores the seed.
TEST(GeneratorApi, StreamsTheTextItReturnsTheSameOnEveryThread) {
  const Generator generator(testing::fixture_path("threads/lm.safetensors"));
  GenerationOptions o;
  o.max_new_tokens = 40, o.seed = 5;
  std::string streamed;
  const std::string text = generator.generate("ROMEO:", o, [&](const std::string& piece) { streamed += piece; });
  EXPECT_FALSE(text.empty());
  EXPECT_EQ(streamed, text);
  std::vector<std::thread> threads;
  std::vector<std::string> got(4);
  for (size_t t = 0; t < got.size(); ++t) threads.emplace_back([&, t] { got[t] = generator.generate("ROMEO:", o); });
  for (std::thread& t : threads) t.join();
  for (const std::string& g : got) EXPECT_EQ(g, text);
  o.seed = 6;
  EXPECT_NE(generator.generate("ROMEO:", o), text) << "another seed, another sample";
  o.temperature = 0;
  const std::string greedy = generator.generate("ROMEO:", o);
  o.seed = 7;
  EXPECT_EQ(generator.generate("ROMEO:", o), greedy);
  o.max_new_tokens = 0;
  EXPECT_EQ(generator.generate("ROMEO:", o), "");
  EXPECT_EQ(message([&] { generator.generate("a\xff", o); }), "the prompt: invalid UTF-8");
  // A vocabulary given for a model that reads characters is refused, not ignored.
  ModelOptions with_vocab;
  with_vocab.vocab = testing::fixture_path("threads/vocab.model");
  EXPECT_NE(message([&] { Generator(testing::fixture_path("threads/lm.safetensors"), with_vocab); }).find("does not apply to it"),
            std::string::npos);
}

// A chat model (Qwen2's ChatML template, end tokens listed by generation_config.json):
// a conversation continues as transformers' generate() continues what
// apply_chat_template(add_generation_prompt=True) gives (tests/reference/make_hf_chat_fixtures.py),
// a text as it continues tokenizer(text); the finish says which ended at an end token.
TEST(GeneratorApi, ChatsAsTransformersAppliesTheTemplate) {
  const Generator generator(testing::fixture_path("hf/qwen2_chat_tiny"));
  EXPECT_TRUE(generator.has_chat_template());
  std::ifstream in(testing::fixture_path("hf/qwen2_chat_tiny/reference.json"));
  const nlohmann::json reference = nlohmann::json::parse(in);
  GenerationOptions greedy;
  greedy.temperature = 0, greedy.max_new_tokens = reference.at("max_new_tokens").get<int64_t>();
  for (const nlohmann::json& c : reference.at("cases")) {
    Chat chat;
    for (const nlohmann::json& m : c.value("messages", nlohmann::json::array())) chat.push_back({m.at("role"), m.at("content")});
    const Prompt prompt = c.contains("text") ? Prompt(c.at("text").get<std::string>()) : Prompt(chat);
    EXPECT_EQ(generator.count_tokens(prompt), static_cast<int64_t>(c.at("input_ids").size()));
    TextStream stream = generator.stream(prompt, greedy);
    std::string text;
    while (std::optional<std::string> piece = stream.next()) text += *piece;
    EXPECT_EQ(text, c.at("new_text").get<std::string>());
    EXPECT_EQ(stream.finish().reason, c.at("ended").get<bool>() ? "stop" : "length");
    EXPECT_EQ(stream.finish().tokens, static_cast<int64_t>(c.at("greedy_new_ids").size()));
  }
  EXPECT_EQ(message([&] { generator.count_tokens(Chat{}); }), "the conversation has no messages");
  EXPECT_EQ(message([&] { generator.count_tokens(Chat{{"user", "a\xff"}}); }), "a message's content: invalid UTF-8");
  const Generator no_template(testing::fixture_path("threads/lm.safetensors"));
  EXPECT_FALSE(no_template.has_chat_template());
  EXPECT_NE(message([&] { no_template.generate(Chat{{"user", "Hi"}}); }).find("has no chat template"), std::string::npos);
}

// Requests submitted at once run together (continuous batching) and each gets what it
// gets alone; a stream hands on the same text piece by piece; a callback's error fails
// its own request only; destruction finishes what was submitted.
// A stop string ends the text before it, the streamed pieces never show a part of it,
// and the finish says why the text ended and how many tokens it took.
TEST(GeneratorApi, AStopStringEndsTheTextBeforeIt) {
  const Generator generator(testing::fixture_path("threads/lm.safetensors"));
  GenerationOptions o;
  o.max_new_tokens = 60, o.temperature = 0;
  TextStream whole = generator.stream("ROMEO:", o);
  std::string text;
  while (std::optional<std::string> piece = whole.next()) text += *piece;
  EXPECT_EQ(whole.finish().reason, "length");
  EXPECT_EQ(whole.finish().tokens, 60);
  ASSERT_GE(text.size(), 30u);
  const std::string stop = text.substr(20, 4), other = "never in it \x01";
  o.stop = {other, stop};
  TextStream cut = generator.stream("ROMEO:", o);
  std::vector<std::string> pieces;
  while (std::optional<std::string> piece = cut.next()) pieces.push_back(*piece);
  std::string streamed;
  for (const std::string& p : pieces) streamed += p;
  EXPECT_EQ(streamed, text.substr(0, text.find(stop)));
  EXPECT_EQ(generator.generate("ROMEO:", o), streamed);
  EXPECT_EQ(cut.finish().reason, "stop");
  EXPECT_EQ(cut.finish().tokens, static_cast<int64_t>(text.find(stop) + stop.size())) << "a token a character, the stop string's counted";
  o.stop = {""};
  EXPECT_EQ(message([&] { generator.generate("ROMEO:", o); }), "a stop string is empty (it would end the text before it began)");
  o.stop = {}, o.repetition_penalty = 0;
  EXPECT_NE(message([&] { generator.generate("ROMEO:", o); }).find("repetition_penalty above 0"), std::string::npos);
}

// The running batch's key/value caches are reported while it runs and freed once it is idle.
TEST(GeneratorApi, ReportsTheCacheItHoldsAndFreesItWhenIdle) {
  const Generator generator(testing::fixture_path("threads/lm.safetensors"));
  GenerationOptions o;
  o.max_new_tokens = 1000;
  TextStream stream = generator.stream("ROMEO:", o);
  for (int i = 0; i < 20; ++i) stream.next();
  const GeneratorStats running = generator.stats();
  EXPECT_EQ(running.running, 1);
  EXPECT_GT(running.cache_bytes, 0);
  while (stream.next()) {
  }
  for (int i = 0; i < 200 && generator.stats().cache_bytes > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(generator.stats().cache_bytes, 0);
  EXPECT_EQ(generator.stats().running, 0);
  // Bounded: requests beyond what fits wait, and get what they get alone; a bound that
  // holds no sequence is refused.
  o.max_new_tokens = 30, o.temperature = 0;
  ModelOptions bounded;
  bounded.max_cache_bytes = 2 * 57344;  // two sequences: 96 + 16 positions (64 as storage grows) x 32 wide x keys and values x 2 layers x 4 bytes
  const Generator small(testing::fixture_path("threads/lm.safetensors"), bounded);
  std::vector<std::future<std::string>> texts;
  for (const char* prompt : {"ROMEO:", "JULIET:", "A", "B"}) texts.push_back(small.submit(prompt, o));
  EXPECT_LE(small.stats().running - small.stats().waiting, 2);
  const std::vector<std::string> prompts{"ROMEO:", "JULIET:", "A", "B"};
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(texts[i].get(), generator.generate(prompts[i], o));
  bounded.max_cache_bytes = 1000;
  EXPECT_NE(message([&] { Generator(testing::fixture_path("threads/lm.safetensors"), bounded); }).find("holds no sequence of this model"),
            std::string::npos);
}

TEST(GeneratorApi, RequestsTogetherGetWhatEachGetsAlone) {
  const std::vector<std::string> prompts{"ROMEO:", "JULIET:\nO", "", "First Citizen:\nBefore we proceed any further, hear me speak."};
  std::vector<GenerationOptions> options(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) options[i].max_new_tokens = 20 + 30 * static_cast<int64_t>(i), options[i].seed = i;
  options[1].temperature = 0;
  std::vector<std::string> alone;
  {
    const Generator generator(testing::fixture_path("threads/lm.safetensors"));
    for (size_t i = 0; i < prompts.size(); ++i) alone.push_back(generator.generate(prompts[i], options[i]));
  }
  std::vector<std::future<std::string>> together;
  std::vector<std::string> streamed(prompts.size());
  std::future<std::string> failing;
  {
    const Generator generator(testing::fixture_path("threads/lm.safetensors"));
    for (size_t i = 0; i < prompts.size(); ++i) together.push_back(generator.submit(prompts[i], options[i]));
    failing = generator.submit("ROMEO:", options[0], [](const std::string&) { throw std::runtime_error("enough"); });
    TextStream stream = generator.stream(prompts[3], options[3]);
    int pieces = 0;
    while (std::optional<std::string> piece = stream.next()) streamed[3] += *piece, ++pieces;
    EXPECT_GT(pieces, 1);
  }  // destroyed: what was submitted is finished
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(together[i].get(), alone[i]) << "prompt " << i;
  EXPECT_EQ(streamed[3], alone[3]);
  EXPECT_EQ(message([&] { failing.get(); }), "enough");
  // A callback that would wait for its own generator fails its request instead of hanging.
  const Generator generator(testing::fixture_path("threads/lm.safetensors"));
  std::future<std::string> reentrant = generator.submit("ROMEO:", options[0], [&](const std::string&) { generator.generate("A"); });
  EXPECT_EQ(message([&] { reentrant.get(); }), "generate() from a callback of the same generator would wait for itself; use submit() there");
  std::future<std::string> waits = generator.submit("ROMEO:", options[0], [&](const std::string&) { generator.stream("A").next(); });
  EXPECT_EQ(message([&] { waits.get(); }), "TextStream::next() from a callback of the same generator would wait for itself");
  // A finished stream stays finished; a non-finite temperature is refused.
  TextStream done = generator.stream("A", options[0]);
  while (done.next()) {
  }
  EXPECT_FALSE(done.next().has_value());
  GenerationOptions hot;
  hot.temperature = INFINITY;
  EXPECT_NE(message([&] { generator.generate("A", hot); }).find("temperature finite"), std::string::npos);
}

// A dropped stream cancels its request: a generator asked for ten million tokens and
// dropped after the first piece is destroyed at once (liveness, with a generous bound;
// it would take hours to run them all).
TEST(GeneratorApi, ADroppedStreamIsCancelled) {
  auto finished = std::make_shared<std::promise<void>>();
  std::future<void> done = finished->get_future();
  std::thread([finished] {
    {
      const Generator generator(testing::fixture_path("threads/lm.safetensors"));
      GenerationOptions endless;
      endless.max_new_tokens = 10'000'000;
      generator.stream("ROMEO:", endless).next();
    }
    finished->set_value();
  }).detach();
  ASSERT_EQ(done.wait_for(std::chrono::seconds(60)), std::future_status::ready) << "the dropped stream's request went on";
}

// A checkpoint read as name -> array and written back is the same model (a generator
// loads it and generates what it did); bad shapes and files are clear errors.
TEST(CheckpointApi, ReadsAndWritesNamedArrays) {
  const std::string path = testing::fixture_path("threads/lm.safetensors");
  Checkpoint c = read_checkpoint(path);
  ASSERT_TRUE(c.tensors.count("tok_embed.weight"));
  const Array& w = c.tensors.at("tok_embed.weight");
  ASSERT_EQ(w.shape.size(), 2u);
  EXPECT_EQ(static_cast<int64_t>(w.values.size()), w.shape[0] * w.shape[1]);
  EXPECT_TRUE(c.metadata.count("tfm.config"));
  testing::TempDir dir;
  write_checkpoint(dir.path("copy.safetensors"), c);
  const Checkpoint back = read_checkpoint(dir.path("copy.safetensors"));
  EXPECT_EQ(back.metadata, c.metadata);
  ASSERT_EQ(back.tensors.size(), c.tensors.size());
  for (const auto& [name, array] : c.tensors) {
    EXPECT_EQ(back.tensors.at(name).shape, array.shape) << name;
    EXPECT_EQ(back.tensors.at(name).values, array.values) << name;
  }
  GenerationOptions o;
  o.max_new_tokens = 20;
  EXPECT_EQ(Generator(dir.path("copy.safetensors")).generate("A", o),
            Generator(path).generate("A", o));

  c.tensors["bad"] = {{2, 3}, {1, 2, 3}};
  EXPECT_NE(message([&] { write_checkpoint(dir.path("bad.safetensors"), c); }).find("tensor 'bad' has 3 values for shape [2, 3]"),
            std::string::npos);
  EXPECT_THROW(read_checkpoint(testing::fixture_path("threads/mt.de")), std::runtime_error);
  c.tensors.erase("bad");
  c.tensors["__metadata__"] = {{1}, {1}};
  EXPECT_NE(message([&] { write_checkpoint(dir.path("reserved.safetensors"), c); }).find("may not be named '__metadata__'"), std::string::npos);
}

}  // namespace
}  // namespace tfm
