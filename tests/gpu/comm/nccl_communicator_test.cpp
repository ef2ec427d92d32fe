// The NCCL communicator with one rank: device memory reduced on the communicator's stream in order with the
// caller's compute stream, the bootstrap's host collectives, setup errors; and the CUDA backend's hooks.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "backend/cuda_backend.hpp"
#include "backend/comm/communicator.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

#define QRT_REQUIRE_NCCL()                                                                        \
  do {                                                                                            \
    if (!nccl_communicator_built()) GTEST_SKIP() << "this build of qrt has no NCCL communicator"; \
  } while (0)

// Two host ranks as far as the CUDA backend can tell (it refuses host-memory communicators for GPU ranks).
class TwoRankHostCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 2; }
  int local_rank() const override { return 0; }
  std::string_view kind() const override { return "mpi"; }
  Status all_reduce_sum(float*, size_t, void*) override { return internal_error("not a real communicator"); }
  Status broadcast(void*, size_t, int) override { return internal_error("not a real communicator"); }
  Status agree(const Status& local) override { return local; }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

// Device memory that frees itself.
struct DeviceFloats {
  explicit DeviceFloats(size_t n) { EXPECT_EQ(cudaMalloc(&data, n * sizeof(float)), cudaSuccess); }
  ~DeviceFloats() { cudaFree(data); }
  float* data = nullptr;
};

TEST(NcclCommunicator, OneRankAllReduceIsOrderedWithTheComputeStream) {
  QRT_REQUIRE_GPU();
  QRT_REQUIRE_NCCL();
  auto single = make_single_rank_communicator();
  ASSERT_TRUE(single.ok());
  auto nccl = make_nccl_communicator(**single, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  Communicator& comm = **nccl;
  EXPECT_EQ(comm.kind(), "nccl");
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.world(), 1);
  EXPECT_EQ(comm.local_rank(), 0);

  // x: [n], uploaded, reduced and downloaded without a host wait in between: only the events order them.
  const size_t n = (size_t{1} << 20) + 5;
  const std::vector<float> x = test::random_normal(n, std::random_device{}());
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, n * sizeof(float)), cudaSuccess);
  std::memcpy(pinned, x.data(), n * sizeof(float));
  DeviceFloats device(n);
  cudaStream_t compute = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(device.data, pinned, n * sizeof(float), cudaMemcpyHostToDevice, compute), cudaSuccess);
  const Status reduced = comm.all_reduce_sum(device.data, n, compute);
  EXPECT_TRUE(reduced.ok()) << reduced.to_string();
  // The result goes to a second pinned buffer: the upload may still be reading the first one (the host must not
  // touch it before the stream is synchronized).
  float* back = nullptr;
  ASSERT_EQ(cudaMallocHost(&back, n * sizeof(float)), cudaSuccess);
  std::memset(back, 0, n * sizeof(float));
  ASSERT_EQ(cudaMemcpyAsync(back, device.data, n * sizeof(float), cudaMemcpyDeviceToHost, compute), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(compute), cudaSuccess);
  // One rank: the sum is the rank's own data, bit for bit.
  EXPECT_EQ(std::memcmp(back, x.data(), n * sizeof(float)), 0);
  cudaFreeHost(back);

  // The legacy default stream (nullptr) works as the compute stream too.
  EXPECT_TRUE(comm.all_reduce_sum(device.data, 7).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);

  // Host memory is refused before NCCL could fault on it.
  const Status host = comm.all_reduce_sum(pinned, n, compute);
  EXPECT_EQ(host.code(), ErrorCode::kInvalidArgument) << host.to_string();
  std::vector<float> pageable(4, 1.0f);
  EXPECT_EQ(comm.all_reduce_sum(pageable.data(), 4, compute).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(comm.all_reduce_sum(nullptr, 4, compute).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(comm.all_reduce_sum(nullptr, 0, compute).ok());

  cudaStreamDestroy(compute);
  cudaFreeHost(pinned);
}

TEST(NcclCommunicator, HostCollectivesGoThroughTheBootstrap) {
  QRT_REQUIRE_GPU();
  QRT_REQUIRE_NCCL();
  auto single = make_single_rank_communicator();
  ASSERT_TRUE(single.ok());
  auto nccl = make_nccl_communicator(**single, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  std::vector<uint8_t> bytes = test::random_bytes(33, std::random_device{}());
  const std::vector<uint8_t> original = bytes;
  EXPECT_TRUE((*nccl)->broadcast(bytes.data(), bytes.size(), 0).ok());
  EXPECT_EQ(bytes, original);
  EXPECT_EQ((*nccl)->broadcast(bytes.data(), bytes.size(), 1).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE((*nccl)->agree(ok_status()).ok());
  EXPECT_EQ((*nccl)->agree(io_error("disk gone")).message(), "disk gone");
}

TEST(NcclCommunicator, MissingDeviceIsAnError) {
  // Runs without a GPU too: the error comes from the device check (or the missing driver), never a crash.
  auto single = make_single_rank_communicator();
  ASSERT_TRUE(single.ok());
  auto nccl = make_nccl_communicator(**single, 1 << 20);
  ASSERT_FALSE(nccl.ok());
  if (nccl_communicator_built()) {
    EXPECT_NE(nccl.status().message().find("cuda:1048576"), std::string::npos) << nccl.status().to_string();
  } else {
    EXPECT_EQ(nccl.status().code(), ErrorCode::kUnsupported);
  }
}

TEST(CudaBackendTp, AllReduceGoesThroughTheNcclCommunicator) {
  QRT_REQUIRE_GPU();
  QRT_REQUIRE_NCCL();
  auto single = make_single_rank_communicator();
  ASSERT_TRUE(single.ok());
  auto nccl = make_nccl_communicator(**single, 0);
  ASSERT_TRUE(nccl.ok()) << nccl.status().to_string();
  auto backend = CudaBackend::create(0, nccl->get());
  ASSERT_TRUE(backend.ok()) << backend.status().to_string();
  EXPECT_EQ((*backend)->tp_rank(), 0);
  EXPECT_EQ((*backend)->tp_world_size(), 1);

  // x: [tokens = 5, hidden = 96]
  const int64_t tokens = 5, hidden = 96;
  const size_t n = static_cast<size_t>(tokens * hidden);
  const std::vector<float> x = test::random_normal(n, std::random_device{}());
  auto buffer = (*backend)->allocate(n * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  ASSERT_TRUE((*backend)->upload(x.data(), buffer->ptr, n * sizeof(float)).ok());
  const Status s = (*backend)->all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), tokens, hidden});
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::vector<float> back(n);
  ASSERT_TRUE((*backend)->download(buffer->ptr, back.data(), n * sizeof(float)).ok());
  EXPECT_EQ(back, x);
  const Status outside = (*backend)->all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), tokens + 1, hidden});
  EXPECT_FALSE(outside.ok());
  (*backend)->deallocate(*buffer);
}

TEST(CudaBackendTp, RefusesAHostMemoryCommunicatorForSeveralRanks) {
  // The check precedes opening the device, so it runs on machines without a GPU too.
  TwoRankHostCommunicator host;
  auto backend = CudaBackend::create(0, &host);
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), ErrorCode::kInvalidArgument) << backend.status().to_string();
  EXPECT_NE(backend.status().message().find("nccl"), std::string::npos);
}

}  // namespace
}  // namespace qrt
