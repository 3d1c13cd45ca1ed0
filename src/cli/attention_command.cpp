// `tfm attention`: heatmaps of what the attention heads look at for one sentence.
#include <iostream>
#include <memory>

#include "autograd/autograd.h"
#include "cli/commands.h"
#include "decode/translation_model.h"
#include "decode/translator.h"
#include "tensor/error.h"
#include "viz/plots.h"

namespace tfm::cli {

namespace {

struct Options {
  std::string model, src, tgt, kind = "cross", out = "attention.png";
  int64_t layer = 0, head = -1;
};

std::vector<std::string> pieces(const data::Vocab& v, const std::vector<int>& ids) {
  std::vector<std::string> out;
  for (int id : ids) out.push_back(v.piece(id));
  return out;
}

void run(const Options& o) {
  decode::TranslationModel tm = decode::TranslationModel::load(o.model);
  models::EncoderDecoder& model = *tm.model;
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
  // Teacher-forced pass over <s> + target; every attention module keeps its weights.
  models::Tokens src{src_ids, 1, static_cast<int64_t>(src_ids.size()) + 1}, tgt{{data::Vocab::kBos}, 1, static_cast<int64_t>(tgt_ids.size()) + 1};
  src.ids.push_back(data::Vocab::kEos);
  tgt.ids.insert(tgt.ids.end(), tgt_ids.begin(), tgt_ids.end());
  {
    autograd::NoGradGuard no_grad;
    model.forward(src, tgt);
  }
  const auto& cfg = model.config();
  const bool encoder = o.kind == "encoder";
  const int64_t layers = encoder ? cfg.encoder_layers : cfg.decoder_layers;
  TFM_CHECK(o.layer >= 0 && o.layer < layers, "--layer " << o.layer << " outside 0.." << layers - 1);
  TFM_CHECK(o.head >= -1 && o.head < cfg.heads, "--head " << o.head << " outside 0.." << cfg.heads - 1 << " (or -1 for all)");
  const auto& dec = model.transformer->decoder->layers[o.layer];
  const nn::MultiHeadAttention& mha = encoder ? *model.transformer->encoder->layers[o.layer]->self_attn
                                      : o.kind == "decoder" ? *dec->self_attn : *dec->multihead_attn;
  Tensor w = mha.attention_weights();  // [1, heads, tq, tk]
  w = w.reshape({w.size(1), w.size(2), w.size(3)});
  if (o.head >= 0) w = w.slice(0, o.head, o.head + 1).contiguous();
  std::vector<std::string> src_pieces = pieces(tm.src_vocab, src.ids), tgt_pieces = pieces(tm.tgt_vocab, tgt.ids);
  const std::vector<std::string>& queries = encoder ? src_pieces : tgt_pieces;
  const std::vector<std::string>& keys = o.kind == "decoder" ? tgt_pieces : src_pieces;
  const std::string what = encoder ? "encoder self-attention" : o.kind == "decoder" ? "decoder self-attention" : "encoder-decoder attention";
  viz::attention_heatmap(w, queries, keys, what + ", layer " + std::to_string(o.layer) + (o.head >= 0 ? ", head " + std::to_string(o.head) : ""),
                         o.out);
  std::cout << "wrote " << o.out << "\n";
}

}  // namespace

void add_attention_command(CLI::App& app, int&) {
  auto o = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("attention", "Draw attention heatmaps (PNG) of a translation model for one sentence");
  cmd->add_option("--model", o->model, "Translation checkpoint")->required()->check(CLI::ExistingFile);
  cmd->add_option("--src", o->src, "Source sentence")->required();
  cmd->add_option("--tgt", o->tgt, "Target sentence (default: the model's greedy translation)");
  cmd->add_option("--kind", o->kind, "Which attention")->capture_default_str()->check(CLI::IsMember({"encoder", "decoder", "cross"}));
  cmd->add_option("--layer", o->layer, "Layer, from 0")->capture_default_str();
  cmd->add_option("--head", o->head, "Head, from 0; -1 draws every head in a grid")->capture_default_str();
  cmd->add_option("--out", o->out, "PNG file to write")->capture_default_str();
  cmd->callback([o] { run(*o); });
}

}  // namespace tfm::cli
