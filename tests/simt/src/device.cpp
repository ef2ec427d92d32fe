// Devices, streams, events and graphs of the SIMT layer.
//
// Ops (kernels, copies, memsets, collectives, event records) queue per stream in issue order, with the
// dependencies CUDA gives them: the previous op of the stream, an event waited on, and the legacy default stream's
// implicit synchronization with blocking streams. Each device has one executor thread that runs them:
//  * at once for what a host thread waits on (a stream or event sync, a blocking copy) and what that depends on,
//    and nothing else - so a missing cross-stream dependency leaves the other stream's work undone and shows;
//  * by itself only after the work has waited QRT_SIMT_DELAY_MS (default 20 ms) for a host wait, as a GPU always
//    makes progress: collectives whose peers block the host in something else still complete.
// A host that reads results without synchronizing therefore almost always sees them missing, as it would on a
// busy GPU. Stream capture records ops into a graph instead of queueing them; a graph launch queues them again.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

#include "internal.hpp"

namespace qrt::simt {

using Clock = std::chrono::steady_clock;

struct Device;
struct CaptureSession;

struct Dep {
  Stream* stream;
  uint64_t seq;  // the stream's op number (1-based) that must have run
};

struct Op {
  std::vector<Dep> deps;
  OpSpec spec;
  Clock::time_point enqueued;
};

struct Stream {
  static constexpr uint32_t kMagic = 0x51525453;  // checks a handle before use
  uint32_t magic = kMagic;
  Device* device = nullptr;
  unsigned flags = cudaStreamDefault;
  bool legacy = false;
  bool destroyed = false;
  std::deque<Op> queue;
  uint64_t enqueued = 0;
  uint64_t executed = 0;
  StreamCounters counters;
  CaptureSession* capture = nullptr;
};

struct Event {
  static constexpr uint32_t kMagic = 0x51525445;
  uint32_t magic = kMagic;
  unsigned flags = 0;
  bool destroyed = false;
  Stream* stream = nullptr;  // the last record, if any
  uint64_t seq = 0;
  uint64_t generation = 0;
  Clock::time_point time;  // when the last record ran
  CaptureSession* capture = nullptr;  // recorded inside this capture
};

struct Graph {
  std::vector<OpSpec> ops;
};
struct GraphExec {
  std::vector<OpSpec> ops;
};

struct CaptureSession {
  Stream* origin = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  bool invalidated = false;
  std::vector<Stream*> members;  // the origin and the streams that joined through an event
};

struct Demand {
  Stream* stream;
  uint64_t seq;
  bool nudge;  // from a query: nobody waits; the executor drops it once met
};

struct Device {
  int index = 0;
  std::mutex mu;
  std::condition_variable work, done;
  std::vector<std::unique_ptr<Stream>> streams;  // never freed: handles stay safe to check after destruction
  Stream* legacy = nullptr;
  std::vector<Demand> demands;
  bool executor_started = false;

