#include "serve/http_server.hpp"

#include <httplib.h>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <climits>
#include <cstdio>
#include <ctime>
#include <sstream>

#include "serve/openai_protocol.hpp"

namespace qrt::serve {
namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void reply_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(dump(error_body(e)), "application/json");
}

ApiError api_error(int status, std::string type, std::string message, std::string code = {}) {
  ApiError e;
  e.status = status;
  e.type = std::move(type);
  e.message = std::move(message);
  e.code = std::move(code);
  return e;
}

// A prompt the session refused: too long for the context (400 context_length_exceeded, as OpenAI says it), a
// request the model cannot serve (no chat template, a bad token: 400), or a failure of the server (500).
ApiError feed_error(const Status& s, int64_t context) {
  switch (s.code()) {
    case ErrorCode::kOutOfRange:
      return api_error(400, "invalid_request_error",
                       "The prompt does not fit this server's context of " + std::to_string(context) + " tokens (" +
                           s.message() + ")",
                       "context_length_exceeded");
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
    case ErrorCode::kNotFound: return api_error(400, "invalid_request_error", s.message());
    default: return api_error(500, "server_error", s.to_string());
  }
}

int64_t now_seconds() { return static_cast<int64_t>(std::time(nullptr)); }

}  // namespace

// One request's meeting point between the HTTP thread that answers it and the engine's thread that runs it.
struct HttpServer::Call {
  struct Chunk {
    std::string text;
    std::vector<TokenLogprobs> logprobs;  // of the tokens whose text this is
  };
  std::mutex mutex;
  std::condition_variable changed;
  bool started = false;
  bool done = false;
  int64_t prompt_tokens = 0;
  std::vector<Chunk> chunks;                     // streamed text not sent yet
  std::vector<TokenLogprobs> pending_logprobs;  // engine thread only: tokens whose text is not out yet
  Result<GenerateResult> result = GenerateResult{};
  std::atomic<bool> client_gone{false};
};

HttpServer::HttpServer(Model model, Engine& engine, ServerOptions options)
    : model_(std::move(model)),
      engine_(engine),
      options_(std::move(options)),
      started_(now_seconds()),
      server_(std::make_unique<httplib::Server>()) {
  install_routes();
}

HttpServer::~HttpServer() = default;

