#pragma once
// Reading text corpora: one sentence a line, plain or gzip-compressed (.gz),
// UTF-8 validated. Errors name the file and the line.
#include <string>
#include <string_view>
#include <vector>

namespace tfm::data {

bool valid_utf8(std::string_view s);

// The whole of a file as bytes, decompressed if it is gzip; a truncated or corrupt
// gzip stream is an error naming the file.
std::string read_file(const std::string& path);

// Lines of `content` without terminators ("\n" or "\r\n"); a NUL byte or invalid
// UTF-8 is an error naming origin:line.
std::vector<std::string> split_lines(const std::string& content, const std::string& origin);

// All lines of a file, without line terminators ("\n" or "\r\n").
std::vector<std::string> read_lines(const std::string& path);

struct ParallelCorpus {
  std::vector<std::string> src, tgt;
  int64_t empty_skipped = 0;  // pairs dropped because either side was empty
};

// Line i of src_path translates line i of tgt_path. Fails on different line
// counts or invalid UTF-8; skips (and counts) pairs with an empty side.
ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path);

}  // namespace tfm::data
