// `tfm serve`: the HTTP server (src/serve) over one or more checkpoints, until Ctrl-C or SIGTERM.
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <utility>

#include "cli/commands.h"
#include "cli/stop_on_signal.h"
#include "cli/validators.h"
#include "ops/linear_products.h"
#include "serve/server.h"
#include "tensor/error.h"

namespace tfm::cli {

namespace {

// NAME=PATH as {NAME, PATH}, and PATH alone as {"", PATH}: a '=' is a name's only where the whole
// is no file or directory and no '/' comes before it (a folder's name may hold one).
std::pair<std::string, std::string> named_path(const std::string& spec) {
  const size_t eq = spec.find('=');
  const bool named = eq != std::string::npos && eq > 0 && spec.find('/') > eq && !std::filesystem::exists(spec);
  return named ? std::pair{spec.substr(0, eq), spec.substr(eq + 1)} : std::pair{std::string(), spec};
}

}  // namespace

void add_serve_command(CLI::App& app, int& exit_code) {
  auto o = std::make_shared<serve::ServerOptions>();
  auto models = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand("serve", "Serve checkpoints over HTTP: translate, generate, OpenAI completions, embed, classify (docs/SERVING.md)");
  cmd->add_option("--model", *models, "Checkpoint to serve, as PATH or NAME=PATH; repeat for several (a request names its \"model\")")
      ->required();
  auto loras = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--lora", *loras,
                  "A LoRA adapter (PEFT's directory) of a language model served, as DIR (the only model) or NAME=DIR; merged into "
                  "its weights as it loads; repeat for several models");
  cmd->add_option("--host", o->host, "Address to listen on (0.0.0.0: every interface; use --api-key then)")->capture_default_str();
  cmd->add_option("--port", o->port, "Port to listen on (0: any free port, printed on start)")->capture_default_str()->check(in_range(0, 65535));
  cmd->add_option("--api-key", o->api_key, "Key every request must send (Authorization: Bearer KEY); default: $TFM_API_KEY");
  CLI::Option_group* batching = cmd->add_option_group("Batching");
  batching->add_option("--batch", o->batch, "Sentences per translation batch")->capture_default_str()->check(in_range<int64_t>(1, 4096));
  batching->add_option("--max-tokens", o->max_tokens, "Source subwords per translation batch, padding included")
      ->capture_default_str()->check(in_range<int64_t>(1, 1 << 24));
  batching->add_option("--batch-wait-ms", o->batch_wait_ms, "How long a translation batch that is not full waits for other requests")
      ->capture_default_str()->check(in_range<int64_t>(0, 10000));
  batching->add_option("--workers", o->workers, "Translation batches searched at once (0: one per thread)")
      ->capture_default_str()->check(in_range(0, 1024));
  CLI::Option_group* limits = cmd->add_option_group("Limits");
  limits->add_option("--max-items", o->max_items, "Sentences, prompts or images per request (400 beyond)")
      ->capture_default_str()->check(in_range<int64_t>(1, 1 << 20));
  limits->add_option("--max-sentence-tokens", o->max_sentence_tokens, "Subwords of a sentence or prompt (400 beyond)")
      ->capture_default_str()->check(in_range<int64_t>(1, 1 << 20));
  limits->add_option("--max-new-tokens", o->max_new_tokens, "Tokens a generation request may ask for (400 beyond)")
      ->capture_default_str()->check(in_range<int64_t>(0, 1 << 20));
  limits->add_option("--max-cache-mb", o->max_cache_mb,
                     "MiB a language model's keys and values may take: as many requests run at once as fit with their whole context "
                     "window, the others wait (0: no bound)")
      ->capture_default_str()->check(in_range<int64_t>(0, int64_t{1} << 30));
  limits->add_option("--max-queue", o->max_queue, "Requests admitted at once (503 with Retry-After beyond)")
      ->capture_default_str()->check(in_range<int64_t>(1, 1 << 20));
  limits->add_option("--max-body", o->max_body, "Bytes of a request body (413 beyond)")->capture_default_str()->check(in_range<int64_t>(1, 1 << 30));
  limits->add_option("--max-image-pixels", o->max_image_pixels,
                     "Pixels of a request's images together, as their headers claim, refused (400) before they are decoded")
      ->capture_default_str()->check(in_range<int64_t>(1, int64_t{1} << 26));
  limits->add_option("--max-connections", o->max_connections, "Connections open at once (503 beyond; the open-file limit is raised to fit)")
      ->capture_default_str()->check(in_range(1, 1 << 20));
  limits->add_option("--keep-alive", o->keep_alive, "Seconds an idle connection waits for its next request")
      ->capture_default_str()->check(in_range(0.001, 3600.0));
  limits->add_option("--timeout", o->timeout, "Seconds a request may take (504 beyond)")->capture_default_str()->check(in_range(0.001, 86400.0));
  limits->add_option("--drain-timeout", o->drain_timeout, "Seconds to finish admitted requests after SIGTERM (503 beyond)")
      ->capture_default_str()->check(in_range(0.0, 86400.0));
  cmd->callback([o, models, loras, cmd, &exit_code] {
    for (const std::string& m : *models) {
      const auto [name, path] = named_path(m);
      o->models.push_back({name, path});
    }
    for (const std::string& l : *loras) {
      const auto [name, dir] = named_path(l);
      TFM_CHECK(std::filesystem::is_directory(dir), "--lora " << l << ": " << dir << " is not a directory (a LoRA adapter is PEFT's directory)");
      o->loras.push_back({name, dir});
    }
    TFM_CHECK(!cmd->count("--api-key") || !o->api_key.empty(), "--api-key is empty: give a key, or leave the flag out");
    if (!cmd->count("--api-key"))
      if (const char* key = std::getenv("TFM_API_KEY")) {
        o->api_key = key;
        TFM_CHECK(!o->api_key.empty(), "TFM_API_KEY is set but empty: give a key, or unset it");
      }
    // HTTP drops spaces and tabs at a header value's ends, and a header holds no control characters: such a key could never be sent.
    const bool sendable = o->api_key.empty() || (std::string(" \t").find(o->api_key.front()) == std::string::npos &&
                                                 std::string(" \t").find(o->api_key.back()) == std::string::npos &&
                                                 std::none_of(o->api_key.begin(), o->api_key.end(), [](unsigned char c) { return c < 32 || c == 127; }));
    TFM_CHECK(sendable, "the API key starts or ends with a space or tab, or holds a control character: no request could send it (HTTP drops them)");
    o->precision = to_string(precision_flag(*cmd));
    o->device = device_flag(*cmd);
    o->threads = omp_get_max_threads();
    StopOnSignal stop(/*on_broken_pipe=*/false);  // the first SIGINT, SIGTERM or SIGHUP drains; a second ends the process at once
    try {
      serve::serve(*o, stop.token(), std::cerr);
    } catch (const Error&) {
      throw;
    } catch (const std::runtime_error& e) {  // the library's and the server's own: one line, as tfm's errors are
      throw Error(e.what());
    }
    exit_code = 0;
  });
}

}  // namespace tfm::cli
