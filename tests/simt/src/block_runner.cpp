// One thread block at a time per OS thread: every GPU thread is a fiber (Boost.Context) on a pooled stack. A fiber
// runs until it reaches a barrier or a warp-synchronous operation, then the next ready fiber runs, in thread order.
// So a missing __syncthreads() or __syncwarp() shows up deterministically: the threads after a racing writer read
// what was there before it wrote. Every rule a GPU leaves undefined is checked and stops the program with a message
// naming the kernel, the block and the thread (see docs/simt.md for the list).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <boost/context/fiber.hpp>
#include <chrono>
#include <cstdio>
#include <deque>
#include <cstring>
#include <string>
#include <vector>

#include "internal.hpp"
#include "simt/device.hpp"

namespace qrt::simt {

namespace detail {
__thread uint3 t_thread_idx __attribute__((tls_model("initial-exec")));
__thread uint3 t_block_idx __attribute__((tls_model("initial-exec")));
__thread uint3 t_block_dim __attribute__((tls_model("initial-exec")));
__thread uint3 t_grid_dim __attribute__((tls_model("initial-exec")));
}  // namespace detail

namespace {

namespace ctx = boost::context;
using detail::ShuffleKind;
using detail::VoteKind;
using detail::Where;

constexpr int kMaxThreads = 1024;
constexpr size_t kStackBytes = 64 * 1024;  // kernels keep small arrays in registers; 64 KiB is ample
constexpr size_t kMaxDynamicSmem = 232448;  // 227 KiB, the most an H100 block may opt in to
constexpr size_t kSmemAlignment = 128;
constexpr unsigned kMaxGatherBytes = 256;  // per lane: the largest fragment set a modelled instruction moves

std::string where_string(const Where& w) {
  const char* file = w.file_name();
  const char* slash = std::strrchr(file, '/');
  return std::string(slash ? slash + 1 : file) + ":" + std::to_string(w.line());
}

std::string hex(unsigned v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Fiber stacks, one per GPU thread slot, each with a PROT_NONE guard page below it so an overflow faults instead of
// corrupting the neighbouring stack. Reused from block to block.
class StackPool {
 public:
  ~StackPool() {
    for (void* m : mappings_) munmap(m, kStackBytes + page());
  }
  ctx::stack_context get(int slot) {
    while (static_cast<int>(mappings_.size()) <= slot) {
      void* m = mmap(nullptr, kStackBytes + page(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
      if (m == MAP_FAILED) fatal("cannot map a " + std::to_string(kStackBytes) + "-byte fiber stack");
      mprotect(m, page(), PROT_NONE);
      mappings_.push_back(m);
    }
    ctx::stack_context sc;
    sc.size = kStackBytes;
    sc.sp = static_cast<char*>(mappings_[static_cast<size_t>(slot)]) + page() + kStackBytes;
    return sc;
  }
  static size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }

 private:
  std::vector<void*> mappings_;
};

// Hands one pooled stack to one fiber; the pool owns the memory.
struct PooledStack {
  ctx::stack_context sc;
  ctx::stack_context allocate() { return sc; }
  void deallocate(ctx::stack_context&) noexcept {}
};

enum class State : uint8_t { kReady, kRunning, kAtBarrier, kInWarpOp, kExited };

struct AsyncCopy {
  void* dst;
  const void* src;
  unsigned bytes;
  int group;
};

struct SimThread {
  ctx::fiber self;       // this GPU thread while it is suspended
  ctx::fiber scheduler;  // while it runs: the way back to the block's scheduler
  uint3 idx{};
  int linear = 0;
  State state = State::kReady;
  bool started = false;
  bool waited = false;  // called cudaGridDependencySynchronize
  uint64_t result = 0;       // what the barrier or warp operation it waited in gave it
  const char* waiting_in = "";
  Where where;
  std::vector<AsyncCopy> copies;  // cp.async copies issued and not yet waited for
  int open_group = 0;             // the group cp.async.commit_group will close next
};

enum class WarpOpKind { kSync, kShuffle, kVote, kGather };

const char* op_name(WarpOpKind k, ShuffleKind s, VoteKind v) {
  switch (k) {
    case WarpOpKind::kSync: return "__syncwarp";
    case WarpOpKind::kShuffle:
      switch (s) {
        case ShuffleKind::kIndex: return "__shfl_sync";
        case ShuffleKind::kUp: return "__shfl_up_sync";
        case ShuffleKind::kDown: return "__shfl_down_sync";
        case ShuffleKind::kXor: return "__shfl_xor_sync";
      }
      break;
    case WarpOpKind::kVote:
      switch (v) {
        case VoteKind::kBallot: return "__ballot_sync";
        case VoteKind::kAny: return "__any_sync";
        case VoteKind::kAll: return "__all_sync";
      }
      break;
    case WarpOpKind::kGather: return "a warp gather (the mma.sync / ldmatrix model)";
  }
  return "?";
}

// What a lane asks for: the operation and its mask (and width, for shuffles; bytes per lane, for gathers).
struct WarpRequest {
  WarpOpKind kind = WarpOpKind::kSync;
  ShuffleKind shuffle = ShuffleKind::kIndex;
  VoteKind vote = VoteKind::kBallot;
  unsigned mask = 0;
  int width = 32;
  unsigned bytes = 0;
  const char* name() const { return op_name(kind, shuffle, vote); }
  bool same_as(const WarpRequest& o) const {
    return kind == o.kind && shuffle == o.shuffle && vote == o.vote && mask == o.mask && width == o.width &&
           bytes == o.bytes;
  }
};

// A warp-synchronous operation some lanes of `mask` have reached; it completes when all of them have. Slots are
// kept per warp and reused, so a lane's arrival copies only its own inputs.
struct WarpOp {
  WarpRequest request;
  bool active = false;
  unsigned arrived = 0;
  Where where;
  uint64_t value[32];  // gathers: the address of the lane's bytes
  int arg[32];
  void* out[32];       // gathers: where the lane receives every lane's bytes
  const char* name() const { return request.name(); }
};

class BlockRunner {
 public:
  void run(const KernelLaunch& launch, uint64_t block_index);

  // Called from device code on the running fiber.
  void sync_block(int predicate, Where where, uint64_t* count);
  uint64_t warp_op(const WarpRequest& request, uint64_t value, int arg, Where where, void* out = nullptr);
  void async_copy(void* dst, const void* src, unsigned bytes, Where where);
  void async_commit() { current_->open_group++; }
  void async_wait(int pending, Where where);
  void* dynamic_smem(size_t alignment, Where where);
  unsigned active_mask() const;
  std::string context() const;
  bool running() const { return current_ != nullptr; }
  // The running thread waits for the previous grid: counted once per thread (a second call waits for nothing).
  void grid_dependency_wait() {
    if (!current_->waited) {
      current_->waited = true;
      ++waited_;
    }
  }

 private:
  void start_or_resume(SimThread& t);
  void thread_main(SimThread& t);
  void block_here(State s, const char* what, Where where);
  void make_ready(SimThread& t);
  void complete_copies(SimThread& t, int below_group);
  [[noreturn]] void deadlock();
  uint64_t resolve(const WarpOp& op, int lane, int* source_out) const;
  std::string thread_name(const SimThread& t) const;
  [[noreturn]] void fail(const std::string& what) const { fatal(what); }

  const KernelLaunch* launch_ = nullptr;
  uint3 block_idx_{};
  int nthreads_ = 0;
  int exited_ = 0;
  int waited_ = 0;  // threads that called cudaGridDependencySynchronize (programmatic launches must all do)
  unsigned exited_lanes_[kMaxThreads / 32]{};
  int at_barrier_ = 0;
  Where barrier_where_;
  uint64_t barrier_count_ = 0;
  std::vector<SimThread> threads_ = std::vector<SimThread>(kMaxThreads);
  std::deque<int> ready_;  // thread indices, run in this order
  std::vector<std::vector<WarpOp>> warp_ops_ = std::vector<std::vector<WarpOp>>(kMaxThreads / 32);
  SimThread* current_ = nullptr;
  StackPool stacks_;
  std::unique_ptr<uint8_t[]> smem_storage_ = std::make_unique<uint8_t[]>(kMaxDynamicSmem + kSmemAlignment);
  uint8_t* smem_ = nullptr;
};

thread_local BlockRunner* t_runner = nullptr;

BlockRunner& runner() {
  if (t_runner == nullptr) t_runner = new BlockRunner();  // lives as long as its OS thread's work; never freed
  return *t_runner;
}

BlockRunner& running_block(const char* what, const Where& where) {
  if (t_runner == nullptr || !t_runner->running())
    fatal(std::string(what) + " called outside a kernel at " + where_string(where));
  return *t_runner;
}

std::string BlockRunner::thread_name(const SimThread& t) const {
  return "(" + std::to_string(t.idx.x) + "," + std::to_string(t.idx.y) + "," + std::to_string(t.idx.z) + ")";
}

std::string BlockRunner::context() const {
  if (current_ == nullptr || launch_ == nullptr) return "";
  const LaunchSite& s = launch_->site;
  const char* slash = std::strrchr(s.file, '/');
  return std::string("kernel ") + s.kernel + " (" + (slash ? slash + 1 : s.file) + ":" + std::to_string(s.line) +
         ") block (" + std::to_string(block_idx_.x) + "," + std::to_string(block_idx_.y) + "," +
         std::to_string(block_idx_.z) + ") thread " + thread_name(*current_);
}

void BlockRunner::run(const KernelLaunch& launch, uint64_t block_index) {
  launch_ = &launch;
  const dim3 g = launch.grid, b = launch.block;
  block_idx_ = uint3{static_cast<unsigned>(block_index % g.x), static_cast<unsigned>((block_index / g.x) % g.y),
                     static_cast<unsigned>(block_index / (uint64_t{g.x} * g.y))};
  nthreads_ = static_cast<int>(b.x * b.y * b.z);
  detail::t_block_idx = block_idx_;
  detail::t_block_dim = uint3{b.x, b.y, b.z};
  detail::t_grid_dim = uint3{g.x, g.y, g.z};
  exited_ = 0;
  waited_ = 0;
  at_barrier_ = 0;
  std::memset(exited_lanes_, 0, sizeof exited_lanes_);
  for (auto& ops : warp_ops_)
    for (WarpOp& op : ops) op.active = false;
  // Dynamic shared memory starts as 0xFF bytes (NaN as float) in every block: a read before any write shows.
  smem_ = smem_storage_.get() + (kSmemAlignment - reinterpret_cast<uintptr_t>(smem_storage_.get()) % kSmemAlignment);
  if (launch.dynamic_smem > 0) std::memset(smem_, 0xFF, launch.dynamic_smem);

  ready_.clear();
  for (int i = 0; i < nthreads_; ++i) {
    SimThread& t = threads_[static_cast<size_t>(i)];
    t.idx = uint3{static_cast<unsigned>(i % b.x), static_cast<unsigned>((i / b.x) % b.y),
                  static_cast<unsigned>(i / (b.x * b.y))};
    t.linear = i;
    t.state = State::kReady;
    t.started = false;
    t.waited = false;
    t.copies.clear();
    t.open_group = 0;
    ready_.push_back(i);
  }
  while (!ready_.empty()) {
    SimThread& t = threads_[static_cast<size_t>(ready_.front())];
    ready_.pop_front();
    start_or_resume(t);
  }
  if (exited_ != nthreads_) deadlock();
  if (launch.programmatic && waited_ < nthreads_) note_block_without_wait();
  current_ = nullptr;
  launch_ = nullptr;
}

void BlockRunner::start_or_resume(SimThread& t) {
  current_ = &t;
  detail::t_thread_idx = t.idx;
  t.state = State::kRunning;
  if (!t.started) {
    t.started = true;
    t.self = ctx::fiber(std::allocator_arg, PooledStack{stacks_.get(t.linear)}, [this, &t](ctx::fiber&& back) {
      t.scheduler = std::move(back);
      thread_main(t);
      return std::move(t.scheduler);
    });
  }
  t.self = std::move(t.self).resume();
  current_ = nullptr;
}

void BlockRunner::thread_main(SimThread& t) {
  launch_->body->run_thread();
  if (!t.copies.empty())
    fail(std::to_string(t.copies.size()) + " cp.async copies were never waited for when the thread exited");
  t.state = State::kExited;
  ++exited_;
  exited_lanes_[t.linear / 32] |= 1u << (t.linear % 32);
  if (at_barrier_ > 0) {
    fail("exits while " + std::to_string(at_barrier_) + " threads of its block wait at __syncthreads (" +
         where_string(barrier_where_) + "): a barrier that only part of the block reaches");
  }
  for (const WarpOp& op : warp_ops_[static_cast<size_t>(t.linear / 32)]) {
    if (op.active && (op.request.mask & (1u << (t.linear % 32))))
      fail("exits while lanes " + hex(op.arrived) + " of its warp wait for it in " + op.name() + "(mask " +
           hex(op.request.mask) + ") at " + where_string(op.where));
  }
}

void BlockRunner::block_here(State s, const char* what, Where where) {
  SimThread& t = *current_;
  t.state = s;
  t.waiting_in = what;
  t.where = where;
  t.scheduler = std::move(t.scheduler).resume();
  // Resumed by the scheduler: current_ and the thread index are this thread's again.
}

void BlockRunner::make_ready(SimThread& t) {
  t.state = State::kReady;
  ready_.push_back(t.linear);
}

void BlockRunner::sync_block(int predicate, Where where, uint64_t* count) {
  if (exited_ > 0) {
    for (int i = 0; i < nthreads_; ++i) {
      if (threads_[static_cast<size_t>(i)].state == State::kExited)
        fail("reaches __syncthreads at " + where_string(where) + " after thread " +
             thread_name(threads_[static_cast<size_t>(i)]) +
             " of its block exited: a barrier that only part of the block reaches");
    }
  }
  if (at_barrier_ == 0) {
    barrier_where_ = where;
    barrier_count_ = 0;
  } else if (barrier_where_.line() != where.line() || std::strcmp(barrier_where_.file_name(), where.file_name()) != 0) {
    fail("reaches __syncthreads at " + where_string(where) + " while other threads of its block wait at " +
         where_string(barrier_where_) + ": threads of one block at different barriers");
  }
  barrier_count_ += predicate != 0;
  if (++at_barrier_ == nthreads_) {
    // The last arrival releases the others in thread order and carries on without a switch.
    const uint64_t total = barrier_count_;
    at_barrier_ = 0;
    for (int i = 0; i < nthreads_; ++i) {
      SimThread& o = threads_[static_cast<size_t>(i)];
      if (o.state == State::kAtBarrier) {
        o.result = total;
        make_ready(o);
      }
    }
    if (count) *count = total;
    return;
  }
  block_here(State::kAtBarrier, "__syncthreads", where);
  if (count) *count = current_->result;
}

uint64_t BlockRunner::resolve(const WarpOp& op, int lane, int* source_out) const {
  *source_out = lane;
  if (op.request.kind != WarpOpKind::kShuffle) return 0;
  const int w = op.request.width;
  const int segment = lane & ~(w - 1);
  const int arg = op.arg[lane];
  int src = lane;
  switch (op.request.shuffle) {
    case ShuffleKind::kIndex: src = segment + (arg & (w - 1)); break;
    case ShuffleKind::kUp: src = (lane - segment) >= arg ? lane - arg : lane; break;
    case ShuffleKind::kDown: src = (lane - segment) + arg < w ? lane + arg : lane; break;
    case ShuffleKind::kXor: src = lane ^ arg; if (src >= segment + w || src > 31 || src < 0) src = lane; break;
  }
  *source_out = src;
  return op.value[src];
}

uint64_t BlockRunner::warp_op(const WarpRequest& request, uint64_t value, int arg, Where where, void* out) {
  SimThread& t = *current_;
  const int warp = t.linear / 32, lane = t.linear % 32;
  const unsigned bit = 1u << lane;
  const unsigned mask = request.mask;
  if ((mask & bit) == 0)
    fail(std::string(request.name()) + " at " + where_string(where) + " with mask " + hex(mask) +
         ", which does not name the calling lane " + std::to_string(lane));
  const int lanes_in_warp = std::min(32, nthreads_ - warp * 32);
  const unsigned existing = lanes_in_warp == 32 ? 0xffffffffu : (1u << lanes_in_warp) - 1u;
  if (mask & ~existing)
    fail(std::string(request.name()) + " at " + where_string(where) + " with mask " + hex(mask) + " names lanes " +
         hex(mask & ~existing) + " that the block (" + std::to_string(nthreads_) + " threads) does not have");
  if (mask & exited_lanes_[warp])
    fail(std::string(request.name()) + " at " + where_string(where) + " with mask " + hex(mask) + ": lanes " +
         hex(mask & exited_lanes_[warp]) + " have exited");
  if (request.kind == WarpOpKind::kShuffle &&
      (request.width < 1 || request.width > 32 || (request.width & (request.width - 1)) != 0))
    fail(std::string(request.name()) + " at " + where_string(where) + " with width " + std::to_string(request.width) +
         " (must be a power of two up to 32)");

  auto& slots = warp_ops_[static_cast<size_t>(warp)];
  WarpOp* op = nullptr;
  WarpOp* free_slot = nullptr;
  for (WarpOp& p : slots) {
    if (!p.active) {
      if (free_slot == nullptr) free_slot = &p;
      continue;
    }
    if ((p.request.mask & mask) == 0) continue;
    if (!p.request.same_as(request))
      fail(std::string(request.name()) + "(mask " + hex(mask) + ") at " + where_string(where) + " while lanes " +
           hex(p.arrived) + " of its warp wait in " + p.name() + "(mask " + hex(p.request.mask) + ") at " +
           where_string(p.where) + ": the lanes of a mask must all make the same warp-synchronous call");
    op = &p;
  }
  if (op == nullptr) {
    if (free_slot == nullptr) free_slot = &slots.emplace_back();
    op = free_slot;
    op->request = request;
    op->active = true;
    op->arrived = 0;
    op->where = where;
  }
  op->value[lane] = value;
  op->arg[lane] = arg;
  op->out[lane] = out;
  op->arrived |= bit;
  if (op->arrived != mask) {
    block_here(State::kInWarpOp, request.name(), where);
    return current_->result;
  }
  // Every lane of the mask is here: compute each lane's result and release the others.
  op->active = false;
  if (request.kind == WarpOpKind::kGather) {
    // Every lane's bytes and destination are on stacks of fibers suspended here (or this one's), so still valid.
    for (int l = 0; l < 32; ++l) {
      if (((mask >> l) & 1u) == 0) continue;
      for (int from = 0; from < 32; ++from)
        if ((mask >> from) & 1u)
          std::memcpy(static_cast<char*>(op->out[l]) + static_cast<size_t>(from) * request.bytes,
                      reinterpret_cast<const void*>(op->value[from]), request.bytes);
    }
  }
  uint64_t ballot = 0;
  if (request.kind == WarpOpKind::kVote) {
    for (int l = 0; l < 32; ++l)
      if ((mask >> l) & 1u) ballot |= static_cast<uint64_t>(op->value[l] != 0) << l;
  }
  uint64_t own = 0;
  for (int l = 0; l < 32; ++l) {
    if (((mask >> l) & 1u) == 0) continue;
    uint64_t r = 0;
    if (request.kind == WarpOpKind::kShuffle) {
      int source = l;
      r = resolve(*op, l, &source);
      if (((mask >> source) & 1u) == 0)
        fail(std::string(request.name()) + " at " + where_string(op->where) + ": lane " + std::to_string(l) +
             " reads lane " + std::to_string(source) + ", which is not in the mask " + hex(mask) +
             " (its value is undefined on a GPU)");
    } else if (request.kind == WarpOpKind::kVote) {
      switch (request.vote) {
        case VoteKind::kBallot: r = ballot; break;
        case VoteKind::kAny: r = ballot != 0; break;
        case VoteKind::kAll: r = ballot == mask; break;
      }
    }
    if (l == lane) {
      own = r;
    } else {
      SimThread& o = threads_[static_cast<size_t>(warp * 32 + l)];
      o.result = r;
      make_ready(o);
    }
  }
  return own;
}

void BlockRunner::async_copy(void* dst, const void* src, unsigned bytes, Where where) {
  if (bytes != 4 && bytes != 8 && bytes != 16)
    fail("cp.async of " + std::to_string(bytes) + " bytes at " + where_string(where) + " (4, 8 or 16)");
  if (reinterpret_cast<uintptr_t>(dst) % bytes != 0 || reinterpret_cast<uintptr_t>(src) % bytes != 0)
    fail("cp.async of " + std::to_string(bytes) + " bytes at " + where_string(where) +
         " with a misaligned address (shared " + std::to_string(reinterpret_cast<uintptr_t>(dst) % bytes) +
         ", global " + std::to_string(reinterpret_cast<uintptr_t>(src) % bytes) + " bytes off)");
  current_->copies.push_back(AsyncCopy{dst, src, bytes, current_->open_group});
}

void BlockRunner::complete_copies(SimThread& t, int below_group) {
  size_t kept = 0;
  for (const AsyncCopy& c : t.copies) {
    if (c.group < below_group) {
      std::memcpy(c.dst, c.src, c.bytes);
    } else {
      t.copies[kept++] = c;
    }
  }
  t.copies.resize(kept);
}

void BlockRunner::async_wait(int pending, Where where) {
  if (pending < 0) fail("cp.async.wait_group with a negative count at " + where_string(where));
  // Groups 0 .. open_group-1 are committed; all but the newest `pending` of them must have landed.
  complete_copies(*current_, current_->open_group - pending);
}

void* BlockRunner::dynamic_smem(size_t alignment, Where where) {
  if (alignment > kSmemAlignment)
    fail("extern __shared__ aligned to " + std::to_string(alignment) + " bytes at " + where_string(where) +
         " (the layer aligns dynamic shared memory to " + std::to_string(kSmemAlignment) + ")");
  return smem_;
}

unsigned BlockRunner::active_mask() const {
  const int warp = current_->linear / 32;
  const int lanes = std::min(32, nthreads_ - warp * 32);
  const unsigned existing = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1u;
  return existing & ~exited_lanes_[warp];
}

void BlockRunner::deadlock() {
  std::string msg = "kernel " + std::string(launch_->site.kernel) + " block (" + std::to_string(block_idx_.x) + "," +
                    std::to_string(block_idx_.y) + "," + std::to_string(block_idx_.z) + ") can never finish: ";
  int shown = 0;
  for (int i = 0; i < nthreads_ && shown < 8; ++i) {
    const SimThread& t = threads_[static_cast<size_t>(i)];
    if (t.state == State::kExited) continue;
    msg += (shown ? "; " : "") + std::string("thread ") + thread_name(t) + " waits in " + t.waiting_in + " at " +
           where_string(t.where);
    ++shown;
  }
  for (size_t w = 0; w < warp_ops_.size(); ++w) {
    for (const WarpOp& op : warp_ops_[w])
      if (op.active)
        msg += "; warp " + std::to_string(w) + " " + op.name() + "(mask " + hex(op.request.mask) + ") at " +
               where_string(op.where) + " still waits for lanes " + hex(op.request.mask & ~op.arrived);
  }
  msg += " (" + std::to_string(exited_) + " of " + std::to_string(nthreads_) + " threads exited)";
  current_ = nullptr;
  fatal(msg);
}

}  // namespace

std::string kernel_context() { return t_runner ? t_runner->context() : std::string(); }

void run_block(const KernelLaunch& launch, uint64_t block_index) { runner().run(launch, block_index); }

namespace detail {

void sync_block(Where where) { running_block("__syncthreads", where).sync_block(1, where, nullptr); }

int sync_block_count(int predicate, Where where) {
  uint64_t count = 0;
  running_block("__syncthreads_count", where).sync_block(predicate, where, &count);
  return static_cast<int>(count);
}

void sync_warp(unsigned mask, Where where) {
  WarpRequest r;
  r.kind = WarpOpKind::kSync;
  r.mask = mask;
  running_block("__syncwarp", where).warp_op(r, 0, 0, where);
}

uint64_t shuffle(unsigned mask, uint64_t value, ShuffleKind kind, int arg, int width, Where where) {
  WarpRequest r;
  r.kind = WarpOpKind::kShuffle;
  r.shuffle = kind;
  r.mask = mask;
  r.width = width;
  return running_block("a warp shuffle", where).warp_op(r, value, arg, where);
}

unsigned vote(unsigned mask, int predicate, VoteKind kind, Where where) {
  WarpRequest r;
  r.kind = WarpOpKind::kVote;
  r.vote = kind;
  r.mask = mask;
  return static_cast<unsigned>(running_block("a warp vote", where).warp_op(r, predicate != 0, 0, where));
}

void warp_gather(unsigned mask, const void* mine, void* all, unsigned bytes, Where where) {
  if (bytes == 0 || bytes > kMaxGatherBytes)
    fatal("a warp gather of " + std::to_string(bytes) + " bytes per lane at " + where_string(where) + " (1 to " +
          std::to_string(kMaxGatherBytes) + ")");
  WarpRequest r;
  r.kind = WarpOpKind::kGather;
  r.mask = mask;
  r.bytes = bytes;
  running_block("a warp gather", where).warp_op(r, reinterpret_cast<uintptr_t>(mine), 0, where, all);
}

unsigned active_mask() {
  return running_block("__activemask", std::source_location::current()).active_mask();
}

void async_copy(void* dst, const void* src, unsigned bytes, Where where) {
  running_block("cp.async", where).async_copy(dst, src, bytes, where);
}
void grid_dependency_wait(Where where) {
  running_block("cudaGridDependencySynchronize", where).grid_dependency_wait();
}
void async_commit() { running_block("cp.async.commit_group", std::source_location::current()).async_commit(); }
void async_wait(int pending, Where where) { running_block("cp.async.wait_group", where).async_wait(pending, where); }

void* dynamic_shared_memory(size_t alignment) {
  const Where where = std::source_location::current();
  return running_block("extern __shared__", where).dynamic_smem(alignment, where);
}

void kernel_trap(const char* what, Where where) { fatal(std::string(what) + " at " + where_string(where)); }

void check_alignment(const void* p, unsigned alignment, const char* what, Where where) {
  if (reinterpret_cast<uintptr_t>(p) % alignment != 0)
    fatal(std::string(what) + " of a " + std::to_string(alignment) + "-byte value at " + where_string(where) +
          " from a misaligned address " + std::to_string(reinterpret_cast<uintptr_t>(p)));
}

void misaligned_vector(const void* address, unsigned alignment, const char* type) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", address);
  fatal(std::string("misaligned ") + type + " access at " + buf + " (needs " + std::to_string(alignment) +
        "-byte alignment)");
}

}  // namespace detail
}  // namespace qrt::simt

long long clock64() {
  return static_cast<long long>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                    std::chrono::steady_clock::now().time_since_epoch())
                                    .count());
}
