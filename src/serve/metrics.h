#pragma once
// What GET /metrics reports, in Prometheus' text format: counters, gauges and
// histograms with labels. Every method is safe to call from many threads.
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tfm::serve {

class Metrics {
 public:
  // A finished request: its endpoint (the route, e.g. "/v1/translate"), status and seconds.
  void request(const std::string& endpoint, int status, double seconds);
  // A translation batch searched for `model`.
  void batch(const std::string& model, int64_t sentences, int64_t padded_tokens);

  // A gauge read when /metrics is asked for (queue depth, running generations); entries
  // of one name share its help and differ in their labels.
  struct Gauge {
    std::string name, help, labels;  // labels: `model="x"` or empty
    std::function<double()> read;
  };
  void add_gauge(Gauge gauge);
  // A counter kept elsewhere (a model's generated tokens), also shown per second over
  // the last 10 seconds as `<name minus _total>_per_second`. Entries of one name share
  // its help and differ in their labels.
  void add_counter(Gauge counter);
  // Samples the counters for their rates; the server calls it once a second.
  void tick();

  std::string text() const;

 private:
  struct Histogram {
    std::vector<double> bounds;
    std::vector<int64_t> counts;  // per bound, then +Inf
    double sum = 0;
    int64_t total = 0;
    void observe(double v);
  };
  using Clock = std::chrono::steady_clock;
  struct Rate {
    std::deque<std::pair<Clock::time_point, double>> samples;  // the last 11 seconds
    double per_second() const;
  };
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;     // (endpoint, status) -> count
  std::map<std::string, Histogram> latency_, batch_sentences_;  // by endpoint, by model
  std::map<std::string, double> batch_tokens_;                  // by model
  std::vector<Gauge> gauges_, counters_;
  std::vector<Rate> rates_;  // per counter
};

}  // namespace tfm::serve
