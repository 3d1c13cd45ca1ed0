#include "serve/metrics.h"

#include <algorithm>
#include <sstream>

namespace tfm::serve {

namespace {

const std::vector<double> kLatencyBounds = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
const std::vector<double> kBatchBounds = {1, 2, 4, 8, 16, 32, 64, 128};

void header(std::ostringstream& out, const std::string& name, const char* type, const std::string& help) {
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
}

std::string braces(const std::string& labels) { return labels.empty() ? "" : "{" + labels + "}"; }

std::string with(const std::string& labels, const std::string& more) { return labels.empty() ? more : labels + "," + more; }

}  // namespace

void Metrics::Histogram::observe(double v) {
  if (counts.empty()) counts.assign(bounds.size() + 1, 0);
  size_t i = 0;
  while (i < bounds.size() && v > bounds[i]) ++i;
  ++counts[i], sum += v, ++total;
}

double Metrics::Rate::per_second() const {
  if (samples.size() < 2) return 0;
  const double seconds = std::chrono::duration<double>(samples.back().first - samples.front().first).count();
  return seconds > 0 ? (samples.back().second - samples.front().second) / seconds : 0;
}

void Metrics::request(const std::string& endpoint, int status, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{endpoint, status}];
  Histogram& h = latency_[endpoint];
  h.bounds = kLatencyBounds;
  h.observe(seconds);
}

void Metrics::batch(const std::string& model, int64_t sentences, int64_t padded_tokens) {
  const std::lock_guard<std::mutex> lock(mutex_);
  Histogram& h = batch_sentences_[model];
  h.bounds = kBatchBounds;
  h.observe(static_cast<double>(sentences));
  batch_tokens_[model] += static_cast<double>(padded_tokens);
}

void Metrics::add_gauge(Gauge gauge) {
  const std::lock_guard<std::mutex> lock(mutex_);
  gauges_.push_back(std::move(gauge));
}

void Metrics::add_counter(Gauge counter) {
  const std::lock_guard<std::mutex> lock(mutex_);
  counters_.push_back(std::move(counter));
  rates_.emplace_back();
}

void Metrics::tick() {
  const std::lock_guard<std::mutex> lock(mutex_);
  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < counters_.size(); ++i) {
    rates_[i].samples.emplace_back(now, counters_[i].read());
    while (now - rates_[i].samples.front().first > std::chrono::seconds(10)) rates_[i].samples.pop_front();
  }
}

std::string Metrics::text() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  std::ostringstream out;
  out.precision(10);
  header(out, "tfm_requests_total", "counter", "Requests answered, by endpoint and status code.");
  for (const auto& [key, n] : requests_)
    out << "tfm_requests_total{endpoint=\"" << key.first << "\",code=\"" << key.second << "\"} " << n << "\n";
  auto histograms = [&](const char* name, const char* help, const char* label, const std::map<std::string, Histogram>& hs) {
    header(out, name, "histogram", help);
    for (const auto& [key, h] : hs) {
      const std::string l = std::string(label) + "=\"" + key + "\"";
      int64_t cumulative = 0;
      for (size_t i = 0; i < h.bounds.size(); ++i)
        out << name << "_bucket{" << with(l, "le=\"") << h.bounds[i] << "\"} " << (cumulative += h.counts[i]) << "\n";
      out << name << "_bucket{" << with(l, "le=\"+Inf\"") << "} " << h.total << "\n";
      out << name << "_sum{" << l << "} " << h.sum << "\n" << name << "_count{" << l << "} " << h.total << "\n";
    }
  };
  histograms("tfm_request_duration_seconds", "Time from a request's arrival to its answer (a stream: to its end).", "endpoint", latency_);
  histograms("tfm_batch_sentences", "Sentences per translation batch (requests batched together).", "model", batch_sentences_);
  header(out, "tfm_batch_tokens_total", "counter", "Padded source subwords of the translation batches searched.");
  for (const auto& [model, v] : batch_tokens_) out << "tfm_batch_tokens_total{model=\"" << model << "\"} " << v << "\n";
  // One header per name, its entries together (they were added model by model).
  auto family = [&](const std::vector<Gauge>& entries, const char* type, const std::function<void(size_t)>& line) {
    std::vector<size_t> order(entries.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].name < entries[b].name; });
    for (size_t k = 0; k < order.size(); ++k) {
      if (k == 0 || entries[order[k]].name != entries[order[k - 1]].name) header(out, entries[order[k]].name, type, entries[order[k]].help);
      line(order[k]);
    }
  };
  family(gauges_, "gauge", [&](size_t i) { out << gauges_[i].name << braces(gauges_[i].labels) << " " << gauges_[i].read() << "\n"; });
  family(counters_, "counter", [&](size_t i) { out << counters_[i].name << braces(counters_[i].labels) << " " << counters_[i].read() << "\n"; });
  std::vector<Gauge> rates;
  for (const Gauge& c : counters_)
    rates.push_back({c.name.substr(0, c.name.rfind("_total")) + "_per_second", "The counter of the same name per second, over the last 10 seconds.", c.labels, {}});
  family(rates, "gauge", [&](size_t i) { out << rates[i].name << braces(rates[i].labels) << " " << rates_[i].per_second() << "\n"; });
  return out.str();
}

}  // namespace tfm::serve