  void start_executor() {  // mu held
    if (executor_started) return;
    executor_started = true;
    std::thread([this] { executor(); }).detach();
  }
  void executor();
  bool first_demand(Stream** s, uint64_t* seq);
  void step(std::unique_lock<std::mutex>& lock, Stream* s);
};

namespace {

struct Devices {
  std::vector<std::unique_ptr<Device>> list;
  std::mutex capture_mu;
  std::list<CaptureSession*> captures;  // active ones
};

Devices& devices() {
  static Devices* d = [] {
    auto* all = new Devices();  // never destroyed: executors outlive static destruction
    for (int i = 0; i < settings().devices; ++i) {
      auto dev = std::make_unique<Device>();
      dev->index = i;
      auto legacy = std::make_unique<Stream>();
      legacy->device = dev.get();
      legacy->legacy = true;
      dev->legacy = legacy.get();
      dev->streams.push_back(std::move(legacy));
      all->list.push_back(std::move(dev));
    }
    return all;
  }();
  return *d;
}

thread_local int t_device = 0;
thread_local cudaError_t t_last_error = cudaSuccess;

Stream* as_stream(cudaStream_t h) {
  auto* s = reinterpret_cast<Stream*>(h);
  return (s != nullptr && s->magic == Stream::kMagic && !s->destroyed) ? s : nullptr;
}
Event* as_event(cudaEvent_t h) {
  auto* e = reinterpret_cast<Event*>(h);
  return (e != nullptr && e->magic == Event::kMagic && !e->destroyed) ? e : nullptr;
}

bool satisfied(const Dep& d) { return d.stream->executed >= d.seq; }

// Host side: blocks until s has run its op number `seq` (and what it depends on). `count_on`, if given, counts
// the call, and a real wait when the work was unfinished.
void wait_executed(Stream* s, uint64_t seq, StreamCounters* count_on = nullptr) {
  Device& d = *s->device;
  std::unique_lock<std::mutex> lock(d.mu);
  if (count_on != nullptr) {
    count_on->host_sync_calls++;
    if (s->executed < seq) count_on->host_syncs++;
  }
  if (s->executed >= seq) return;
  d.demands.push_back(Demand{s, seq, false});
  d.start_executor();
  d.work.notify_all();
  d.done.wait(lock, [&] { return s->executed >= seq; });
  for (auto it = d.demands.begin(); it != d.demands.end(); ++it) {
    if (it->stream == s && it->seq == seq && !it->nudge) {
      d.demands.erase(it);
      break;
    }
  }
}

void count(StreamCounters& c, const OpSpec& op, bool in_graph) {
  switch (op.kind) {
    case OpKind::kKernel:
      (in_graph ? c.graph_kernel_nodes : c.kernel_launches)++;
      if (op.programmatic) c.programmatic_launches++;
      break;
    case OpKind::kCopy:
      if (op.copy_kind == cudaMemcpyHostToDevice) {
        c.memcpy_host_to_device++;
        c.memcpy_host_to_device_bytes += op.bytes;
      } else if (op.copy_kind == cudaMemcpyDeviceToHost) {
        c.memcpy_device_to_host++;
        c.memcpy_device_to_host_bytes += op.bytes;
      } else {
        c.memcpy_device_to_device++;
        c.memcpy_device_to_device_bytes += op.bytes;
      }
      break;
    case OpKind::kMemset: c.memsets++; break;
    case OpKind::kCollective: c.collectives++; break;
    default: break;
  }
}

// Queues an op on a stream that is not capturing (mu not held).
uint64_t push(Stream* s, OpSpec spec, std::vector<Dep> deps, bool in_graph) {
  Device& d = *s->device;
  std::lock_guard<std::mutex> lock(d.mu);
  // The legacy default stream waits for, and is waited for by, every blocking stream of its device.
  if (s->legacy) {
    for (auto& t : d.streams)
      if (!t->legacy && !t->destroyed && t->flags == cudaStreamDefault && t->enqueued > t->executed)
        deps.push_back(Dep{t.get(), t->enqueued});
  } else if (s->flags == cudaStreamDefault && d.legacy->enqueued > d.legacy->executed) {
    deps.push_back(Dep{d.legacy, d.legacy->enqueued});
  }
  count(s->counters, spec, in_graph);
  Op op;
  op.deps = std::move(deps);
  op.spec = std::move(spec);
  op.enqueued = Clock::now();
  s->queue.push_back(std::move(op));
  s->enqueued++;
  d.start_executor();
  d.work.notify_all();
  return s->enqueued;
}

// Captures this thread may not ignore: its own, or any other thread's global-mode capture.
std::vector<CaptureSession*> captures_affecting_this_thread() {
  Devices& all = devices();
  std::lock_guard<std::mutex> lock(all.capture_mu);
  std::vector<CaptureSession*> out;
  for (CaptureSession* c : all.captures) {
    if (c->mode == cudaStreamCaptureModeRelaxed) continue;
    if (c->thread == std::this_thread::get_id() || c->mode == cudaStreamCaptureModeGlobal) out.push_back(c);
  }
  return out;
}

}  // namespace

// ---- executor --------------------------------------------------------------------------------------------------

bool Device::first_demand(Stream** s, uint64_t* seq) {
  demands.erase(std::remove_if(demands.begin(), demands.end(),
                               [](const Demand& d) { return d.nudge && d.stream->executed >= d.seq; }),
                demands.end());
  for (const Demand& d : demands) {
    if (d.stream->executed < d.seq) {
      *s = d.stream;
      *seq = d.seq;
      return true;
    }
  }
  return false;
}

// Runs one op on the way to s's next op: the first unmet dependency's, followed down to an op that can run.
void Device::step(std::unique_lock<std::mutex>& lock, Stream* s) {
  Stream* cur = s;
  for (;;) {
    const Op& head = cur->queue.front();
    const Dep* unmet = nullptr;
    for (const Dep& dep : head.deps)
      if (!satisfied(dep)) unmet = &dep;
    if (unmet == nullptr) break;
    if (unmet->stream->device != this) {
      // Another device's work: wait for its executor like a host would.
      const Dep dep = *unmet;
      lock.unlock();
      wait_executed(dep.stream, dep.seq);
      lock.lock();
      continue;
    }
    cur = unmet->stream;
  }
  Op op = std::move(cur->queue.front());
  cur->queue.pop_front();
  lock.unlock();
  if (op.spec.run) op.spec.run();
  lock.lock();
  cur->executed++;
  done.notify_all();
}

void Device::executor() {
  install_fault_handler();
  t_device = index;
  const auto delay = std::chrono::milliseconds(settings().delay_ms);
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    Stream* target = nullptr;
    uint64_t seq = 0;
    if (first_demand(&target, &seq)) {
      step(lock, target);
      continue;
    }
    Stream* oldest = nullptr;
    for (auto& s : streams)
      if (!s->queue.empty() && (oldest == nullptr || s->queue.front().enqueued < oldest->queue.front().enqueued))
        oldest = s.get();
    if (oldest == nullptr) {
      work.wait(lock);
      continue;
    }
    const auto due = oldest->queue.front().enqueued + delay;
    if (Clock::now() >= due) {
      step(lock, oldest);
    } else {
      work.wait_until(lock, due);
    }
  }
}

