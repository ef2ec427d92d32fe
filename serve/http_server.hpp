// serve-model's HTTP side (cpp-httplib): the OpenAI routes over an Engine (continuous batching) of one model.
//
//   POST /v1/chat/completions, POST /v1/completions   (JSON, or SSE with "stream": true, ending "data: [DONE]")
//   GET  /v1/models, GET /health, GET /metrics        (Prometheus text)
//
// With an API key, every /v1/ route needs "Authorization: Bearer <key>" (401 otherwise); /health and /metrics stay
// open, as in vLLM. Errors use OpenAI's JSON shape (openai_protocol.hpp); unknown routes get a 404 in that shape.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "qrt/runtime.hpp"
#include "qrt/engine.hpp"

namespace httplib {
class Server;
}

namespace qrt::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;  // 0: any free port (see HttpServer::bind)
  std::string api_key;
  std::string served_model;  // the name clients use in "model"
  int max_waiting = 64;      // requests that may wait for a sequence (EngineOptions::max_waiting)
  int http_threads = 0;      // 0: enough for every session plus waiting readers of /health and /metrics
};

// Totals since the server started, for /metrics.
struct ServerCounters {
  std::atomic<uint64_t> requests_ok{0};
  std::atomic<uint64_t> requests_failed{0};   // answered with an error status
  std::atomic<uint64_t> requests_refused{0};  // 503: too many waiting
  std::atomic<uint64_t> requests_cancelled{0};  // the client went away during a stream
  std::atomic<uint64_t> prompt_tokens{0};
  std::atomic<uint64_t> generated_tokens{0};  // of requests answered through this server
};

class HttpServer {
 public:
  HttpServer(Model model, Engine& engine, ServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds the listening socket; returns the port (the chosen one when options.port is 0).
  Result<int> bind();
  // Serves until stop() is called from another thread (or a signal handler's helper thread).
  Status serve();
  void stop();

  const ServerCounters& counters() const { return counters_; }

 private:
  struct Call;
  void install_routes();
  std::function<std::string(int32_t)> text_of_token() const;
  std::string metrics_text() const;

  Model model_;
  Engine& engine_;
  ServerOptions options_;
  ServerCounters counters_;
  std::atomic<uint64_t> next_id_{1};
  int64_t started_ = 0;
  std::unique_ptr<httplib::Server> server_;
};

}  // namespace qrt::serve
