#include "serve/server.h"

#include <cctype>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

#include "serve/endpoints.h"
#include "serve/http_server.h"
#include "serve/web_page.h"

namespace tfm::serve {

namespace {

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool authorized(const Request& req, const std::string& key) {
  const std::string bearer = req.header("Authorization"), given = req.header("X-API-Key");
  auto same = [&](const std::string& a) {  // in time independent of where they differ
    if (a.size() != key.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ key[i]);
    return diff == 0;
  };
  return same(given) || (lowercase(bearer.substr(0, 7)) == "bearer " && same(bearer.substr(7)));
}

// Admitted requests each hold a worker; a few more check the requests beyond the queue
// and refuse them.
HttpLimits http_limits(const ServerOptions& o) {
  HttpLimits limits;
  limits.max_body = o.max_body, limits.max_connections = o.max_connections, limits.idle_seconds = o.keep_alive;
  limits.max_workers = static_cast<size_t>(o.max_queue) + 8;
  return limits;
}

class Server {
 public:
  Server(const ServerOptions& o, std::ostream& log)
      : options_(o), models_(o, metrics_, log), life_(o.max_queue), context_{o, models_, metrics_, life_}, http_(http_limits(o), app()) {
    metrics_.add_gauge({"tfm_queue_depth", "Requests admitted and not yet answered (waiting or computing).", "",
                        [this] { return static_cast<double>(life_.depth()); }});
    metrics_.add_gauge({"tfm_queue_limit", "Requests admitted at once (--max-queue).", "", [this] { return static_cast<double>(options_.max_queue); }});
    metrics_.add_gauge({"tfm_open_connections", "Client connections open.", "", [this] { return static_cast<double>(http_.open_connections()); }});
    routes();
  }

  void run(std::stop_token stop, std::ostream& log) {
    const int port = http_.start(options_.host, options_.port);
    // (before the listening line, which tells a script that the server is ready)
    if (http_.max_connections() < options_.max_connections)
      log << "tfm serve: at most " << http_.max_connections() << (http_.max_connections() == 1 ? " connection" : " connections") << " at once, not "
          << options_.max_connections
          << ": the open-file limit (ulimit -n) is lower\n";
    const bool ipv6 = options_.host.find(':') != std::string::npos;
    log << "tfm serve: listening on http://" << (ipv6 ? "[" + options_.host + "]" : options_.host) << ":" << port << " (" << models_.summary()
        << "); Ctrl-C or SIGTERM stops it\n";
    if (options_.api_key.empty() && options_.host != "127.0.0.1" && options_.host != "localhost" && options_.host != "::1")
      log << "tfm serve: warning: listening beyond this machine without --api-key: anyone who can reach it may use it\n";
    log << std::flush;
    {
      std::mutex mutex;
      std::unique_lock<std::mutex> lock(mutex);
      std::condition_variable_any stopped;
      while (!stopped.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; })) {
        if (stop.stop_requested()) break;
        metrics_.tick();
      }
    }
    log << "tfm serve: stopping: finishing " << life_.depth() << " admitted requests within " << options_.drain_timeout << " s\n" << std::flush;
    life_.drain(options_.drain_timeout);
    http_.drain();  // no new connections; idle ones close; requests on open ones are answered 503 (routes below)
    if (!http_.wait_closed(Clock::now() + seconds(options_.drain_timeout + 1)))
      log << "tfm serve: the drain's time is up: closing " << http_.open_connections() << " connections\n";
    http_.stop();
    log << "tfm serve: stopped\n" << std::flush;
  }

 private:
  struct Route {
    std::string method;  // GET routes answer at once, on an I/O thread; POST routes on a worker
    std::function<void(const Request&, Response&)> answer;
  };

  HttpApp app() {
    return {[this](const Request& req) {
              const auto found = routes_.find(req.path);
              return found == routes_.end() || found->second.method != "POST" || req.method != "POST";
            },
            [this](const Request& req, Response& res) { answer(req, res); }};
  }

  void answer(const Request& req, Response& res) {
    const auto found = routes_.find(req.path);
    if (found == routes_.end()) return reply_error(res, 404, "no such endpoint: " + req.method + " " + req.path + " (see docs/SERVING.md)");
    if (req.method != found->second.method) {
      res.set_header("Allow", found->second.method);
      return reply_error(res, 405, req.path + " takes " + found->second.method + ", not " + req.method);
    }
    found->second.answer(req, res);
  }

  // Every route: the API key, the drain, the error replies and the metrics in one place.
  template <class Handler>
  void route(const char* method, const char* path, Handler handler, bool needs_key = true) {
    auto wrapped = [this, path, handler, needs_key](const Request& req, Response& res) {
      Call call{req, res, path, Clock::now(), {}, false};
      call.deadline = call.started + seconds(options_.timeout);
      try {
        if (needs_key && !options_.api_key.empty() && !authorized(req, options_.api_key))
          throw HttpError(401, req.has_header("Authorization") || req.has_header("X-API-Key")
                                   ? "the API key is not this server's"
                                   : "this server needs an API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'");
        handler(call);
      } catch (const HttpError& e) {
        reply_error(res, e.status, e.what(), e.retry_after);
      } catch (const std::bad_alloc&) {
        reply_error(res, 503, "out of memory", 1);
      } catch (const std::exception& e) {
        reply_error(res, 500, e.what());
      }
      if (!call.streaming) metrics_.request(path, res.status, std::chrono::duration<double>(Clock::now() - call.started).count());
    };
    routes_[path] = {method, wrapped};
  }

  void routes() {
    auto compute = [this](void (*endpoint)(Context&, Call&)) {
      return [this, endpoint](Call& call) {
        life_.refuse_if_draining();
        endpoint(context_, call);
      };
    };
    route("POST", "/v1/translate", compute(translate));
    route("POST", "/v1/generate", compute(generate));
    route("POST", "/v1/completions", compute(completions));
    route("POST", "/v1/chat/completions", compute(chat_completions));
    route("POST", "/v1/embed", compute(embed));
    route("POST", "/v1/classify", compute(classify));
    route("POST", "/v1/attention", compute(attention));
    route("GET", "/v1/models", [this](Call& call) { reply(call.res, models_.list()); });
    route(  // without the key: a load balancer's probe learns only that the server is up
        "GET", "/health",
        [this](Call& call) {
          if (life_.draining()) return reply(call.res, {{"status", "draining"}}, 503);
          reply(call.res, {{"status", "ok"}, {"models", models_.list()["data"].size()}, {"queue", life_.depth()}});
        },
        /*needs_key=*/false);
    route("GET", "/favicon.ico", [](Call& call) { call.res.status = 204; }, /*needs_key=*/false);
    route("GET", "/metrics", [this](Call& call) { call.res.set_content(metrics_.text(), "text/plain; version=0.0.4"); });
    route(  // the page asks for the key itself: a browser's first visit cannot send one
        "GET", "/",
        [](Call& call) {
          call.res.set_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' blob:");
          call.res.set_content(kWebPage, "text/html; charset=utf-8");
        },
        /*needs_key=*/false);
  }

  const ServerOptions& options_;
  Metrics metrics_;
  ModelSet models_;
  Lifecycle life_;
  Context context_;
  std::map<std::string, Route> routes_;  // by path
  HttpServer http_;
};

}  // namespace

void serve(const ServerOptions& options, std::stop_token stop, std::ostream& log) { Server(options, log).run(stop, log); }

}  // namespace tfm::serve
