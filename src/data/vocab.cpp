#include "data/vocab.h"

#include <sentencepiece_processor.h>
#include <zlib.h>

#include <filesystem>

#include "io/input_file.h"
#include "tensor/error.h"

namespace tfm::data {

namespace {

uint32_t crc_of(const std::string& bytes) {
  return static_cast<uint32_t>(crc32(0L, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(bytes.size())));
}

}  // namespace

Vocab Vocab::load(const std::string& path) {
  io::check_input_file(path, int64_t{1} << 28, "SentencePiece model");  // not /dev/zero, a FIFO or gigabytes
  Vocab v;
  v.sp_ = std::make_shared<sentencepiece::SentencePieceProcessor>();
  sentencepiece::util::Status status;
  try {
    status = v.sp_->Load(path);
  } catch (const std::exception& e) {  // the library throws on some malformed models (e.g. an empty piece)
    TFM_CHECK(false, path << ": not a valid SentencePiece model (" << e.what() << ")");
  }
  TFM_CHECK(status.ok(), path << ": not a valid SentencePiece model (" << status.ToString() << ")");
  TFM_CHECK(v.sp_->pad_id() == kPad && v.sp_->unk_id() == kUnk && v.sp_->bos_id() == kBos && v.sp_->eos_id() == kEos,
            path << ": special token ids must be pad 0, unk 1, bos 2, eos 3 (train the vocabulary with `tfm vocab`)");
  v.checksum_ = crc_of(v.sp_->serialized_model_proto());
  v.path_ = std::filesystem::absolute(path).lexically_normal().string();  // what checkpoints record: valid from any directory
  return v;
}

std::vector<int> Vocab::encode(const std::string& text) const {
  std::vector<int> ids;
  auto status = sp_->Encode(text, &ids);
  TFM_CHECK(status.ok(), "cannot tokenize: " << status.ToString());
  return ids;
}

std::string Vocab::decode(const std::vector<int>& ids) const {
  std::vector<int> plain;
  for (int id : ids)
    if (id != kPad && id != kBos && id != kEos) plain.push_back(id);
  std::string text;
  auto status = sp_->Decode(plain, &text);
  TFM_CHECK(status.ok(), "cannot detokenize: " << status.ToString());
  return text;
}

std::string Vocab::piece(int id) const { return sp_->IdToPiece(id); }
int Vocab::size() const { return sp_->GetPieceSize(); }

Vocab load_recorded_vocab(const std::string& recorded, uint32_t crc32, const std::string& checkpoint, const std::string& how_to_give) {
  namespace fs = std::filesystem;
  const fs::path name = fs::path(recorded).filename();
  std::vector<fs::path> places{fs::path(checkpoint).parent_path() / name};
  std::error_code ec;
  const fs::path target = fs::canonical(checkpoint, ec);
  if (!ec) places.push_back(target.parent_path() / name);
  places.push_back(recorded);
  std::string tried;
  for (const fs::path& place : places) {
    if (tried.find(place.string() + " ") != std::string::npos) continue;  // the same place twice
    const bool there = fs::is_regular_file(place, ec);
    if (there) {
      try {
        Vocab v = Vocab::load(place.string());
        if (v.checksum() == crc32) return v;
      } catch (const Error&) {  // unreadable or not a SentencePiece model: another file of that name
      }
    }
    tried += (tried.empty() ? "" : ", ") + place.string() + (there ? " (another vocabulary)" : " (missing)");
  }
  throw Error(checkpoint + ": the vocabulary it was trained with is at none of " + tried + "; give " + how_to_give);
}

}  // namespace tfm::data
