// NCCL collectives for the SIMT layer. A communicator is a shared-memory segment named by its unique id (POSIX shm,
// or a process-local table where /dev/shm is unavailable), so ranks can be threads of one process or processes
// started by mpirun. A collective is an op of the caller's stream: when the rank's device runs it, the rank copies
// its part into its slot, meets the others at a barrier, and reads every slot in rank order - so all ranks compute
// bit-identical results, as NCCL's ring all-reduce does not promise but tests can rely on. A peer that never
// arrives ends the program after QRT_SIMT_COLLECTIVE_TIMEOUT_S with a message instead of hanging it.
#include <fcntl.h>
#include <nccl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "internal.hpp"

namespace {

using qrt::simt::fatal;

constexpr size_t kSlotBytes = size_t{1} << 20;  // per rank and step; larger buffers go in chunks
constexpr size_t kHeaderBytes = 64;

struct Header {
  std::atomic<uint32_t> joined;
  std::atomic<uint32_t> aborted;
  std::atomic<uint64_t> arrivals;
};
static_assert(sizeof(Header) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free, "process-shared atomics need lock-free ones");

size_t region_bytes(int nranks) { return kHeaderBytes + static_cast<size_t>(nranks) * kSlotBytes; }

// Segments of communicators whose ranks are all in this process, when POSIX shared memory is unavailable.
std::mutex& local_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::string, uint8_t*>& local_regions() {
  static auto* m = new std::map<std::string, uint8_t*>();
  return *m;
}

}  // namespace

struct ncclComm {
  int rank = 0;
  int nranks = 1;
  int device = 0;
  std::string name;
  uint8_t* region = nullptr;
  bool shm = false;
  uint64_t barriers = 0;  // barriers this rank has entered
  std::atomic<ncclResult_t> async_error{ncclSuccess};
  std::string last_error;

  Header* header() const { return reinterpret_cast<Header*>(region); }
  uint8_t* slot(int r) const { return region + kHeaderBytes + static_cast<size_t>(r) * kSlotBytes; }

  // All ranks in; false if a peer aborted (the collective's data is then left as it was).
  bool barrier(const char* what) {
    const uint64_t target = (++barriers) * static_cast<uint64_t>(nranks);
    header()->arrivals.fetch_add(1);
    const auto start = std::chrono::steady_clock::now();
    const auto limit = std::chrono::seconds(qrt::simt::settings().collective_timeout_s);
    for (int spins = 0; header()->arrivals.load() < target; ++spins) {
      if (header()->aborted.load() != 0) {
        async_error = ncclRemoteError;
        last_error = "a peer aborted the communicator";
        return false;
      }
      if (spins > 1000) std::this_thread::sleep_for(std::chrono::microseconds(50));
      if (spins % 1024 == 0 && std::chrono::steady_clock::now() - start > limit)
        fatal(std::string(what) + " on rank " + std::to_string(rank) + " of " + std::to_string(nranks) + " waited " +
              std::to_string(qrt::simt::settings().collective_timeout_s) +
              " s for peers that never arrived (did every rank issue the same collectives?)");
    }
    return true;
  }
};

namespace {

size_t type_bytes(ncclDataType_t t) {
  switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  }
  return 0;
}

template <class T, class Acc>
void reduce_typed(ncclComm* c, size_t n, ncclRedOp_t op, uint8_t* out) {
  for (size_t i = 0; i < n; ++i) {
    Acc acc = static_cast<Acc>(reinterpret_cast<const T*>(c->slot(0))[i]);
    for (int r = 1; r < c->nranks; ++r) {
      const Acc v = static_cast<Acc>(reinterpret_cast<const T*>(c->slot(r))[i]);
      switch (op) {
        case ncclSum: case ncclAvg: acc = acc + v; break;
        case ncclProd: acc = acc * v; break;
        case ncclMax: acc = v > acc ? v : acc; break;
        case ncclMin: acc = v < acc ? v : acc; break;
      }
    }
    if (op == ncclAvg) acc = acc / static_cast<Acc>(c->nranks);
    reinterpret_cast<T*>(out)[i] = static_cast<T>(acc);
  }
}