// ---- devices and streams ---------------------------------------------------------------------------------------

int current_device() { return t_device; }

cudaError_t set_current_device(int device) {
  if (device < 0 || device >= settings().devices) return cudaErrorInvalidDevice;
  t_device = device;
  return cudaSuccess;
}

Stream* resolve_stream(cudaStream_t handle) {
  if (handle == nullptr || handle == cudaStreamLegacy || handle == cudaStreamPerThread)
    return devices().list[static_cast<size_t>(t_device)]->legacy;
  return as_stream(handle);
}

int stream_device(const Stream* s) { return s->device->index; }
bool is_capturing(const Stream* s) { return s->capture != nullptr; }

StreamCounters& counters_of(Stream* s) { return s->counters; }

cudaError_t enqueue(Stream* s, OpSpec op, uint64_t* seq) {
  if (s->capture != nullptr) {
    CaptureSession* c = s->capture;
    if (c->invalidated) return cudaErrorStreamCaptureInvalidated;
    c->graph->ops.push_back(std::move(op));
    return cudaSuccess;
  }
  if (s->legacy) {
    // The legacy stream synchronizes with everything: using it breaks a global (or this thread's) capture.
    auto affecting = captures_affecting_this_thread();
    if (!affecting.empty()) {
      for (CaptureSession* c : affecting) c->invalidated = true;
      return cudaErrorStreamCaptureImplicit;
    }
  }
  const uint64_t n = push(s, std::move(op), {}, false);
  if (seq != nullptr) *seq = n;
  return cudaSuccess;
}