Result<int> HttpServer::bind() {
  const int port = options_.port == 0 ? server_->bind_to_any_port(options_.host)
                                      : (server_->bind_to_port(options_.host, options_.port) ? options_.port : -1);
  if (port < 0)
    return Status(ErrorCode::kIoError, "cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                                           " (address in use, or not an address of this machine)");
  return port;
}

Status HttpServer::serve() {
  if (!server_->listen_after_bind()) return Status(ErrorCode::kIoError, "the HTTP server stopped with an error");
  return ok_status();
}

void HttpServer::stop() { server_->stop(); }

std::function<std::string(int32_t)> HttpServer::text_of_token() const {
  return [model = model_](int32_t id) { return model.token_piece(id); };
}

void HttpServer::install_routes() {
  httplib::Server& svr = *server_;
  // One thread per running request plus room for waiting ones and for /health and /metrics readers.
  const int threads = options_.http_threads > 0 ? options_.http_threads
                                                : engine_.counts().sequences + std::min(options_.max_waiting, 56) + 8;
  svr.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  svr.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (options_.api_key.empty() || req.path.rfind("/v1/", 0) != 0) return httplib::Server::HandlerResponse::Unhandled;
    if (req.get_header_value("Authorization") == "Bearer " + options_.api_key)
      return httplib::Server::HandlerResponse::Unhandled;
    ++counters_.requests_failed;
    reply_error(res, api_error(401, "invalid_request_error", "Incorrect API key provided", "invalid_api_key"));
    return httplib::Server::HandlerResponse::Handled;
  });
  svr.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;  // a handler already wrote its error
    ++counters_.requests_failed;
    if (res.status == 404) {
      reply_error(res, api_error(404, "invalid_request_error", "Unknown route: " + req.method + " " + req.path,
                                 "unknown_url"));
    } else {
      reply_error(res, api_error(res.status, "invalid_request_error", "HTTP error " + std::to_string(res.status)));
    }
  });
  svr.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
    }
    ++counters_.requests_failed;
    reply_error(res, api_error(500, "server_error", "internal error: " + what));
  });

  svr.set_logger([](const httplib::Request& req, const httplib::Response& res) {
    std::fprintf(stderr, "serve-model: %s %s %d\n", req.method.c_str(), req.path.c_str(), res.status);
  });

  svr.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"status":"ok"})", "application/json");
  });
  svr.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(dump(models_response(options_.served_model, started_)), "application/json");
  });
  svr.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(), "text/plain; version=0.0.4");
  });

  auto completion = [this](Endpoint endpoint) {
    return [this, endpoint](const httplib::Request& req, httplib::Response& res) {
      auto parsed = parse_completion_request(req.body, endpoint, options_.served_model);
      if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
        ++counters_.requests_failed;
        reply_error(res, *e);
        return;
      }
      auto request = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
      auto call = std::make_shared<Call>();
      EngineRequest er;
      if (endpoint == Endpoint::kChat) er.messages = request->messages;
      else er.prompt = request->prompt;
      er.options = request->generate;  // chat without max_tokens ends at the end of generation or of the context
      if (!request->max_tokens_given && endpoint == Endpoint::kChat) er.options.max_tokens = INT_MAX;
      if (request->stream) {
        er.options.on_logprobs = [call](const TokenLogprobs& t) { call->pending_logprobs.push_back(t); };
        er.on_token = [call](int32_t, std::string_view text) {
          if (call->client_gone) return false;
          if (text.empty()) return true;
          std::lock_guard lock(call->mutex);
          call->chunks.push_back({std::string(text), std::move(call->pending_logprobs)});
          call->pending_logprobs.clear();
          call->changed.notify_all();
          return true;
        };
      }
      er.on_started = [call](int64_t prompt_tokens) {
        std::lock_guard lock(call->mutex);
        call->prompt_tokens = prompt_tokens;
        call->started = true;
        call->changed.notify_all();
      };
      er.on_done = [call](Result<GenerateResult> result) {
        std::lock_guard lock(call->mutex);
        call->result = std::move(result);
        call->done = true;
        call->changed.notify_all();
      };
      Result<uint64_t> id = engine_.submit(std::move(er));
      if (!id.ok()) {
        ++counters_.requests_refused;
        reply_error(res, api_error(503, "server_error",
                                   "The server is overloaded: every sequence is busy and " +
                                       std::to_string(options_.max_waiting) + " requests wait; retry later",
                                   "overloaded"));
        return;
      }
      {
        std::unique_lock lock(call->mutex);
        call->changed.wait(lock, [&] { return call->started || call->done; });
        if (!call->started && !call->result.ok()) {
          ++counters_.requests_failed;
          reply_error(res, feed_error(call->result.status(), engine_.context_length()));
          return;
        }
      }
      counters_.prompt_tokens += static_cast<uint64_t>(call->prompt_tokens);
      const ResponseHeader header{(endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id_++),
                                  now_seconds(), options_.served_model};

      if (!request->stream) {
        std::unique_lock lock(call->mutex);
        call->changed.wait(lock, [&] { return call->done; });
        if (!call->result.ok()) {
          ++counters_.requests_failed;
          reply_error(res, api_error(500, "server_error", call->result.status().to_string()));
          return;
        }
        const GenerateResult& result = *call->result;
        counters_.generated_tokens += result.tokens.size();
        ++counters_.requests_ok;
        const Usage usage{call->prompt_tokens, static_cast<int64_t>(result.tokens.size())};
        const json logprobs =
            request->logprobs >= 0 ? logprobs_json(endpoint, result.logprobs, text_of_token()) : json();
        res.set_content(dump(completion_response(endpoint, header, result.text, finish_reason(result.stop_reason),
                                                 usage, logprobs)),
                        "application/json");
        return;
      }

      // Streaming: the engine's thread queues each token's text (with its log-probabilities) in `call`; the
      // provider sends what is queued as it comes. A failed write (the client went away) cancels the request,
      // which frees its sequence at the engine's next step.
      res.set_header("Cache-Control", "no-cache");
      res.set_chunked_content_provider(
          "text/event-stream",
          [this, call, request, header, endpoint, id = *id](size_t, httplib::DataSink& sink) {
            bool open = true;
            auto send = [&](const std::string& event) {
              open = open && sink.is_writable() && sink.write(event.data(), event.size());
              return open;
            };
            int64_t text_offset = 0;
            auto logprobs_of = [&](const std::vector<TokenLogprobs>& tokens) -> json {
              if (request->logprobs < 0 || tokens.empty()) return json();
              json j = logprobs_json(endpoint, tokens, text_of_token(), text_offset);
              for (const TokenLogprobs& t : tokens)
                text_offset += static_cast<int64_t>(model_.token_piece(t.token).size());
              return j;
            };
            if (endpoint == Endpoint::kChat) send(sse_event(stream_chunk(endpoint, header, "", nullptr, true)));
            for (;;) {
              std::vector<Call::Chunk> chunks;
              bool done = false;
              {
                std::unique_lock lock(call->mutex);
                call->changed.wait(lock, [&] { return call->done || !call->chunks.empty(); });
                chunks.swap(call->chunks);
                done = call->done;
              }
              for (const Call::Chunk& c : chunks) {
                if (!open) break;
                send(sse_event(stream_chunk(endpoint, header, c.text, nullptr, false, logprobs_of(c.logprobs))));
              }
              if (!open && !call->client_gone.exchange(true)) engine_.cancel(id);
              if (done) break;
            }
            const Result<GenerateResult>& result = call->result;
            if (!result.ok()) {
              ++counters_.requests_failed;
              send(sse_event(error_body(api_error(500, "server_error", result.status().to_string()))));
            } else if (!open) {
              ++counters_.requests_cancelled;
            } else {
              counters_.generated_tokens += result->tokens.size();
              const Usage usage{call->prompt_tokens, static_cast<int64_t>(result->tokens.size())};
              send(sse_event(stream_chunk(endpoint, header, "", finish_reason(result->stop_reason), false,
                                          logprobs_of(call->pending_logprobs))));
              if (request->include_usage) send(sse_event(usage_chunk(endpoint, header, usage)));
              send(std::string(kSseDone));
              if (open) ++counters_.requests_ok;
            }
            sink.done();
            return true;
          },
          [this, call, id = *id](bool success) {
            // The connection ended before the stream did (the provider never ran, or stopped early): stop generating.
            if (!success && !call->client_gone.exchange(true)) engine_.cancel(id);
          });
    };
  };
  svr.Post("/v1/chat/completions", completion(Endpoint::kChat));
  svr.Post("/v1/completions", completion(Endpoint::kCompletion));
}

