#pragma once
// The handlers of tfm serve's endpoints (docs/SERVING.md): each reads its request,
// checks it against the limits, asks the library and writes the answer as JSON.
#include <string>

#include "serve/http.h"
#include "serve/lifecycle.h"
#include "serve/metrics.h"
#include "serve/models.h"
#include "serve/server.h"

namespace tfm::serve {

// What every handler reads.
struct Context {
  const ServerOptions& options;
  ModelSet& models;
  Metrics& metrics;
  Lifecycle& life;
};

// One request and its response. A handler that streams sets `streaming`: the stream's
// end, not the handler's return, then records the request in the metrics.
struct Call {
  const Request& req;
  Response& res;
  std::string endpoint;
  Clock::time_point started, deadline;
  bool streaming = false;
};

void translate(Context& c, Call& call);    // POST /v1/translate
void generate(Context& c, Call& call);     // POST /v1/generate
void completions(Context& c, Call& call);  // POST /v1/completions (OpenAI's)
void chat_completions(Context& c, Call& call);  // POST /v1/chat/completions (OpenAI's)
void embed(Context& c, Call& call);        // POST /v1/embed
void classify(Context& c, Call& call);     // POST /v1/classify
void attention(Context& c, Call& call);    // POST /v1/attention: every layer's and head's weights, for the web page

}  // namespace tfm::serve