cudaError_t check_capture_allows_sync(Stream* s) {
  if (s != nullptr && s->capture != nullptr) {
    s->capture->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  auto affecting = captures_affecting_this_thread();
  if (!affecting.empty()) {
    for (CaptureSession* c : affecting) c->invalidated = true;
    return cudaErrorStreamCaptureUnsupported;
  }
  return cudaSuccess;
}

cudaError_t wait_stream(Stream* s) {
  if (cudaError_t e = check_capture_allows_sync(s); e != cudaSuccess) return e;
  uint64_t target;
  {
    std::lock_guard<std::mutex> lock(s->device->mu);
    target = s->enqueued;
  }
  wait_executed(s, target, &s->counters);
  return cudaSuccess;
}

cudaError_t wait_device(int device) {
  if (cudaError_t e = check_capture_allows_sync(nullptr); e != cudaSuccess) return e;
  Device& d = *devices().list[static_cast<size_t>(device)];
  std::vector<Dep> targets;
  {
    std::lock_guard<std::mutex> lock(d.mu);
    for (auto& s : d.streams) {
      s->counters.host_sync_calls++;
      if (s->enqueued > s->executed) {
        s->counters.host_syncs++;
        targets.push_back(Dep{s.get(), s->enqueued});
      }
    }
  }
  for (const Dep& t : targets) wait_executed(t.stream, t.seq);
  return cudaSuccess;
}

// Whether s has run its op number `seq`; if not, asks its device to run it without anyone waiting (a query's
// nudge, so that polling loops make progress).
bool executed_or_nudge(Stream* s, uint64_t seq) {
  Device& d = *s->device;
  std::lock_guard<std::mutex> lock(d.mu);
  if (s->executed >= seq) return true;
  d.demands.push_back(Demand{s, seq, true});
  d.start_executor();
  d.work.notify_all();
  return false;
}

bool stream_idle(Stream* s) {
  uint64_t tail;
  {
    std::lock_guard<std::mutex> lock(s->device->mu);
    tail = s->enqueued;
  }
  return executed_or_nudge(s, tail);
}

cudaError_t create_stream(unsigned flags, cudaStream_t* out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  Device& d = *devices().list[static_cast<size_t>(t_device)];
  auto s = std::make_unique<Stream>();
  s->device = &d;
  s->flags = flags & cudaStreamNonBlocking;
  std::lock_guard<std::mutex> lock(d.mu);
  *out = reinterpret_cast<cudaStream_t>(s.get());
  d.streams.push_back(std::move(s));
  return cudaSuccess;
}

cudaError_t destroy_stream(cudaStream_t handle) {
  Stream* s = as_stream(handle);
  if (s == nullptr || s->legacy) return cudaErrorInvalidResourceHandle;
  // Work already queued still runs (as on a GPU); the handle is dead from now on.
  std::lock_guard<std::mutex> lock(s->device->mu);
  s->destroyed = true;
  return cudaSuccess;
}

// ---- events ----------------------------------------------------------------------------------------------------

cudaError_t create_event(unsigned flags, cudaEvent_t* out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  auto* e = new Event();  // never freed, like streams: a stale handle is recognised, not dereferenced into garbage
  e->flags = flags;
  *out = reinterpret_cast<cudaEvent_t>(e);
  return cudaSuccess;
}

cudaError_t destroy_event(cudaEvent_t event) {
  Event* e = as_event(event);
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  e->destroyed = true;
  return cudaSuccess;
}

cudaError_t record_event(cudaEvent_t event, cudaStream_t stream) {
  Event* e = as_event(event);
  Stream* s = resolve_stream(stream);
  if (e == nullptr || s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->capture != nullptr) {
    if (s->capture->invalidated) return cudaErrorStreamCaptureInvalidated;
    e->capture = s->capture;  // a node of the graph: only other streams of the capture may wait on it
    e->stream = nullptr;
    return cudaSuccess;
  }
  const uint64_t generation = ++e->generation;
  OpSpec op;
  op.kind = OpKind::kRecord;
  op.run = [e, generation] {
    if (e->generation == generation) e->time = Clock::now();
  };
  uint64_t seq = 0;
  if (cudaError_t err = enqueue(s, std::move(op), &seq); err != cudaSuccess) return err;
  e->capture = nullptr;
  e->stream = s;
  e->seq = seq;
  return cudaSuccess;
}

cudaError_t wait_event_on_stream(cudaStream_t stream, cudaEvent_t event) {
  Event* e = as_event(event);
  Stream* s = resolve_stream(stream);
  if (e == nullptr || s == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->capture != nullptr) {
    CaptureSession* c = e->capture;
    if (s->capture == c) return cudaSuccess;  // ordered already: a capture is recorded in issue order
    if (s->capture != nullptr) return cudaErrorStreamCaptureIsolation;
    s->capture = c;  // the stream joins the capture (a fork)
    c->members.push_back(s);
    return cudaSuccess;
  }
  if (s->capture != nullptr) {
    if (e->stream == nullptr) return cudaSuccess;
    return cudaErrorStreamCaptureIsolation;  // a dependency on work outside the graph
  }
  if (e->stream == nullptr) return cudaSuccess;  // never recorded: nothing to wait for
  OpSpec op;
  op.kind = OpKind::kWait;
  push(s, std::move(op), {Dep{e->stream, e->seq}}, false);
  return cudaSuccess;
}

cudaError_t synchronize_event(cudaEvent_t event) {
  Event* e = as_event(event);
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (cudaError_t err = check_capture_allows_sync(nullptr); err != cudaSuccess) return err;
  if (e->stream == nullptr) return cudaSuccess;
  wait_executed(e->stream, e->seq, &e->stream->counters);
  return cudaSuccess;
}

cudaError_t query_event(cudaEvent_t event) {
  Event* e = as_event(event);
  if (e == nullptr) return cudaErrorInvalidResourceHandle;
  if (e->stream == nullptr) return cudaSuccess;
  return executed_or_nudge(e->stream, e->seq) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t event_elapsed_ms(float* ms, cudaEvent_t start, cudaEvent_t end) {
  Event* a = as_event(start);
  Event* b = as_event(end);
  if (ms == nullptr) return cudaErrorInvalidValue;
  if (a == nullptr || b == nullptr) return cudaErrorInvalidResourceHandle;
  if ((a->flags | b->flags) & cudaEventDisableTiming) return cudaErrorInvalidResourceHandle;
  if (a->stream == nullptr || b->stream == nullptr) return cudaErrorInvalidResourceHandle;
  if (query_event(start) != cudaSuccess || query_event(end) != cudaSuccess) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(b->time - a->time).count();
  return cudaSuccess;
}

// ---- capture and graphs ----------------------------------------------------------------------------------------

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  Stream* s = as_stream(stream);
  if (s == nullptr) return stream == nullptr ? cudaErrorStreamCaptureUnsupported : cudaErrorInvalidResourceHandle;
  if (s->capture != nullptr) return cudaErrorIllegalState;
  auto* c = new CaptureSession();
  c->origin = s;
  c->mode = mode;
  c->thread = std::this_thread::get_id();
  c->members.push_back(s);
  {
    std::lock_guard<std::mutex> lock(devices().capture_mu);
    devices().captures.push_back(c);
  }
  s->capture = c;
  return cudaSuccess;
}

cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph) {
  Stream* s = as_stream(stream);
  if (s == nullptr || graph == nullptr) return cudaErrorInvalidValue;
  CaptureSession* c = s->capture;
  if (c == nullptr) return cudaErrorIllegalState;
  if (c->origin != s) return cudaErrorStreamCaptureUnmatched;
  for (Stream* m : c->members) m->capture = nullptr;
  {
    std::lock_guard<std::mutex> lock(devices().capture_mu);
    devices().captures.remove(c);
  }
  const bool invalid = c->invalidated;
  *graph = invalid ? nullptr : reinterpret_cast<cudaGraph_t>(c->graph.release());
  delete c;
  return invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
}

