#pragma once
// A trained translation model with the vocabularies it was trained with, loaded
// from a checkpoint written by the translation trainer.
#include <memory>
#include <string>

#include "data/vocab.h"
#include "io/checkpoint.h"
#include "models/encoder_decoder.h"

namespace tfm::decode {

// The `side` ("src" or "tgt") vocabulary a checkpoint records (tfm.vocab): `given` where
// not empty, else the recorded file; either way its checksum must match the record's.
data::Vocab recorded_vocab(const io::Checkpoint& info, const char* side, const std::string& given, const std::string& origin);

// The record of a translation model's vocabularies that its checkpoint keeps (tfm.vocab).
std::string vocab_record(const data::Vocab& src, const data::Vocab& tgt);

struct TranslationModel {
  std::unique_ptr<models::EncoderDecoder> model;
  data::Vocab src_vocab, tgt_vocab;

  // Vocabularies come from the paths the checkpoint records unless others are
  // given; either way their checksums must match the checkpoint's.
  static TranslationModel load(const std::string& checkpoint, const std::string& src_vocab = "", const std::string& tgt_vocab = "");
};

}  // namespace tfm::decode
