#pragma once
// A trained translation model with the vocabularies it was trained with, loaded
// from a checkpoint written by the translation trainer.
#include <memory>
#include <string>

#include "data/vocab.h"
#include "models/encoder_decoder.h"

namespace tfm::decode {

struct TranslationModel {
  std::unique_ptr<models::EncoderDecoder> model;
  data::Vocab src_vocab, tgt_vocab;

  // Vocabularies come from the paths the checkpoint records unless others are
  // given; either way their checksums must match the checkpoint's.
  static TranslationModel load(const std::string& checkpoint, const std::string& src_vocab = "", const std::string& tgt_vocab = "");
};

}  // namespace tfm::decode
