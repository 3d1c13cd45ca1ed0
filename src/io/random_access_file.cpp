#include "io/random_access_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tensor/error.h"

namespace tfm::io {

RandomAccessFile::RandomAccessFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TFM_CHECK(fd_ >= 0, path << ": cannot open (" << std::strerror(errno) << ")");
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);  // (the destructor does not run for a constructor that throws)
    throw Error(path + ": cannot read (not a regular file)");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

RandomAccessFile::~RandomAccessFile() { ::close(fd_); }

// pread may return fewer bytes than asked (signals, network file systems): loop.
void RandomAccessFile::read(uint64_t offset, size_t n, char* dst) const {
  while (n > 0) {
    const ssize_t got = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    TFM_CHECK(got > 0, path_ << ": read failed (" << (got < 0 ? std::strerror(errno) : "the file shrank while being read") << ")");
    dst += got, offset += static_cast<uint64_t>(got), n -= static_cast<size_t>(got);
  }
}

ReadAt memory_reader(std::string_view bytes) {
  return [bytes](uint64_t offset, size_t n, char* dst) {
    if (n > 0) std::memcpy(dst, bytes.data() + offset, n);  // (an empty tensor's dst may be null)
  };
}

}  // namespace tfm::io
