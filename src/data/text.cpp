#include "data/text.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "data/unicode.h"
#include "tensor/error.h"

namespace tfm::data {

const char* text_problem(std::string_view line) {
  if (line.find('\0') != std::string_view::npos) return "contains a NUL byte (binary file?)";
  return valid_utf8(line) ? nullptr : "invalid UTF-8";
}

namespace {

// gzread reads plain files unchanged, so one path serves both.
gzFile open_text(const std::string& path) {
  std::error_code ec;
  TFM_CHECK(!std::filesystem::is_directory(path, ec), path << ": is a directory, not a text file");
  gzFile f = gzopen(path.c_str(), "rb");
  TFM_CHECK(f, path << ": cannot open (" << std::strerror(errno) << ")");
  return f;
}

// Appends up to 64 KiB to `content`; returns false at the end of the file.
bool read_chunk(gzFile f, const std::string& path, std::string& content) {
  char buf[1 << 16];
  const int n = gzread(f, buf, sizeof buf);
  if (n > 0) return content.append(buf, static_cast<size_t>(n)), true;
  int err = 0;
  const char* msg = gzerror(f, &err);
  TFM_CHECK(n == 0 && err == Z_OK, path << ": read error (" << (msg ? msg : "") << "; truncated or corrupted gzip?)");
  return false;
}

}  // namespace

std::string read_file(const std::string& path) {
  gzFile f = open_text(path);
  std::string content;
  try {
    while (read_chunk(f, path, content)) {
    }
  } catch (...) {
    gzclose(f);
    throw;
  }
  gzclose(f);
  return content;
}

std::vector<std::string> read_lines(const std::string& path) {
  LineReader in(path);
  std::vector<std::string> lines;
  for (std::string line; in.next(line);) lines.push_back(std::move(line));
  return lines;
}

LineReader::LineReader(const std::string& path) : origin_(path == "-" ? "stdin" : path) {
  if (path != "-") file_ = open_text(path);
}

LineReader::~LineReader() {
  if (file_) gzclose(file_);
}

bool LineReader::next(std::string& line) {
  if (!file_) return std::getline(std::cin, line) && take(line);
  for (;;) {
    const size_t end = buffer_.find('\n', pos_);
    if (end != std::string::npos) {
      line.assign(buffer_, pos_, end - pos_);
      pos_ = end + 1;
      return take(line);
    }
    buffer_.erase(0, pos_), pos_ = 0;
    if (!read_chunk(file_, origin_, buffer_)) break;
  }
  if (buffer_.empty()) return false;  // the last line had a terminator
  line = std::move(buffer_);
  buffer_.clear();
  return take(line);
}

bool LineReader::take(std::string& line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  ++line_no_;
  const char* problem = text_problem(line);
  TFM_CHECK(!problem, origin_ << ":" << line_no_ << ": " << problem);
  return true;
}

ParallelCorpus read_parallel(const std::string& src_path, const std::string& tgt_path) {
  std::vector<std::string> src = read_lines(src_path), tgt = read_lines(tgt_path);
  TFM_CHECK(src.size() == tgt.size(), src_path << " has " << src.size() << " lines but " << tgt_path << " has " << tgt.size()
                                               << "; a parallel corpus needs one line per sentence on each side");
  ParallelCorpus c;
  for (size_t i = 0; i < src.size(); ++i) {
    auto blank = [](const std::string& s) { return s.find_first_not_of(" \t") == std::string::npos; };
    if (blank(src[i]) || blank(tgt[i])) {
      ++c.empty_skipped;
      continue;
    }
    c.src.push_back(std::move(src[i]));
    c.tgt.push_back(std::move(tgt[i]));
  }
  return c;
}

}  // namespace tfm::data