cudaError_t capture_status(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  Stream* s = resolve_stream(stream);
  if (s == nullptr || status == nullptr) return cudaErrorInvalidValue;
  if (s->capture == nullptr) {
    *status = cudaStreamCaptureStatusNone;
  } else {
    *status = s->capture->invalidated ? cudaStreamCaptureStatusInvalidated : cudaStreamCaptureStatusActive;
  }
  return cudaSuccess;
}

cudaError_t instantiate_graph(cudaGraphExec_t* exec, cudaGraph_t graph) {
  if (exec == nullptr || graph == nullptr) return cudaErrorInvalidValue;
  auto* x = new GraphExec();
  x->ops = reinterpret_cast<Graph*>(graph)->ops;
  *exec = reinterpret_cast<cudaGraphExec_t>(x);
  return cudaSuccess;
}

cudaError_t launch_graph(cudaGraphExec_t exec, cudaStream_t stream) {
  Stream* s = resolve_stream(stream);
  if (exec == nullptr || s == nullptr) return cudaErrorInvalidResourceHandle;
  if (s->capture != nullptr) return cudaErrorStreamCaptureUnsupported;  // graphs inside captures: not modelled
  {
    std::lock_guard<std::mutex> lock(s->device->mu);
    s->counters.graph_launches++;
  }
  for (const OpSpec& op : reinterpret_cast<GraphExec*>(exec)->ops) push(s, op, {}, true);
  return cudaSuccess;
}

