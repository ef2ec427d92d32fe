// The SIMT layer's own pieces and how they meet (docs/simt.md has the overview):
//   memory.cpp        device and pinned allocations (poisoned, guard pages), the fault handler
//   block_runner.cpp  one thread block: a fiber per GPU thread, barriers, warp collectives, cp.async
//   grid.cpp          a grid's blocks spread over worker threads
//   device.cpp        devices, streams, events, graphs: ops queued per stream and run by a device executor thread
//   runtime_api.cpp   the cudaXxx entry points; cublas.cpp, cub.cpp, nccl.cpp the libraries qrt calls
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "simt/launch.hpp"
#include "simt/simt.hpp"
#include "simt/types.hpp"

namespace qrt::simt {

// Prints "qrt-simt: <message>" (with the running kernel, block and thread when called inside one) and aborts: the
// layer's answer to what a GPU would fault on or leave undefined.
[[noreturn]] void fatal(const std::string& message);
// "kernel K (file:line) block (x,y,z) thread (x,y,z)" when the calling OS thread is running a GPU thread, else "".
std::string kernel_context();

// Environment knobs, read once: QRT_SIMT_THREADS (OS threads running blocks), QRT_SIMT_DEVICES (device count),
// QRT_SIMT_DEVICE_GIB (memory per device), QRT_SIMT_DELAY_MS (how long queued work waits for a host sync before
// the device runs it by itself), QRT_SIMT_COLLECTIVE_TIMEOUT_S.
struct Settings {
  int worker_threads;
  int devices;
  uint64_t device_bytes;
  int delay_ms;
  int collective_timeout_s;
};
const Settings& settings();

// ---- memory (memory.cpp) ---------------------------------------------------------------------------------------
enum class MemoryKind { kDevice, kPinnedHost };

struct Allocation {
  uintptr_t base = 0;
  size_t bytes = 0;
  MemoryKind kind = MemoryKind::kDevice;
  int device = 0;
};

cudaError_t allocate_device(int device, size_t bytes, void** out);
cudaError_t free_device(void* ptr);  // the caller has drained the device's work
cudaError_t allocate_pinned(size_t bytes, void** out);
cudaError_t free_pinned(void* ptr);
// The live allocation containing [p, p + bytes), if there is one.
std::optional<Allocation> find_allocation(const void* p, size_t bytes = 1);
uint64_t device_bytes_in_use(int device);
// Installs the handler that turns a kernel's invalid access into a message naming the kernel and the address.
void install_fault_handler();

// ---- kernels (block_runner.cpp, grid.cpp) ----------------------------------------------------------------------
struct KernelLaunch {
  LaunchSite site;
  dim3 grid;
  dim3 block;
  size_t dynamic_smem = 0;
  std::shared_ptr<detail::KernelBody> body;
  bool programmatic = false;  // launched with programmatic stream serialization (launch.hpp)
};

// Blocks of programmatic launches in which some thread exited without waiting for the previous grid
// (programmatic_blocks_without_wait in simt.hpp), counted as they run.
void note_block_without_wait();

// Runs block `block_index` (linear, x fastest) of `launch` on the calling OS thread.
void run_block(const KernelLaunch& launch, uint64_t block_index);
// Runs every block of the grid (on the worker threads and the caller) and returns when all have finished.
void run_grid(const KernelLaunch& launch);
// Runs fn(i) for i in [0, n) on the worker threads and the caller (host-side library work: GEMM, sorts).
void parallel_for(int64_t n, const std::function<void(int64_t)>& fn);

// ---- devices and streams (device.cpp) --------------------------------------------------------------------------
struct Stream;
struct Event;

enum class OpKind { kKernel, kCopy, kMemset, kHostWork, kWait, kRecord, kCollective };

// What a stream op does when the device runs it, and what it counts as.
struct OpSpec {
  OpKind kind = OpKind::kHostWork;
  bool programmatic = false;  // a kernel launched with programmatic stream serialization
  std::function<void()> run;
  cudaMemcpyKind copy_kind = cudaMemcpyDefault;
  size_t bytes = 0;
};

int current_device();
cudaError_t set_current_device(int device);
// The stream a handle names on the calling thread (0 and cudaStreamLegacy: the current device's default stream);
// nullptr for a destroyed or foreign handle.
Stream* resolve_stream(cudaStream_t handle);
int stream_device(const Stream* s);
bool is_capturing(const Stream* s);
// Queues an op (or records it into the stream's capture; *seq then stays unset). Returns the error a capture rule
// raises, else success.
cudaError_t enqueue(Stream* s, OpSpec op, uint64_t* seq = nullptr);
// Host waits: for everything queued on the stream so far, for an event, for a whole device.
cudaError_t wait_stream(Stream* s);
cudaError_t wait_device(int device);
bool stream_idle(Stream* s);  // queries; a pending stream is nudged so that polling loops make progress
// Whether the calling thread may make a call that a capture in progress forbids (sync, malloc, legacy stream).
cudaError_t check_capture_allows_sync(Stream* s);
StreamCounters& counters_of(Stream* s);

cudaError_t create_stream(unsigned flags, cudaStream_t* out);
cudaError_t destroy_stream(cudaStream_t handle);
cudaError_t create_event(unsigned flags, cudaEvent_t* out);
cudaError_t destroy_event(cudaEvent_t event);
cudaError_t record_event(cudaEvent_t event, cudaStream_t stream);
cudaError_t wait_event_on_stream(cudaStream_t stream, cudaEvent_t event);
cudaError_t synchronize_event(cudaEvent_t event);
cudaError_t query_event(cudaEvent_t event);
cudaError_t event_elapsed_ms(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t begin_capture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t end_capture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t capture_status(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t instantiate_graph(cudaGraphExec_t* exec, cudaGraph_t graph);
cudaError_t launch_graph(cudaGraphExec_t exec, cudaStream_t stream);
cudaError_t destroy_graph(cudaGraph_t graph);
cudaError_t destroy_graph_exec(cudaGraphExec_t exec);
size_t graph_node_count(cudaGraph_t graph);

// The calling thread's last error (cudaGetLastError), set by launches that a GPU would refuse.
void set_last_error(cudaError_t e);
cudaError_t take_last_error();
cudaError_t peek_last_error();

}  // namespace qrt::simt
