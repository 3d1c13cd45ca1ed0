// PyTorch checkpoints (torch.save's zip archives: pytorch_model.bin) read without Python:
// the files PyTorch 1.13 itself wrote (tests/reference/make_torch_fixtures.py), every
// malformed or malicious one refused with one line, and Hugging Face directories of
// pytorch_model.bin read as their model.safetensors twins.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <map>

#include "hf/directory.h"
#include "hf/model.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"
#include "support/fixture.h"
#include "support/process.h"
#include "support/torch_twin.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

std::string torch_fixture(const std::string& name) { return testing::fixture_path("torch/" + name); }

// The message of what `f` throws, checked to be one line.
std::string refusal(const std::function<void()>& f) {
  const std::string message = testing::error_of(f);
  EXPECT_FALSE(message.empty()) << "nothing was refused";
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  return message;
}

#define EXPECT_REFUSED(call, text)                                    \
  do {                                                                \
    const std::string message_ = refusal([&] { call; });              \
    EXPECT_NE(message_.find(text), std::string::npos) << message_;    \
  } while (0)

// A tensor's values, whatever its dtype, as doubles (exact for every value the fixture holds).
std::vector<double> values_of(const Tensor& t) {
  const auto as_doubles = [](const auto& v) { return std::vector<double>(v.begin(), v.end()); };
  switch (t.dtype()) {
    case DType::i64: return as_doubles(t.values<int64_t>());
    case DType::i32: return as_doubles(t.values<int32_t>());
    case DType::i8: return as_doubles(t.values<int8_t>());
    case DType::u8: return as_doubles(t.values<uint8_t>());
    case DType::boolean: return as_doubles(t.values<bool>());
    default: return as_doubles(io::to_f32(t).to_vector());
  }
}

// Every dtype, view and sharing torch.save writes, as PyTorch holds them (expected.safetensors:
// the same tensors as contiguous float32, f64 rounded as tensor.float() rounds).
TEST(TorchCheckpoint, ReadsWhatTorchSaveWrote) {
  const io::SafeTensors got = io::read_torch_checkpoint(torch_fixture("state_dict.bin"));
  const io::SafeTensors want = io::read_safetensors(torch_fixture("expected.safetensors"));
  const std::map<std::string, DType> dtypes = {{"f16", DType::f16}, {"bf16", DType::bf16}, {"i64", DType::i64}, {"i32", DType::i32},
                                               {"i8", DType::i8},   {"u8", DType::u8},     {"bool", DType::boolean}, {"position_ids", DType::i64}};
  ASSERT_EQ(got.tensors.size(), want.tensors.size());
  for (size_t i = 0; i < want.tensors.size(); ++i) {
    const auto& [name, t] = got.tensors[i];
    EXPECT_EQ(name, want.tensors[i].first);  // in the state dict's order
    EXPECT_EQ(t.dtype(), dtypes.count(name) ? dtypes.at(name) : DType::f32) << name;
    EXPECT_EQ(t.shape(), want.tensors[i].second.shape()) << name;
    EXPECT_TRUE(t.is_contiguous()) << name;
    EXPECT_EQ(values_of(t), values_of(want.tensors[i].second)) << name;
  }
  // Tied weights (one storage under two names) come out as two tensors of their own.
  EXPECT_NE(got.find("tied_a")->impl()->storage, got.find("tied_b")->impl()->storage);
}

// A Hugging Face directory holding pytorch_model.bin (tied weights under all their names,
// one storage), or its shards and index, reads as the model.safetensors it was made from.
void expect_twins(const std::string& name) {
  testing::TempDir tmp;
  const std::string dir = testing::torch_twin(tmp, name);
  ASSERT_FALSE(fs::exists(dir + "/model.safetensors"));
  const io::SafeTensors bin = hf::convert(hf::open(dir)), safetensors = hf::convert(hf::open(testing::fixture_path("hf/" + name)));
  ASSERT_EQ(bin.tensors.size(), safetensors.tensors.size());
  for (size_t i = 0; i < bin.tensors.size(); ++i) {
    EXPECT_EQ(bin.tensors[i].first, safetensors.tensors[i].first);
    EXPECT_EQ(bin.tensors[i].second.to_vector(), safetensors.tensors[i].second.to_vector()) << bin.tensors[i].first;
  }
  EXPECT_EQ(bin.metadata, safetensors.metadata);
}