cudaError_t destroy_graph(cudaGraph_t graph) {
  delete reinterpret_cast<Graph*>(graph);
  return cudaSuccess;
}

cudaError_t destroy_graph_exec(cudaGraphExec_t exec) {
  delete reinterpret_cast<GraphExec*>(exec);
  return cudaSuccess;
}

size_t graph_node_count(cudaGraph_t graph) { return graph ? reinterpret_cast<Graph*>(graph)->ops.size() : 0; }

// ---- errors and counters ---------------------------------------------------------------------------------------

void set_last_error(cudaError_t e) { t_last_error = e; }
cudaError_t take_last_error() {
  const cudaError_t e = t_last_error;
  t_last_error = cudaSuccess;
  return e;
}
cudaError_t peek_last_error() { return t_last_error; }

namespace {
// Every counter of `a` replaced by op(a's, b's): the one list of fields both += and -= use.
template <class Op>
StreamCounters& combine(StreamCounters& a, const StreamCounters& b, Op op) {
  for (auto field : {&StreamCounters::kernel_launches, &StreamCounters::graph_launches,
                     &StreamCounters::graph_kernel_nodes, &StreamCounters::memcpy_host_to_device,
                     &StreamCounters::memcpy_device_to_host, &StreamCounters::memcpy_device_to_device,
                     &StreamCounters::memcpy_host_to_device_bytes, &StreamCounters::memcpy_device_to_host_bytes,
                     &StreamCounters::memcpy_device_to_device_bytes, &StreamCounters::memsets,
                     &StreamCounters::host_sync_calls, &StreamCounters::host_syncs, &StreamCounters::collectives,
                     &StreamCounters::programmatic_launches})
    a.*field = op(a.*field, b.*field);
  return a;
}
}  // namespace

StreamCounters& StreamCounters::operator+=(const StreamCounters& o) {
  return combine(*this, o, [](uint64_t x, uint64_t y) { return x + y; });
}

StreamCounters& StreamCounters::operator-=(const StreamCounters& o) {
  return combine(*this, o, [](uint64_t x, uint64_t y) { return x - y; });
}

StreamCounters stream_counters(cudaStream_t stream) {
  Stream* s = resolve_stream(stream);
  if (s == nullptr) return {};
  std::lock_guard<std::mutex> lock(s->device->mu);
  return s->counters;
}

StreamCounters device_counters(int device) {
  if (device < 0 || device >= settings().devices) return {};
  Device& d = *devices().list[static_cast<size_t>(device)];
  std::lock_guard<std::mutex> lock(d.mu);
  StreamCounters sum;
  for (auto& s : d.streams) sum += s->counters;
  return sum;
}

namespace {
std::atomic<uint64_t> g_blocks_without_wait{0};
}  // namespace

void note_block_without_wait() { g_blocks_without_wait.fetch_add(1); }
uint64_t programmatic_blocks_without_wait() { return g_blocks_without_wait.load(); }

void reset_counters() {
  for (auto& d : devices().list) {
    std::lock_guard<std::mutex> lock(d->mu);
    for (auto& s : d->streams) s->counters = StreamCounters{};
  }
}

}  // namespace qrt::simt
