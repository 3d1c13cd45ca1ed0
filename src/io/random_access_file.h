#pragma once
// A regular file read at offsets (pread): the checkpoint readers take what they need of
// a large file, tensor by tensor, instead of holding a copy of the whole of it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace tfm::io {

// Bytes [offset, offset + n) of an input into dst; the caller has checked that they lie
// within it.
using ReadAt = std::function<void(uint64_t offset, size_t n, char* dst)>;

class RandomAccessFile {
 public:
  // Throws tfm::Error naming `path` where it cannot be opened or is not a regular file.
  explicit RandomAccessFile(const std::string& path);
  ~RandomAccessFile();
  RandomAccessFile(const RandomAccessFile&) = delete;
  RandomAccessFile& operator=(const RandomAccessFile&) = delete;

  uint64_t size() const { return size_; }
  void read(uint64_t offset, size_t n, char* dst) const;
  ReadAt reader() const {
    return [this](uint64_t offset, size_t n, char* dst) { read(offset, n, dst); };
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The same over bytes in memory (the fuzz targets' inputs), which outlive the reader.
ReadAt memory_reader(std::string_view bytes);

}  // namespace tfm::io