void reduce(ncclComm* c, ncclDataType_t t, size_t n, ncclRedOp_t op, uint8_t* out) {
  switch (t) {
    case ncclInt8: reduce_typed<int8_t, int64_t>(c, n, op, out); break;
    case ncclUint8: reduce_typed<uint8_t, uint64_t>(c, n, op, out); break;
    case ncclInt32: reduce_typed<int32_t, int64_t>(c, n, op, out); break;
    case ncclUint32: reduce_typed<uint32_t, uint64_t>(c, n, op, out); break;
    case ncclInt64: reduce_typed<int64_t, int64_t>(c, n, op, out); break;
    case ncclUint64: reduce_typed<uint64_t, uint64_t>(c, n, op, out); break;
    case ncclFloat16: reduce_typed<__half, float>(c, n, op, out); break;
    case ncclBfloat16: reduce_typed<__nv_bfloat16, float>(c, n, op, out); break;
    case ncclFloat32: reduce_typed<float, float>(c, n, op, out); break;
    case ncclFloat64: reduce_typed<double, double>(c, n, op, out); break;
  }
}

bool on_device(ncclComm* c, const void* p, size_t bytes) {
  if (bytes == 0) return true;
  auto a = qrt::simt::find_allocation(p, bytes);
  return a && a->kind == qrt::simt::MemoryKind::kDevice && a->device == c->device;
}

ncclResult_t fail(ncclComm* c, ncclResult_t r, const std::string& why) {
  if (c != nullptr) c->last_error = why;
  std::fprintf(stderr, "qrt-simt: %s\n", why.c_str());
  return r;
}

ncclResult_t enqueue(ncclComm* c, cudaStream_t stream, std::function<void()> run) {
  qrt::simt::Stream* s = qrt::simt::resolve_stream(stream);
  if (s == nullptr) return fail(c, ncclInvalidArgument, "NCCL collective on a stream that is not live");
  qrt::simt::OpSpec op;
  op.kind = qrt::simt::OpKind::kCollective;
  op.run = std::move(run);
  return qrt::simt::enqueue(s, std::move(op)) == cudaSuccess ? ncclSuccess : ncclInvalidUsage;
}

uint8_t* open_region(const std::string& name, int nranks, bool* shm) {
  const size_t bytes = region_bytes(nranks);
  const int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd >= 0) {
    const bool sized = ftruncate(fd, static_cast<off_t>(bytes)) == 0;
    void* m = sized ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
    close(fd);
    if (m != MAP_FAILED) {
      *shm = true;
      return static_cast<uint8_t*>(m);
    }
    shm_unlink(name.c_str());
  }
  // No POSIX shared memory: ranks must be threads of this process.
  std::lock_guard<std::mutex> lock(local_mutex());
  uint8_t*& r = local_regions()[name];
  if (r == nullptr) r = static_cast<uint8_t*>(std::calloc(1, bytes));
  *shm = false;
  return r;
}

}  // namespace

ncclResult_t ncclGetVersion(int* version) {
  if (version == nullptr) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (id == nullptr) return ncclInvalidArgument;
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  const std::string name = "/qrt-simt-nccl-" + std::to_string(getpid()) + "-" + std::to_string(counter++) + "-" +
                           std::to_string((uint64_t{rd()} << 32) | rd());
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, name.data(), std::min(name.size(), sizeof id->internal - 1));
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* out, int nranks, ncclUniqueId id, int rank, ncclConfig_t*) {
  if (out == nullptr) return ncclInvalidArgument;
  *out = nullptr;
  if (nranks < 1 || rank < 0 || rank >= nranks) return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: bad rank");
  if (id.internal[0] != '/') return fail(nullptr, ncclInvalidArgument, "ncclCommInitRank: not a unique id");
  auto* c = new ncclComm();
  c->rank = rank;
  c->nranks = nranks;
  c->device = qrt::simt::current_device();
  c->name.assign(id.internal, strnlen(id.internal, sizeof id.internal));
  c->region = open_region(c->name, nranks, &c->shm);
  c->header()->joined.fetch_add(1);
  const auto start = std::chrono::steady_clock::now();
  while (c->header()->joined.load() < static_cast<uint32_t>(nranks)) {
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(qrt::simt::settings().collective_timeout_s)) {
      c->async_error = ncclSystemError;
      c->last_error = "ncclCommInitRank: not every rank joined";
      *out = c;
      return ncclSystemError;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  if (rank == 0 && c->shm) shm_unlink(c->name.c_str());  // everyone has it mapped; nothing is left behind
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  return ncclCommInitRankConfig(comm, nranks, id, rank, nullptr);
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) { return comm ? ncclSuccess : ncclInvalidArgument; }

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) return ncclInvalidArgument;
  if (comm->shm) munmap(comm->region, region_bytes(comm->nranks));
  delete comm;  // a process-local region stays: another rank may still read it
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) return ncclSuccess;
  comm->header()->aborted.store(1);
  return ncclCommDestroy(comm);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (comm == nullptr || async_error == nullptr) return ncclInvalidArgument;
  *async_error = comm->async_error.load();
  return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
  if (comm == nullptr || count == nullptr) return ncclInvalidArgument;
  *count = comm->nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
  if (comm == nullptr || rank == nullptr) return ncclInvalidArgument;
  *rank = comm->rank;
  return ncclSuccess;
}

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

