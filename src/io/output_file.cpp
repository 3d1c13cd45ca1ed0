#include "io/output_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <utility>

#include "tensor/error.h"

namespace tfm::io {

namespace fs = std::filesystem;

namespace {

// The temporary file being written, for the signal handler to remove. tfm writes
// one output file at a time; a second one written meanwhile is only not covered.
std::atomic<const char*> g_pending{nullptr};

// Where a chain of symlinks ends: the last link's target, even when that does not exist yet.
std::string follow_links(const std::string& path) {
  fs::path p(path);
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    TFM_CHECK(hops < 40, "cannot write " << path << ": too many levels of symbolic links");
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return p.string();
}

// Persists a rename: the directory entry lives in the directory.
void sync_directory(const std::string& file) {
  const std::string dir = fs::path(file).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

void on_signal(int sig) {
  discard_pending_output();
  std::signal(sig, SIG_DFL);
  std::raise(sig);  // end as the signal would have, exit status included
}

}  // namespace

OutputFile::OutputFile(std::string path) : path_(std::move(path)) {
  struct stat st;
  const bool exists = ::stat(path_.c_str(), &st) == 0;  // through symlinks
  TFM_CHECK(!(exists && S_ISDIR(st.st_mode)), "cannot write " << path_ << ": it is a directory");
  if (exists && !S_ISREG(st.st_mode)) {  // a FIFO, a device, a terminal: nothing to replace
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail("open");
    return;
  }
  existed_ = exists;
  target_ = follow_links(path_);
  tmp_ = target_ + ".tmp";
  ::unlink(tmp_.c_str());  // a killed run's leftover, whatever it is (even a symlink)
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) fail("open");
  const char* none = nullptr;
  g_pending.compare_exchange_strong(none, tmp_.c_str());
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::write(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("write");
    bytes.remove_prefix(static_cast<size_t>(n));
  }
}

void OutputFile::commit() {
  if (!tmp_.empty() && ::fsync(fd_) != 0) fail("fsync");
  if (::close(std::exchange(fd_, -1)) != 0) fail("close");
  if (tmp_.empty()) return;
  if (::rename(tmp_.c_str(), target_.c_str()) != 0) fail("rename");
  const char* mine = tmp_.c_str();
  g_pending.compare_exchange_strong(mine, nullptr);
  tmp_.clear();
  sync_directory(target_);
}

void OutputFile::fail(const char* what) {
  const std::string reason = std::strerror(errno);
  discard();
  throw Error("cannot write " + path_ + ": " + what + " failed (" + reason + ")" + (existed_ ? "; the previous file is untouched" : ""));
}

void OutputFile::discard() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
  if (tmp_.empty()) return;
  const char* mine = tmp_.c_str();
  g_pending.compare_exchange_strong(mine, nullptr);
  ::unlink(tmp_.c_str());
  tmp_.clear();
}

TextOutput::TextOutput(const std::string& path) {
  if (path != "-") file_.emplace(path);
}

void TextOutput::write(std::string_view text) {
  if (file_) return file_->write(text);
  std::cout << text;
  check_stdout();
}

void TextOutput::finish() {
  if (file_) file_->commit();
}

void write_file_atomic(const std::string& path, const std::string& bytes) {
  OutputFile out(path);
  out.write(bytes);
  out.commit();
}

void create_directories(const std::string& dir) {
  std::error_code ec;
  if (dir.empty() || fs::is_directory(dir, ec)) return;
  TFM_CHECK(!fs::exists(dir, ec), "cannot use " << dir << " as a directory: a file of that name exists");
  fs::create_directories(dir, ec);
  TFM_CHECK(!ec, "cannot create the directory " << dir << " (" << ec.message() << ")");
}

DirectoryLock::DirectoryLock(const std::string& dir) {
  const std::string path = (fs::path(dir) / ".lock").string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  TFM_CHECK(fd_ >= 0, "cannot open the lock file " << path << " (" << std::strerror(errno) << ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  const int err = errno;
  ::close(fd_);
  TFM_CHECK(err != EWOULDBLOCK, dir << " is in use by another tfm run (it holds " << path << "); wait for it to finish or choose another directory");
  throw Error("cannot lock " + path + " (" + std::strerror(err) + ")");
}

DirectoryLock::~DirectoryLock() { ::close(fd_); }

void handle_output_signals() {
  std::signal(SIGXFSZ, SIG_IGN);
  for (int sig : {SIGINT, SIGTERM, SIGHUP})
    if (std::signal(sig, on_signal) == SIG_IGN) std::signal(sig, SIG_IGN);  // keep nohup's and background jobs' choice
}

void discard_pending_output() noexcept {
  if (const char* tmp = g_pending.exchange(nullptr)) ::unlink(tmp);
}

void check_stdout() {
  std::cout.flush();
  // stdio drops what it could not write, so a failure shows in this flush or in the
  // error flag of an earlier one. errno is the failed write's unless later calls (a
  // training run's file work) have overwritten it: then only a write's errors are told.
  if (std::fflush(stdout) == 0 && !std::ferror(stdout)) return;
  const int reason = errno;
  const bool a_write_error = reason == ENOSPC || reason == EPIPE || reason == EFBIG || reason == EIO || reason == EDQUOT || reason == EBADF;
  throw Error(std::string("writing stdout: ") +
              (a_write_error ? std::strerror(reason) : "a write failed (a full disk, a closed pipe or a file-size limit)"));
}

}  // namespace tfm::io
