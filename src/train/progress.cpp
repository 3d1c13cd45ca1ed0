#include "train/progress.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace tfm::training {

std::string format_duration(double seconds) {
  const int64_t s = static_cast<int64_t>(std::llround(std::max(0.0, seconds)));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", static_cast<long>(s / 3600), static_cast<long>(s % 3600 / 60));
  else if (s >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", static_cast<long>(s / 60), static_cast<long>(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%lds", static_cast<long>(s));
  return buf;
}

Progress::Progress(int64_t total_steps, int64_t first_step, int64_t log_every, std::string unit, std::ostream* lines, bool silent)
    : total_(total_steps), first_(first_step), log_every_(std::max<int64_t>(1, log_every)), unit_(std::move(unit)), lines_(lines),
      tty_(!lines && ::isatty(::fileno(stderr)) != 0), silent_(silent), start_(std::chrono::steady_clock::now()) {}

template <class... Args>
void Progress::print(const char* format, Args... args) {
  if (silent_) return;
  char line[512];
  std::snprintf(line, sizeof line, format, args...);
  if (lines_) {
    *lines_ << line << std::flush;
  } else {
    std::fputs(line, stderr);
    std::fflush(stderr);
  }
}

void Progress::update(int64_t step, double loss, double lr, int64_t tokens, const std::string& label) {
  const std::string lead = label.empty() ? "" : label + " ";
  tokens_ += tokens;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double done = static_cast<double>(step - first_);
  const double tok_per_s = elapsed > 0 ? tokens_ / elapsed : 0.0;
  double eta = done > 0 ? elapsed / done * static_cast<double>(total_ - step) : 0.0;
  if (time_limit_ > 0) eta = std::min(eta, std::max(0.0, time_limit_ - elapsed));
  if (tty_) {
    constexpr int kWidth = 24;
    const int filled = static_cast<int>(kWidth * static_cast<double>(step) / static_cast<double>(std::max<int64_t>(total_, 1)));
    std::string bar(static_cast<size_t>(filled), '#');
    bar.append(static_cast<size_t>(kWidth - filled), '.');
    print("\r%s[%s] %ld/%ld loss %.4f lr %.2e %.0f %s/s ETA %s   ", lead.c_str(), bar.c_str(), static_cast<long>(step),
          static_cast<long>(total_), loss, lr, tok_per_s, unit_.c_str(), format_duration(eta).c_str());
  } else if (step % log_every_ == 0 || step == total_) {
    print("%sstep %ld/%ld loss %.4f lr %.3e %s/s %.0f elapsed %s eta %s\n", lead.c_str(), static_cast<long>(step),
          static_cast<long>(total_), loss, lr, unit_.c_str(), tok_per_s, format_duration(elapsed).c_str(), format_duration(eta).c_str());
  }
}

void Progress::finish() {
  if (tty_) print("%s", "\n");
}

std::string count_of(int64_t n, const std::string& singular, const std::string& plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

Counter::Counter(std::string what, std::FILE* out)
    : what_(std::move(what)), out_(out), tty_(::isatty(::fileno(out)) != 0), start_(std::chrono::steady_clock::now()) {}

Counter::~Counter() {
  if (tty_ && count_ > 0) std::fputc('\n', out_);  // before whatever is printed next, an error included
  std::fflush(out_);
}

void Counter::add(int64_t n) {
  count_ += n;
  if (!tty_) return;
  const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::fprintf(out_, "\r%s: %ld (%.1f/s)   ", what_.c_str(), static_cast<long>(count_), elapsed > 0 ? count_ / elapsed : 0.0);
  std::fflush(out_);
}

}  // namespace tfm::training
