#pragma once
// `tfm serve`: an HTTP/1.1 server over the library's model classes (tfm::Translator,
// Generator, Encoder, Classifier). It owns no model code: it parses requests, enforces
// limits, waits for the library's answers and writes them as JSON (docs/SERVING.md).
#include <cstdint>
#include <ostream>
#include <stop_token>
#include <string>
#include <vector>

namespace tfm::serve {

struct ModelSpec {
  std::string name, path;
};

// A LoRA adapter's directory for the language model `model` (empty: the only model served).
struct AdapterSpec {
  std::string model, dir;
};

struct ServerOptions {
  std::vector<ModelSpec> models;
  std::vector<AdapterSpec> loras;  // at most one per model, merged into its weights as it loads
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: any free port (the line printed on start says which)
  std::string api_key;             // when set, every request but GET /, /health and /favicon.ico needs it
  std::string precision = "f32";   // the models' products
  std::string device = "cpu";      // where the models compute
  int threads = 0;                 // 0: the process's OpenMP setting
  int workers = 0;                 // translation batches searched at once (0: one per thread)
  int64_t batch = 32;              // sentences per translation batch
  int64_t max_tokens = 4096;       // padded source subwords per translation batch
  int64_t batch_wait_ms = 2;       // how long a batch that is not full waits for other requests
  int64_t max_items = 64;          // sentences, prompts or images per request
  int64_t max_sentence_tokens = 256;  // subwords of a sentence or prompt
  int64_t max_new_tokens = 1024;   // tokens a generation request may ask for
  int64_t max_cache_mb = 0;        // a language model's keys and values, at most (0: no bound; requests beyond wait)
  int64_t max_queue = 256;         // requests admitted at once (the next gets 503)
  int64_t max_body = 4 << 20;      // bytes of a request body (413 beyond)
  int64_t max_image_pixels = 16 << 20;  // pixels of a request's images together, as their headers claim (400 beyond)
  int max_connections = 4096;      // connections open at once (the next is answered 503 and closed)
  double keep_alive = 5;           // seconds an idle connection waits for its next request
  double timeout = 60;             // seconds a request may take (504 beyond)
  double drain_timeout = 30;       // seconds to finish admitted requests after a stop (503 beyond)
};

// Loads the models, listens, and serves until `stop` is requested; then stops accepting,
// finishes the admitted requests within `drain_timeout` and returns. Progress lines go to
// `log`. Throws tfm::Error where a model cannot be loaded or the address is taken.
void serve(const ServerOptions& options, std::stop_token stop, std::ostream& log);

}  // namespace tfm::serve