TEST(TorchCheckpoint, HfDirectoryOfPytorchModelBinReadsAsItsSafetensorsTwin) { expect_twins("marian_multi_target_tiny"); }
TEST(TorchCheckpoint, HfDirectoryOfShardedBinReadsAsItsSafetensorsTwin) { expect_twins("gpt2_layer_scaled_tiny"); }

// Files torch.save wrote that are not state dicts tfm reads: pickles that would run code
// when loaded (refused by name, nothing run), the legacy format, deflated entries.
TEST(TorchCheckpoint, MaliciousAndOtherFilesOfTorchSaveAreRefusedByName) {
  EXPECT_REFUSED(io::read_torch_checkpoint(torch_fixture("evil_system.bin")),
                 "calls for 'posix.system', which a state dict does not hold; tfm reads tensors, their storages and dicts only, and never runs code");
  // (protocol 2 names the builtins module as Python 2 did)
  EXPECT_REFUSED(io::read_torch_checkpoint(torch_fixture("evil_eval.bin")), "calls for '__builtin__.eval'");
  EXPECT_REFUSED(io::read_torch_checkpoint(torch_fixture("legacy.bin")), "legacy format of torch.save before PyTorch 1.6");
  EXPECT_REFUSED(io::read_torch_checkpoint(torch_fixture("compressed.bin")), "is compressed (method 8); tfm reads entries stored uncompressed");
  const std::string whole = testing::read_file(torch_fixture("state_dict.bin"));
  EXPECT_REFUSED(io::parse_torch_checkpoint(whole.substr(0, whole.size() / 2), "cut"), "cut: not a zip archive");
  std::string flipped = whole;
  flipped[flipped.find("data.pkl") + 200] ^= 1;  // a byte of the pickle
  EXPECT_REFUSED(io::parse_torch_checkpoint(flipped, "flipped"), "checksum mismatch in entry");
  EXPECT_REFUSED(io::read_torch_checkpoint(torch_fixture("missing.bin")), "cannot open");
}

// --- Archives made here, to say what torch never writes.

std::string le(uint64_t v, int bytes) {
  std::string out;
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
  return out;
}

uint32_t crc32(const std::string& data) {  // zlib's, bit by bit
  uint32_t crc = 0xFFFFFFFF;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320 & (0 - (crc & 1)));
  }
  return ~crc;
}

