#pragma once
// Every file tfm writes whole (checkpoints, vocabularies, PNGs, translations; the
// trainer's metrics.jsonl, appended to line by line, aside) and every directory it
// writes into goes through here, so that all writers treat the paths
// users give them the same way and report failures as one line naming the path.
#include <optional>
#include <string>
#include <string_view>

namespace tfm::io {

// An output file. A regular file, or a new one, is written to `<file>.tmp` beside
// it and renamed over it by commit(), so readers see the old file or the new one,
// never a partial write. Symlinks are followed first: a link keeps pointing at the
// file it names, and that file is the one replaced. Anything else that exists (a
// FIFO, /dev/null, a terminal) is written directly and never replaced; a directory
// is refused. Destroyed before commit() (an error, an exception), or interrupted by
// SIGINT, SIGTERM or SIGHUP once handle_output_signals() ran, it removes its
// temporary file. Errors are tfm::Error: "cannot write PATH: write failed (REASON)".
class OutputFile {
 public:
  explicit OutputFile(std::string path);
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  void write(std::string_view bytes);
  void commit();

 private:
  [[noreturn]] void fail(const char* what);
  void discard();

  std::string path_;     // as the user named it, for messages
  std::string target_;   // the file replaced on commit (symlinks followed)
  std::string tmp_;      // empty when writing directly
  bool existed_ = false;  // a previous file stays untouched on failure
  int fd_ = -1;
};

// The text output of a command (`-o PATH`, or standard output for "-"): standard
// output is written as the text comes (a failed write is an error at once); a file is
// an OutputFile, opened at construction (a bad path fails before any work) and
// replaced only by finish(), with the complete output.
class TextOutput {
 public:
  explicit TextOutput(const std::string& path);
  void write(std::string_view text);
  void finish();

 private:
  std::optional<OutputFile> file_;  // none: standard output
};

// Writes `bytes` to `path` as OutputFile does.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Creates `dir` and its parents; a clear error when that is impossible (a file of that name...).
void create_directories(const std::string& dir);

// Holds an exclusive lock on `<dir>/.lock` while it lives (flock: the kernel releases
// it however the process ends, SIGKILL included). Fails at once, naming `dir`, when
// another process holds it.
class DirectoryLock {
 public:
  explicit DirectoryLock(const std::string& dir);
  ~DirectoryLock();
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  int fd_ = -1;
};

// For main, once at startup: writes past the file-size limit fail with EFBIG (and
// the usual error) instead of killing the process with SIGXFSZ, and SIGINT, SIGTERM
// or SIGHUP remove an OutputFile's temporary file before ending the process.
void handle_output_signals();
// Async-signal-safe: removes the temporary file of the OutputFile being written, if
// any (for signal handlers that end the process themselves).
void discard_pending_output() noexcept;

// Throws "writing stdout: REASON" if a write to standard output failed (a full disk,
// the file-size limit...); flushes std::cout and stdout first.
void check_stdout();

}  // namespace tfm::io
