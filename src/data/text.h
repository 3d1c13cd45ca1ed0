#pragma once
// Reading text corpora: one sentence a line, plain or gzip-compressed (.gz),
// UTF-8 validated. Errors name the file and the line.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

struct gzFile_s;  // zlib's

namespace tfm::data {

// Why a line of text cannot be used ("contains a NUL byte...", "invalid UTF-8"), or nullptr if it can.
const char* text_problem(std::string_view line);

// The whole of a file as bytes, decompressed if it is gzip; a truncated or corrupt
// gzip stream is an error naming the file.
std::string read_file(const std::string& path);

// All lines of a file (plain or gzip) or of standard input ("-"), read by LineReader.
std::vector<std::string> read_lines(const std::string& path);

// The lines of a file (plain or gzip) or of standard input ("-"), one at a time, for
// input too long to hold at once, without terminators ("\n" or "\r\n"); a NUL byte or
// invalid UTF-8 is an error naming origin:line.
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  // The next line without its terminator; false at the end.
  bool next(std::string& line);
  // "stdin" or the path, for messages.
  const std::string& origin() const { return origin_; }

 private:
  bool take(std::string& line);  // strips "\r", counts and checks the line
  std::string origin_;           // the path, or "stdin"
  gzFile_s* file_ = nullptr;     // nullptr: standard input
  std::string buffer_;
  size_t pos_ = 0;
  int64_t line_no_ = 0;
};

struct ParallelCorpus {
  std::vector<std::string> src, tgt;
  int64_t empty_skipped = 0;  // pairs dropped because either side was empty
};

// Line i of src_path translates line i of tgt_path. Fails on different line
// counts or invalid UTF-8; skips (and counts) pairs with an empty side.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path);

}  // namespace tfm::data