// A zip archive of stored entries, as torch writes one (without its alignment padding);
// with `zip64`, every size and offset in zip64's fields, as in archives over 4 GiB.
std::string zip_of(const std::vector<std::pair<std::string, std::string>>& entries, bool zip64 = false) {
  const uint64_t overflowed = 0xFFFFFFFF;
  std::string body, directory;
  for (const auto& [name, data] : entries) {
    const std::string sizes = le(data.size(), 8) + le(data.size(), 8);
    const std::string local_extra = zip64 ? le(1, 2) + le(16, 2) + sizes : "";
    const std::string central_extra = zip64 ? le(1, 2) + le(24, 2) + sizes + le(body.size(), 8) : "";
    const uint64_t size = zip64 ? overflowed : data.size();
    const std::string fields = le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(crc32(data), 4) + le(size, 4) + le(size, 4) + le(name.size(), 2);
    directory += le(0x02014b50, 4) + le(45, 2) + le(45, 2) + fields + le(central_extra.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
                 le(zip64 ? overflowed : body.size(), 4) + name + central_extra;
    body += le(0x04034b50, 4) + le(45, 2) + fields + le(local_extra.size(), 2) + name + local_extra + data;
  }
  std::string zip64_end;  // its end record, then the locator that points at it
  if (zip64)
    zip64_end = le(0x06064b50, 4) + le(44, 8) + le(45, 2) + le(45, 2) + le(0, 4) + le(0, 4) + le(entries.size(), 8) + le(entries.size(), 8) +
                le(directory.size(), 8) + le(body.size(), 8) + le(0x07064b50, 4) + le(0, 4) + le(body.size() + directory.size(), 8) + le(1, 4);
  const std::string count = le(zip64 ? 0xFFFF : entries.size(), 2);
  return body + directory + zip64_end + le(0x06054b50, 4) + le(0, 4) + count + count + le(zip64 ? overflowed : directory.size(), 4) +
         le(zip64 ? overflowed : body.size(), 4) + le(0, 2);
}

// Pickle pieces: a string, an integer (LONG1, 8 bytes), a tuple of integers.
std::string str(const std::string& s) { return "X" + le(s.size(), 4) + s; }
std::string integer(int64_t v) { return "\x8a\x08" + le(static_cast<uint64_t>(v), 8); }
std::string ints(const std::vector<int64_t>& v) {
  std::string out = "(";
  for (int64_t x : v) out += integer(x);
  return out + "t";
}

// {"w": _rebuild_tensor_v2(storage "0" of `numel` elements of torch.<type>, offset, shape, strides)}
// as torch.save's pickle has it.
std::string state_dict_pickle(const std::string& type, int64_t numel, int64_t offset, const std::vector<int64_t>& shape,
                              const std::vector<int64_t>& strides) {
  const std::string storage = "(" + str("storage") + "ctorch\n" + type + "\n" + str("0") + str("cpu") + integer(numel) + "tQ";
  const std::string args = "(" + storage + integer(offset) + ints(shape) + ints(strides) + "\x89" + "ccollections\nOrderedDict\n)Rt";
  return std::string("\x80\x02}(") + str("w") + "ctorch._utils\n_rebuild_tensor_v2\n" + args + "Ru.";
}

std::string checkpoint(const std::string& pickle, const std::string& storage) {
  return zip_of({{"archive/data.pkl", pickle}, {"archive/data/0", storage}, {"archive/version", "3\n"}});
}

std::string floats(const std::vector<float>& v) { return std::string(reinterpret_cast<const char*>(v.data()), 4 * v.size()); }

TEST(TorchCheckpoint, ArchivesMadeHereReadAsTorchWouldReadThem) {
  // A [2, 2] view at offset 1 of a storage of 6, transposed: [[1, 3], [2, 4]].
  const io::SafeTensors file =
      io::parse_torch_checkpoint(checkpoint(state_dict_pickle("FloatStorage", 6, 1, {2, 2}, {1, 2}), floats({0, 1, 2, 3, 4, 5})), "made");
  ASSERT_EQ(file.tensors.size(), 1u);
  EXPECT_EQ(file.tensors[0].second.to_vector(), (std::vector<float>{1, 3, 2, 4}));
  // Zip64's sizes and offsets, as torch writes them for archives over 4 GiB.
  const std::vector<std::pair<std::string, std::string>> entries = {{"archive/data.pkl", state_dict_pickle("FloatStorage", 2, 0, {2}, {1})},
                                                                    {"archive/data/0", floats({5, 6})}};
  EXPECT_EQ(io::parse_torch_checkpoint(zip_of(entries, true), "zip64").tensors[0].second.to_vector(), (std::vector<float>{5, 6}));
  // Any folder name; the byte order named little-endian.
  const std::string pickle = state_dict_pickle("FloatStorage", 1, 0, {}, {});
  EXPECT_EQ(io::parse_torch_checkpoint(zip_of({{"pytorch_model/byteorder", "little"}, {"pytorch_model/data.pkl", pickle},
                                                {"pytorch_model/data/0", floats({7})}}), "folder").tensors[0].second.item(),
            7.0f);
}

TEST(TorchCheckpoint, MalformedArchivesAndPicklesAreOneLine) {
  const std::string four = floats({0, 1, 2, 3});
  const auto parse = [](const std::string& bytes) { return io::parse_torch_checkpoint(bytes, "made"); };
  const auto parse_pickle = [](const std::string& pickle) { return io::unpickle_state_dict(pickle, "made"); };
  // Opcodes a state dict never needs, known and unknown; an unknown global.
  EXPECT_REFUSED(parse_pickle("\x80\x02(i__builtin__\nobject\n."), "the pickle's opcode INST (0x69) at byte 3 is not one a state dict needs");
  EXPECT_REFUSED(parse_pickle("\x80\x02\xff."), "the pickle's opcode 0xff at byte 2");
  EXPECT_REFUSED(parse_pickle("\x80\x02" + str("os") + str("system") + "\x93."), "calls for 'os.system'");
  EXPECT_REFUSED(parse_pickle("\x80\x02" "ctorch\nload\n."), "calls for 'torch.load'");
  // Truncated pickles: an argument past the end, no STOP.
  EXPECT_REFUSED(parse_pickle(std::string("\x80\x02X\xff\x00\x00\x00" "ab", 9)), "the pickle is truncated");
  EXPECT_REFUSED(parse_pickle("\x80\x02}"), "ends without STOP");
  EXPECT_REFUSED(parse_pickle("\x80\x02K\x01."), "holds an integer, not a state dict");
  EXPECT_REFUSED(parse_pickle("\x80\x02}(" + str("w") + "K\x01u."), "entry 'w' is an integer, not a tensor");
  EXPECT_REFUSED(parse_pickle("\x80\x02h\x05."), "memo entry 5 fetched at byte 2 was never stored");
  EXPECT_REFUSED(parse_pickle("\x80\x02R."), "takes a value from an empty stack");
  // Huge declared sizes: a storage the archive does not hold, a view beyond its storage,
  // dimensions beyond any tensor, an expanded view.
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", int64_t{1} << 39, 0, {4}, {1}), four)),
                 "its storages declare more bytes than the file's");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", 5, 0, {4}, {1}), four)),
                 "storage '0' holds 16 bytes, not the 20 of 5 elements of torch.FloatStorage");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", 4, 1, {4}, {1}), four)), "reaches beyond its storage of 4 elements");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", 4, 0, {int64_t{1} << 50}, {0}), four)), "a tensor's shape holds 1125899906842624");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", 4, 0, {1000, 4}, {0, 1}), four)), "an expanded view, which tfm does not read");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("FloatStorage", 1, 0, {}, {}), floats({INFINITY}))), "tensor 'w' contains a non-finite value");
  EXPECT_REFUSED(parse(checkpoint(state_dict_pickle("ShortStorage", 2, 0, {2}, {1}), four)), "calls for 'torch.ShortStorage'");
  // Archives: no data.pkl, a missing storage, a big-endian file, a bad directory.
  EXPECT_REFUSED(parse(zip_of({{"archive/version", "3\n"}})), "a zip archive without <folder>/data.pkl");
  EXPECT_REFUSED(parse(zip_of({{"archive/data.pkl", state_dict_pickle("FloatStorage", 4, 0, {4}, {1})}})), "storage '0' is missing from the archive");
  EXPECT_REFUSED(parse(zip_of({{"archive/byteorder", "big"}, {"archive/data.pkl", "."}})), "stored in 'big' byte order");
  std::string bad_count = checkpoint(state_dict_pickle("FloatStorage", 4, 0, {4}, {1}), four);
  bad_count.replace(bad_count.size() - 14, 4, le(0xFFFE, 2) + le(0xFFFE, 2));  // the entries the directory declares
  EXPECT_REFUSED(parse(bad_count), "made: malformed zip archive (central directory entry 3)");
  EXPECT_REFUSED(parse(std::string(30, 'x')), "made: not a zip archive");
}

}  // namespace
}  // namespace tfm
