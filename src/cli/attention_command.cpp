// `tfm attention`: heatmaps of what the attention heads look at, for one sentence
// of a translation model or one image of a ViT.
#include <algorithm>
#include <iostream>
#include <memory>

#include "autograd/autograd.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "data/idx.h"
#include "data/text.h"
#include "decode/hf_checkpoint.h"
#include "io/checkpoint.h"
#include "ops/shape.h"
#include "tensor/error.h"
#include "tfm/translator.h"
#include "train/vit.h"
#include "viz/plots.h"

namespace tfm::cli {

namespace {

struct Options {
  std::string model, src, tgt, kind = "cross", out = "attention.png", data_dir = training::kFashionMnistDir;
  int64_t layer = -1, head = -1, image = 0;
  bool translation_flags = false, vit_flags = false;  // given on the command line
};

// Where [CLS] attends in test image `o.image`, averaged over heads.
void run_vit(const Options& o, const CLI::App& cmd) {
  TFM_CHECK(!o.translation_flags, "--src, --tgt, --kind and --head are for translation models; a ViT's heatmap takes --image, --layer and --data");
  const LoadedVit vit = load_vit(o.model);
  TFM_CHECK(!vit.classes.resizes, o.model << ": a ViT trained on an image folder; --image draws the MNIST-style test images of --data");
  models::ViT* model = vit.model.get();
  use_for_inference(*model, cmd);
  const models::StackConfig& c = model->config();
  const data::ImageSet test = data::read_image_split(o.data_dir, /*train=*/false, c.classes);
  TFM_CHECK(o.image >= 0 && o.image < test.count, "--image " << o.image << " outside 0.." << test.count - 1);
  TFM_CHECK(test.rows == c.image_size && test.cols == c.image_size, o.data_dir << ": images do not match the model's " << c.image_size);
  const int64_t layer = o.layer < 0 ? c.layers - 1 : o.layer;
  TFM_CHECK(layer < c.layers, "--layer " << o.layer << " outside 0.." << c.layers - 1);
  Tensor logits;
  nn::AttentionMaps maps;
  {
    autograd::NoGradGuard no_grad;
    logits = ops::contiguous(model->forward(training::image_batch(test, {o.image}), &maps));
  }
  expect_finite(logits.data(), static_cast<size_t>(logits.numel()), "class scores");
  const int64_t predicted = std::max_element(logits.data(), logits.data() + c.classes) - logits.data();
  const std::string label = class_name(test.labels[static_cast<size_t>(o.image)], vit.classes.names, c.classes, o.data_dir),
                    guess = class_name(predicted, vit.classes.names, c.classes, o.data_dir);
  const Tensor attention = models::cls_attention(maps.self[static_cast<size_t>(layer)], c.vit_tokens() - c.patches());  // [1, patches]
  const std::vector<uint8_t> pixels(test.pixels.begin() + o.image * test.rows * test.cols,
                                    test.pixels.begin() + (o.image + 1) * test.rows * test.cols);
  const int grid = static_cast<int>(c.image_size / c.patch);
  const std::vector<float> weights = attention.to_vector();
  expect_finite(weights.data(), weights.size(), "attention weights");
  viz::image_attention(pixels, static_cast<int>(test.rows), static_cast<int>(test.cols), weights, grid, grid,
                       "image " + std::to_string(o.image) + ": label " + label + ", predicted " + guess + "; layer " + std::to_string(layer),
                       o.out);
  std::cout << "label " << label << ", predicted " << guess << "\nwrote " << o.out << "\n";
}

void run(const Options& o, const CLI::App& cmd) {
  const std::string kind = io::checkpoint_info(decode::read_model(o.model), o.model).model_kind;
  io::check_model_kind(kind, {"encoder_decoder", "vit"}, o.model, "a translation or vit one (attention draws those)");
  if (kind == "vit") return run_vit(o, cmd);
  TFM_CHECK(!o.vit_flags, "--image and --data are for ViT models; a translation model's heatmap takes --src");
  TFM_CHECK(!o.src.empty(), "--src is needed for a translation model");
  for (const auto& [flag, text] : {std::pair{"--src", &o.src}, std::pair{"--tgt", &o.tgt}}) {
    const char* problem = data::text_problem(*text);
    TFM_CHECK(!problem, flag << ": " << problem);
  }
  tfm::TranslatorOptions translator_options;
  translator_options.precision = to_string(precision_flag(cmd));
  translator_options.device = device_flag(cmd);
  tfm::Translator translator(o.model, translator_options);
  tfm::TranslationOptions greedy;
  greedy.beam = 1;
  const tfm::TranslationAttention a = translator.attention(o.src, o.tgt, greedy);  // the model's own translation without --tgt
  if (o.tgt.empty()) std::cout << "translation: " << a.translation << "\n";
  const bool encoder = o.kind == "encoder";
  const tfm::AttentionWeights& w = encoder ? a.encoder : o.kind == "decoder" ? a.decoder : a.cross;
  const int64_t layer = o.layer < 0 ? w.layers - 1 : o.layer;
  TFM_CHECK(layer < w.layers, "--layer " << o.layer << " outside 0.." << w.layers - 1);
  TFM_CHECK(o.head >= -1 && o.head < w.heads, "--head " << o.head << " outside 0.." << w.heads - 1 << " (or -1 for all)");
  const int64_t first = o.head < 0 ? 0 : o.head, heads = o.head < 0 ? w.heads : 1;
  const Tensor maps = Tensor::from_vector({heads, w.queries, w.keys}, std::vector<float>(w.row(layer, first, 0), w.row(layer, first + heads, 0)));
  const std::vector<std::string>& queries = encoder ? a.source_tokens : a.target_tokens;
  const std::vector<std::string>& keys = o.kind == "decoder" ? a.target_tokens : a.source_tokens;
  const std::string what = encoder ? "encoder self-attention" : o.kind == "decoder" ? "decoder self-attention" : "encoder-decoder attention";
  viz::attention_heatmap(maps, queries, keys, what + ", layer " + std::to_string(layer) + (o.head >= 0 ? ", head " + std::to_string(o.head) : ""),
                         o.out);
  std::cout << "wrote " << o.out << "\n";
}

}  // namespace

void add_attention_command(CLI::App& app, int&) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "attention", "Draw attention heatmaps (PNG): a translation model on one sentence, or where a ViT's [CLS] looks in one image");
  add_model_flag(cmd, o->model, "Translation or ViT checkpoint", /*positional=*/false);
  cmd->add_option("--src", o->src, "Source sentence (translation)");
  cmd->add_option("--tgt", o->tgt, "Target sentence (default: the model's greedy translation)");
  cmd->add_option("--kind", o->kind, "Which attention")->capture_default_str()->check(CLI::IsMember({"encoder", "decoder", "cross"}));
  cmd->add_option("--layer", o->layer, "Layer, from 0 (-1: the last)")->capture_default_str()->check(at_least<int64_t>(-1));
  cmd->add_option("--image", o->image, "ViT: index of the test image")->capture_default_str()->check(at_least<int64_t>(0));
  cmd->add_option("--data", o->data_dir, "ViT: directory of the image set")->capture_default_str();
  cmd->add_option("--head", o->head, "Head, from 0; -1 draws every head in a grid")->capture_default_str()->check(at_least<int64_t>(-1));
  add_png_output(cmd, o->out);
  cmd->callback([o, cmd] {
    o->translation_flags = cmd->count("--src") + cmd->count("--tgt") + cmd->count("--kind") + cmd->count("--head") > 0;
    o->vit_flags = cmd->count("--image") + cmd->count("--data") > 0;
    run(*o, *cmd);
  });
}

}  // namespace tfm::cli
