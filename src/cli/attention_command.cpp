// `tfm attention`: heatmaps of what the attention heads look at, for one sentence
// of a translation model or one image of a ViT.
#include <algorithm>
#include <iostream>
#include <memory>

#include "autograd/autograd.h"
#include "cli/commands.h"
#include "cli/validators.h"
#include "data/text.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "io/checkpoint.h"
#include "ops/shape.h"
#include "tensor/error.h"
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
  std::unique_ptr<models::ViT> model = load_vit(o.model);
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
  const int64_t predicted = std::max_element(logits.data(), logits.data() + c.classes) - logits.data();
  const std::string label = class_name(test.labels[static_cast<size_t>(o.image)], c.classes, o.data_dir),
                    guess = class_name(predicted, c.classes, o.data_dir);
  const Tensor attention = models::cls_attention(maps.self[static_cast<size_t>(layer)]);  // [1, patches]
  const std::vector<uint8_t> pixels(test.pixels.begin() + o.image * test.rows * test.cols,
                                    test.pixels.begin() + (o.image + 1) * test.rows * test.cols);
  const int grid = static_cast<int>(c.image_size / c.patch);
  viz::image_attention(pixels, static_cast<int>(test.rows), static_cast<int>(test.cols), attention.to_vector(), grid, grid,
                       "image " + std::to_string(o.image) + ": label " + label + ", predicted " + guess + "; layer " + std::to_string(layer),
                       o.out);
  std::cout << "label " << label << ", predicted " << guess << "\nwrote " << o.out << "\n";
}

std::vector<std::string> pieces(const data::Vocab& v, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(v.piece(id));
  return out;
}

void run(const Options& o, const CLI::App& cmd) {
  const std::string kind = io::checkpoint_info(io::read_safetensors(o.model), o.model).model_kind;
  io::check_model_kind(kind, {"encoder_decoder", "vit"}, o.model, "a translation or vit one (attention draws those)");
  if (kind == "vit") return run_vit(o, cmd);
  TFM_CHECK(!o.vit_flags, "--image and --data are for ViT models; a translation model's heatmap takes --src");
  TFM_CHECK(!o.src.empty(), "--src is needed for a translation model");
  for (const auto& [flag, text] : {std::pair{"--src", &o.src}, std::pair{"--tgt", &o.tgt}}) {
    const char* problem = data::text_problem(*text);
    TFM_CHECK(!problem, flag << ": " << problem);
  }
  decode::TranslationModel tm = decode::TranslationModel::load(o.model);
  models::EncoderDecoder& model = *tm.model;
  use_for_inference(model, cmd);
  const models::TransformerConfig& cfg = model.config();
  std::vector<int> src_ids = tm.src_vocab.encode(o.src);
  TFM_CHECK(!src_ids.empty(), "--src is empty");
  std::vector<int> tgt_ids;
  if (o.tgt.empty()) {  // show the model's own translation
    decode::SearchOptions greedy;
    greedy.beam = 1;
    tgt_ids = decode::translate(model, {src_ids}, greedy, 1)[0][0].tokens;
    std::cout << "translation: " << tm.tgt_vocab.decode(tgt_ids) << "\n";
  } else {
    tgt_ids = tm.tgt_vocab.encode(o.tgt);
  }
  const decode::AttentionOfTranslation attention = decode::attention_of(model, src_ids, tgt_ids, data::Vocab::kBos, data::Vocab::kEos);
  const nn::AttentionMaps &encoder_maps = attention.encoder, &decoder_maps = attention.decoder;
  src_ids.resize(std::min<size_t>(src_ids.size(), static_cast<size_t>(cfg.max_len - 1)));  // as attention_of read it
  src_ids.push_back(data::Vocab::kEos);
  tgt_ids.insert(tgt_ids.begin(), data::Vocab::kBos);
  const bool encoder = o.kind == "encoder";
  const int64_t layers = encoder ? cfg.encoder_layers : cfg.decoder_layers;
  const int64_t layer = o.layer < 0 ? layers - 1 : o.layer;
  TFM_CHECK(layer < layers, "--layer " << o.layer << " outside 0.." << layers - 1);
  TFM_CHECK(o.head >= -1 && o.head < cfg.heads, "--head " << o.head << " outside 0.." << cfg.heads - 1 << " (or -1 for all)");
  const std::vector<Tensor>& maps = encoder ? encoder_maps.self : o.kind == "decoder" ? decoder_maps.self : decoder_maps.cross;
  Tensor w = maps[static_cast<size_t>(layer)];  // [1, heads, tq, tk]
  w = ops::reshape(w, {w.size(1), w.size(2), w.size(3)});
  if (o.head >= 0) w = ops::contiguous(ops::slice(w, 0, o.head, o.head + 1));
  std::vector<std::string> src_pieces = pieces(tm.src_vocab, src_ids), tgt_pieces = pieces(tm.tgt_vocab, tgt_ids);
  const std::vector<std::string>& queries = encoder ? src_pieces : tgt_pieces;
  const std::vector<std::string>& keys = o.kind == "decoder" ? tgt_pieces : src_pieces;
  const std::string what = encoder ? "encoder self-attention" : o.kind == "decoder" ? "decoder self-attention" : "encoder-decoder attention";
  viz::attention_heatmap(w, queries, keys, what + ", layer " + std::to_string(layer) + (o.head >= 0 ? ", head " + std::to_string(o.head) : ""),
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
