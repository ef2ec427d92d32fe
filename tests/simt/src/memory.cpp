// Device memory for the SIMT layer. Every cudaMalloc is its own mapping, laid out so that the allocation ends
// (rounded up to the 256 bytes CUDA aligns to) where a PROT_NONE guard page begins, with another guard page in front:
//   [guard][0xFF slack][allocation ... 0xFF tail to 256][guard]
// Fresh memory is 0xFF bytes (NaN as float, -1 as an integer), so a read of memory never written shows up in
// results; a read past the end faults, and the fault handler names the kernel, the thread and the allocation.
// Freed allocations are unmapped, so a use after free faults too.
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

#include "internal.hpp"

namespace qrt::simt {
namespace {

constexpr size_t kDeviceAlignment = 256;

size_t page_size() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Mapping {
  Allocation alloc;
  void* map_base = nullptr;
  size_t map_bytes = 0;
};

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Mapping> live;  // by allocation base
  std::map<int, uint64_t> in_use;     // device -> bytes
  // The last freed device ranges, for naming a use after free.
  static constexpr int kFreedHistory = 256;
  Allocation freed[kFreedHistory];
  int freed_next = 0;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: kernels may still run while statics are torn down
  return *r;
}

std::string address_string(const void* p) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%p", p);
  return buf;
}

// What an address is, for a fault message. Called from the signal handler: only try_lock.
std::string describe_address(uintptr_t a) {
  Registry& r = registry();
  std::unique_lock<std::mutex> lock(r.mutex, std::try_to_lock);
  if (!lock.owns_lock()) return "";
  const size_t guard = page_size();
  for (const auto& [base, m] : r.live) {
    const uintptr_t start = base, end = base + m.alloc.bytes;
    if (a >= end && a < end + guard + kDeviceAlignment)
      return " (" + std::to_string(a - end) + " bytes past the end of a " + std::to_string(m.alloc.bytes) +
             "-byte allocation at " + address_string(reinterpret_cast<void*>(start)) + ")";
    if (a < start && a + guard + kDeviceAlignment >= start)
      return " (" + std::to_string(start - a) + " bytes before a " + std::to_string(m.alloc.bytes) +
             "-byte allocation at " + address_string(reinterpret_cast<void*>(start)) + ")";
  }
  for (const Allocation& f : r.freed) {
    if (f.bytes != 0 && a >= f.base && a < f.base + f.bytes)
      return " (inside a freed " + std::to_string(f.bytes) + "-byte allocation at " +
             address_string(reinterpret_cast<void*>(f.base)) + ")";
  }
  return "";
}

void on_fault(int sig, siginfo_t* info, void*) {
  const std::string where = kernel_context();
  if (!where.empty()) {
    const uintptr_t a = reinterpret_cast<uintptr_t>(info->si_addr);
    const std::string msg = "qrt-simt: " + where + ": invalid memory access at " + address_string(info->si_addr) +
                            describe_address(a) + "\n";
    (void)!write(2, msg.data(), msg.size());
    std::abort();
  }
  // Not a kernel: let the default action happen (a normal crash of host code).
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, nullptr);
    sigaction(SIGBUS, &sa, nullptr);
  });
  // The handler runs on an alternate stack: a fiber stack that overflowed cannot host it.
  thread_local bool has_alt_stack = false;
  if (!has_alt_stack) {
    has_alt_stack = true;
    stack_t ss{};
    ss.ss_size = 64 * 1024;
    ss.ss_sp = std::malloc(ss.ss_size);
    sigaltstack(&ss, nullptr);
  }
}

cudaError_t allocate_device(int device, size_t bytes, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  if (bytes == 0) return cudaSuccess;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    if (r.in_use[device] + bytes > settings().device_bytes) return cudaErrorMemoryAllocation;
  }
  const size_t page = page_size();
  const size_t body = round_up(round_up(bytes, kDeviceAlignment), page);
  const size_t map_bytes = body + 2 * page;
  void* m = mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) return cudaErrorMemoryAllocation;
  auto* base = static_cast<uint8_t*>(m);
  mprotect(base, page, PROT_NONE);
  mprotect(base + page + body, page, PROT_NONE);
  std::memset(base + page, 0xFF, body);
  uint8_t* user = base + page + body - round_up(bytes, kDeviceAlignment);
  Mapping mapping;
  mapping.alloc = Allocation{reinterpret_cast<uintptr_t>(user), bytes, MemoryKind::kDevice, device};
  mapping.map_base = m;
  mapping.map_bytes = map_bytes;
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live[mapping.alloc.base] = mapping;
  r.in_use[device] += bytes;
  *out = user;
  return cudaSuccess;
}

cudaError_t free_device(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  Registry& r = registry();
  Mapping m;
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.live.end() || it->second.alloc.kind != MemoryKind::kDevice) return cudaErrorInvalidValue;
    m = it->second;
    r.live.erase(it);
    r.in_use[m.alloc.device] -= m.alloc.bytes;
    r.freed[r.freed_next] = m.alloc;
    r.freed_next = (r.freed_next + 1) % Registry::kFreedHistory;
  }
  munmap(m.map_base, m.map_bytes);
  return cudaSuccess;
}

cudaError_t allocate_pinned(size_t bytes, void** out) {
  if (out == nullptr) return cudaErrorInvalidValue;
  *out = nullptr;
  void* p = std::aligned_alloc(kDeviceAlignment, round_up(bytes > 0 ? bytes : 1, kDeviceAlignment));
  if (p == nullptr) return cudaErrorMemoryAllocation;
  Mapping m;
  m.alloc = Allocation{reinterpret_cast<uintptr_t>(p), bytes, MemoryKind::kPinnedHost, -1};
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  r.live[m.alloc.base] = m;
  *out = p;
  return cudaSuccess;
}

cudaError_t free_pinned(void* ptr) {
  if (ptr == nullptr) return cudaSuccess;
  Registry& r = registry();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.live.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == r.live.end() || it->second.alloc.kind != MemoryKind::kPinnedHost) return cudaErrorInvalidValue;
    r.live.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}

std::optional<Allocation> find_allocation(const void* p, size_t bytes) {
  Registry& r = registry();
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(r.mutex);
  auto it = r.live.upper_bound(a);
  if (it == r.live.begin()) return std::nullopt;
  --it;
  const Allocation& al = it->second.alloc;
  const size_t extent = al.bytes > 0 ? al.bytes : 1;
  if (a < al.base || a - al.base >= extent) return std::nullopt;
  if (bytes > extent - (a - al.base)) return std::nullopt;
  return al;
}

uint64_t device_bytes_in_use(int device) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mutex);
  return r.in_use[device];
}

}  // namespace qrt::simt