std::string HttpServer::metrics_text() const {
  const EngineCounts c = engine_.counts();
  std::ostringstream o;
  auto metric = [&](const char* name, const char* type, const char* help, uint64_t value) {
    o << "# HELP " << name << ' ' << help << "\n# TYPE " << name << ' ' << type << '\n' << name << ' ' << value << '\n';
  };
  metric("qrt_requests_ok_total", "counter", "Requests answered in full.", counters_.requests_ok);
  metric("qrt_requests_failed_total", "counter", "Requests answered with an error status.", counters_.requests_failed);
  metric("qrt_requests_refused_total", "counter", "Requests refused with 503 (too many waiting).",
         counters_.requests_refused);
  metric("qrt_requests_cancelled_total", "counter", "Streams whose client went away.", counters_.requests_cancelled);
  metric("qrt_prompt_tokens_total", "counter", "Prompt tokens run through the model.", counters_.prompt_tokens);
  metric("qrt_generation_tokens_total", "counter", "Tokens generated.", c.generated_tokens);
  metric("qrt_decode_steps_total", "counter", "Batched decode steps.", c.steps);
  metric("qrt_requests_running", "gauge", "Requests holding a sequence.", static_cast<uint64_t>(c.running));
  metric("qrt_requests_waiting", "gauge", "Requests waiting for a sequence.", static_cast<uint64_t>(c.waiting));
  metric("qrt_sequences", "gauge", "Sequences: the most requests decoded together.",
         static_cast<uint64_t>(c.sequences));
  metric("qrt_largest_batch", "gauge", "Most requests one step has decoded.", static_cast<uint64_t>(c.largest_batch));
  metric("qrt_kv_cache_bytes", "gauge", "KV cache pool memory.", c.kv_cache_bytes);
  metric("qrt_kv_blocks", "gauge", "KV cache blocks in the pool.", static_cast<uint64_t>(c.kv_blocks));
  metric("qrt_kv_blocks_used", "gauge", "KV cache blocks held by running requests.",
         static_cast<uint64_t>(c.kv_blocks_used));
  metric("qrt_kv_blocks_cached", "gauge", "Free KV cache blocks that keep a prompt prefix for reuse.",
         static_cast<uint64_t>(c.kv_blocks_cached));
  metric("qrt_prompt_tokens_reused_total", "counter", "Prompt tokens taken from cached blocks, not computed.",
         c.reused_prompt_tokens);
  metric("qrt_preemptions_total", "counter", "Requests sent back to the queue to free KV cache blocks.",
         c.preemptions);
  return o.str();
}

}  // namespace qrt::serve