const char* ncclGetLastError(ncclComm_t comm) { return comm ? comm->last_error.c_str() : ""; }
ncclResult_t ncclGroupStart() { return ncclSuccess; }
ncclResult_t ncclGroupEnd() { return ncclSuccess; }

ncclResult_t ncclAllReduce(const void* send, void* recv, size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  const size_t elem = type_bytes(type);
  if (elem == 0) return fail(comm, ncclInvalidArgument, "ncclAllReduce: unknown data type");
  if (!on_device(comm, send, count * elem) || !on_device(comm, recv, count * elem))
    return fail(comm, ncclInvalidArgument, "ncclAllReduce: a buffer is not device memory of the communicator's device");
  return enqueue(comm, stream, [comm, send, recv, count, type, op, elem] {
    const size_t per_step = kSlotBytes / elem;
    std::vector<uint8_t> out(std::min(count, per_step) * elem);
    for (size_t at = 0; at < count; at += per_step) {
      const size_t n = std::min(per_step, count - at);
      std::memcpy(comm->slot(comm->rank), static_cast<const uint8_t*>(send) + at * elem, n * elem);
      if (!comm->barrier("ncclAllReduce")) return;
      reduce(comm, type, n, op, out.data());
      if (!comm->barrier("ncclAllReduce")) return;  // every rank has read every slot before they are reused
      std::memcpy(static_cast<uint8_t*>(recv) + at * elem, out.data(), n * elem);
    }
  });
}

ncclResult_t ncclAllGather(const void* send, void* recv, size_t sendcount, ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  if (comm == nullptr) return ncclInvalidArgument;
  const size_t elem = type_bytes(type);
  if (elem == 0) return fail(comm, ncclInvalidArgument, "ncclAllGather: unknown data type");
  if (!on_device(comm, send, sendcount * elem) || !on_device(comm, recv, sendcount * elem * comm->nranks))
    return fail(comm, ncclInvalidArgument, "ncclAllGather: a buffer is not device memory of the communicator's device");
  return enqueue(comm, stream, [comm, send, recv, sendcount, elem] {
    const size_t per_step = kSlotBytes / elem;
    for (size_t at = 0; at < sendcount; at += per_step) {
      const size_t n = std::min(per_step, sendcount - at);
      std::memcpy(comm->slot(comm->rank), static_cast<const uint8_t*>(send) + at * elem, n * elem);
      if (!comm->barrier("ncclAllGather")) return;
      for (int r = 0; r < comm->nranks; ++r)
        std::memcpy(static_cast<uint8_t*>(recv) + (static_cast<size_t>(r) * sendcount + at) * elem, comm->slot(r),
                    n * elem);
      if (!comm->barrier("ncclAllGather")) return;
    }
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, size_t count, ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (comm == nullptr || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
  const size_t elem = type_bytes(type);
  if (elem == 0) return fail(comm, ncclInvalidArgument, "ncclBroadcast: unknown data type");
  if ((comm->rank == root && !on_device(comm, send, count * elem)) || !on_device(comm, recv, count * elem))
    return fail(comm, ncclInvalidArgument, "ncclBroadcast: a buffer is not device memory of the communicator's device");
  return enqueue(comm, stream, [comm, send, recv, count, elem, root] {
    const size_t per_step = kSlotBytes / elem;
    for (size_t at = 0; at < count; at += per_step) {
      const size_t n = std::min(per_step, count - at);
      if (comm->rank == root) std::memcpy(comm->slot(root), static_cast<const uint8_t*>(send) + at * elem, n * elem);
      if (!comm->barrier("ncclBroadcast")) return;
      std::memmove(static_cast<uint8_t*>(recv) + at * elem, comm->slot(root), n * elem);
      if (!comm->barrier("ncclBroadcast")) return;
    }
  });
}
