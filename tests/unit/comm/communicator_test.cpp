// The communicators. SingleRank.*, CommEnvironment.* and CpuBackendTp.* run in every mode; MultiRank.* run under
// `mpirun -np 2` and `-np 4` (ctest qrt_comm_tests_np2 / _np4). Every rank issues the same collectives in the same
// order whatever its checks find (EXPECT, never an ASSERT between collectives), so a failing check cannot leave
// the other ranks waiting.
//
// References: every rank can regenerate every other rank's random input from the shared seed, so the expected
// sums are computed independently (in double) on each rank, without using the communicator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "comm_test_world.hpp"
#include "backend/cpu_backend.hpp"
#include "test_support.hpp"

namespace qrt {
namespace {

Communicator& world() { return test::world_communicator(); }

// A fresh seed for this run, the same on every rank (rank 0 draws it).
uint64_t shared_seed() {
  uint64_t seed = 0;
  if (world().rank() == 0) seed = (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
  EXPECT_TRUE(world().broadcast(&seed, sizeof seed, 0).ok());
  return seed;
}

// Rank r's input for case `c`: never zeros.
std::vector<float> rank_input(uint64_t seed, int c, int r, size_t n) {
  return test::random_normal(n, seed + 7919u * static_cast<uint64_t>(c) + static_cast<uint64_t>(r));
}

// Checks `got` against the sum over all ranks of rank_input(seed, c, r, n), within 1e-5 of sum |x_r|.
void expect_sum_of_all_ranks(const std::vector<float>& got, uint64_t seed, int c) {
  const size_t n = got.size();
  std::vector<double> sum(n, 0.0), magnitude(n, 0.0);
  for (int r = 0; r < world().world(); ++r) {
    const std::vector<float> x = rank_input(seed, c, r, n);
    for (size_t i = 0; i < n; ++i) {
      sum[i] += x[i];
      magnitude[i] += std::fabs(x[i]);
    }
  }
  size_t bad = 0;
  for (size_t i = 0; i < n; ++i) {
    if (std::fabs(got[i] - sum[i]) > 1e-5 * magnitude[i] || !std::isfinite(got[i])) {
      if (bad++ < 5) ADD_FAILURE() << "element " << i << ": got " << got[i] << ", expected " << sum[i];
    }
  }
  EXPECT_EQ(bad, 0u) << "of " << n << " elements (seed " << seed << ", case " << c << ")";
}

// Whether `bytes` are the same on every rank: rank 0 sends its copy, every rank compares.
bool same_on_every_rank(const void* data, size_t bytes) {
  std::vector<uint8_t> rank0(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  EXPECT_TRUE(world().broadcast(rank0.data(), bytes, 0).ok());
  return bytes == 0 || std::memcmp(rank0.data(), data, bytes) == 0;
}

bool same_on_every_rank(const std::string& s) {
  uint64_t size = s.size();
  EXPECT_TRUE(world().broadcast(&size, sizeof size, 0).ok());
  const bool same_size = size == s.size();
  std::string rank0 = s;
  rank0.resize(size);
  EXPECT_TRUE(world().broadcast(rank0.data(), rank0.size(), 0).ok());
  return same_size && rank0 == s;
}

// Sets and unsets the launcher's environment variables for one test, restoring them afterwards.
class ScopedLauncherEnvironment {
 public:
  static constexpr const char* kNames[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"};
  ScopedLauncherEnvironment() {
    for (size_t i = 0; i < std::size(kNames); ++i) {
      const char* v = std::getenv(kNames[i]);
      saved_[i] = v ? std::optional<std::string>(v) : std::nullopt;
      unsetenv(kNames[i]);
    }
  }
  ~ScopedLauncherEnvironment() {
    for (size_t i = 0; i < std::size(kNames); ++i) {
      if (saved_[i]) setenv(kNames[i], saved_[i]->c_str(), 1);
      else unsetenv(kNames[i]);
    }
  }
  void set(const char* name, const char* value) { setenv(name, value, 1); }

 private:
  std::optional<std::string> saved_[std::size(kNames)];
};

// ---- single rank ------------------------------------------------------------------------------------------------

TEST(SingleRank, IsRankZeroOfOne) {
  auto comm = make_single_rank_communicator();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  EXPECT_EQ((*comm)->kind(), "single");
  EXPECT_EQ((*comm)->rank(), 0);
  EXPECT_EQ((*comm)->world(), 1);
  EXPECT_EQ((*comm)->local_rank(), 0);
}

TEST(SingleRank, AllReduceSumIsTheIdentity) {
  auto comm = make_single_rank_communicator();
  ASSERT_TRUE(comm.ok());
  const std::vector<float> original = test::random_normal(1031, std::random_device{}());
  std::vector<float> data = original;
  ASSERT_TRUE((*comm)->all_reduce_sum(data.data(), data.size()).ok());
  EXPECT_EQ(std::memcmp(data.data(), original.data(), data.size() * sizeof(float)), 0);
  EXPECT_TRUE((*comm)->all_reduce_sum(nullptr, 0).ok());
  const Status null_data = (*comm)->all_reduce_sum(nullptr, 4);
  EXPECT_EQ(null_data.code(), ErrorCode::kInvalidArgument) << null_data.to_string();
}

TEST(SingleRank, BroadcastChecksTheRoot) {
  auto comm = make_single_rank_communicator();
  ASSERT_TRUE(comm.ok());
  std::vector<uint8_t> bytes = test::random_bytes(77, std::random_device{}());
  const std::vector<uint8_t> original = bytes;
  EXPECT_TRUE((*comm)->broadcast(bytes.data(), bytes.size(), 0).ok());
  EXPECT_EQ(bytes, original);
  for (int root : {1, -1}) {
    const Status s = (*comm)->broadcast(bytes.data(), bytes.size(), root);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "root " << root;
    EXPECT_NE(s.message().find("root rank " + std::to_string(root)), std::string::npos) << s.message();
  }
  EXPECT_EQ((*comm)->broadcast(nullptr, 3, 0).code(), ErrorCode::kInvalidArgument);
}

TEST(SingleRank, AgreeReturnsTheLocalStatus) {
  auto comm = make_single_rank_communicator();
  ASSERT_TRUE(comm.ok());
  EXPECT_TRUE((*comm)->agree(ok_status()).ok());
  const Status failed = (*comm)->agree(not_found("model.gguf: no such file"));
  EXPECT_EQ(failed.code(), ErrorCode::kNotFound);
  EXPECT_EQ(failed.message(), "model.gguf: no such file");
}

// ---- the environment ----------------------------------------------------------------------------------------

TEST(CommEnvironment, WorldCommunicatorMatchesTheLauncher) {
  auto launched = launcher_world_size();
  ASSERT_TRUE(launched.ok()) << launched.status().to_string();
  EXPECT_EQ(world().world(), *launched);
  EXPECT_EQ(world().kind(), *launched == 1 ? "single" : "mpi");
}

TEST(CommEnvironment, LauncherWorldSizeReadsEachLauncher) {
  ScopedLauncherEnvironment env;
  std::string source = "stale";
  auto none = launcher_world_size(&source);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, 1);
  EXPECT_EQ(source, "");

  for (const char* name : ScopedLauncherEnvironment::kNames) {
    ScopedLauncherEnvironment inner;
    inner.set(name, "3");
    auto three = launcher_world_size(&source);
    ASSERT_TRUE(three.ok()) << name << ": " << three.status().to_string();
    EXPECT_EQ(*three, 3) << name;
    EXPECT_EQ(source, std::string(name) + "=3");
  }
}

TEST(CommEnvironment, LauncherWorldSizeRejectsGarbage) {
  for (const char* value : {"", "abc", "0", "-2", "2x", "99999999999"}) {
    ScopedLauncherEnvironment env;
    env.set("PMI_SIZE", value);
    auto size = launcher_world_size();
    ASSERT_FALSE(size.ok()) << "'" << value << "' accepted as " << (size.ok() ? *size : 0);
    EXPECT_EQ(size.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(size.status().message().find("PMI_SIZE='" + std::string(value) + "'"), std::string::npos)
        << size.status().message();
  }
}

TEST(CommEnvironment, OneLaunchedRankIsASingleRank) {
  ScopedLauncherEnvironment env;
  env.set("OMPI_COMM_WORLD_SIZE", "1");
  auto comm = make_communicator_from_environment();
  ASSERT_TRUE(comm.ok()) << comm.status().to_string();
  EXPECT_EQ((*comm)->kind(), "single");
}

#if !defined(QRT_HAVE_MPI)
// Without MPI, N launched ranks would be N unrelated single-rank jobs: refused, naming the cause.
TEST(CommEnvironment, BuildWithoutMpiRefusesSeveralRanks) {
  ScopedLauncherEnvironment env;
  env.set("OMPI_COMM_WORLD_SIZE", "2");
  auto comm = make_communicator_from_environment();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(comm.status().message().find("no MPI"), std::string::npos) << comm.status().message();
  EXPECT_NE(comm.status().message().find("OMPI_COMM_WORLD_SIZE=2"), std::string::npos) << comm.status().message();
  EXPECT_FALSE(make_mpi_communicator().ok());
}
#endif

// The NCCL factory tells a build without NCCL from a missing device or failed setup.
TEST(CommEnvironment, NcclFactorySaysWhetherTheBuildHasNccl) {
  auto single = make_single_rank_communicator();
  ASSERT_TRUE(single.ok());
  auto nccl = make_nccl_communicator(**single, 0);
  if (!nccl_communicator_built()) {
    ASSERT_FALSE(nccl.ok());
    EXPECT_EQ(nccl.status().code(), ErrorCode::kUnsupported);
    EXPECT_NE(nccl.status().message().find("no NCCL"), std::string::npos) << nccl.status().message();
  } else if (!nccl.ok()) {
    // Built with NCCL: a failure here is about the device (none on a CI machine), never "no NCCL".
    EXPECT_EQ(nccl.status().message().find("no NCCL"), std::string::npos) << nccl.status().message();
    EXPECT_NE(nccl.status().message().find("cuda:0"), std::string::npos) << nccl.status().message();
  }
}

// ---- the CPU backend's tensor-parallel hooks -------------------------------------------------------------------

TEST(CpuBackendTp, WithoutCommunicatorIsOneRank) {
  CpuBackend backend;
  EXPECT_EQ(backend.tp_rank(), 0);
  EXPECT_EQ(backend.tp_world_size(), 1);
  auto buffer = backend.allocate(64 * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  const std::vector<float> x = test::random_normal(64, std::random_device{}());
  ASSERT_TRUE(backend.upload(x.data(), buffer->ptr, 64 * sizeof(float)).ok());
  const F32View view{static_cast<float*>(buffer->ptr), 8, 8};
  ASSERT_TRUE(backend.all_reduce_sum(view).ok());
  std::vector<float> back(64);
  ASSERT_TRUE(backend.download(buffer->ptr, back.data(), 64 * sizeof(float)).ok());
  EXPECT_EQ(back, x);
  // The view is still checked against the allocations.
  const Status outside = backend.all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), 9, 8});
  EXPECT_EQ(outside.code(), ErrorCode::kOutOfRange) << outside.to_string();
  backend.deallocate(*buffer);
}

// A device-memory communicator, as far as the CPU backend can tell.
class FakeDeviceCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 2; }
  int local_rank() const override { return 0; }
  std::string_view kind() const override { return "nccl"; }
  Status all_reduce_sum(float*, size_t, void*) override { return internal_error("must not be called"); }
  Status broadcast(void*, size_t, int) override { return internal_error("must not be called"); }
  Status agree(const Status& local) override { return local; }
  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

TEST(CpuBackendTp, RefusesADeviceMemoryCommunicator) {
  FakeDeviceCommunicator nccl;
  CpuBackend backend(&nccl);
  EXPECT_EQ(backend.tp_rank(), 0);
  EXPECT_EQ(backend.tp_world_size(), 2);
  auto buffer = backend.allocate(16 * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  const Status s = backend.all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), 4, 4});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.to_string();
  backend.deallocate(*buffer);
}

// ---- several ranks (mpirun) -----------------------------------------------------------------------------------

TEST(MultiRank, RanksAreDistinctAndOnThisHost) {
  auto launched = launcher_world_size();
  ASSERT_TRUE(launched.ok());
  EXPECT_EQ(world().kind(), "mpi");
  EXPECT_EQ(world().world(), *launched);
  EXPECT_GE(world().rank(), 0);
  EXPECT_LT(world().rank(), world().world());
  EXPECT_EQ(world().local_rank(), world().rank()) << "all ranks of the test run on one host";
  // One-hot rows summed: every rank appears exactly once.
  std::vector<float> seen(static_cast<size_t>(world().world()), 0.0f);
  seen[static_cast<size_t>(world().rank())] = 1.0f;
  EXPECT_TRUE(world().all_reduce_sum(seen.data(), seen.size()).ok());
  for (size_t r = 0; r < seen.size(); ++r) EXPECT_EQ(seen[r], 1.0f) << "rank " << r;
}

TEST(MultiRank, AllReduceSumMatchesAnIndependentSum) {
  const uint64_t seed = shared_seed();
  const size_t sizes[] = {1, 3, 1000, 65536 + 7};
  for (int c = 0; c < static_cast<int>(std::size(sizes)); ++c) {
    SCOPED_TRACE("n = " + std::to_string(sizes[c]) + ", seed " + std::to_string(seed));
    std::vector<float> data = rank_input(seed, c, world().rank(), sizes[c]);
    const Status s = world().all_reduce_sum(data.data(), data.size());
    EXPECT_TRUE(s.ok()) << s.to_string();
    expect_sum_of_all_ranks(data, seed, c);
    EXPECT_TRUE(same_on_every_rank(data.data(), data.size() * sizeof(float))) << "sums differ between ranks";
  }
  EXPECT_TRUE(world().all_reduce_sum(nullptr, 0).ok());
}

TEST(MultiRank, BroadcastFromEveryRoot) {
  const uint64_t seed = shared_seed();
  const size_t sizes[] = {0, 1, 13, (size_t{1} << 20) + 3};
  for (int root = 0; root < world().world(); ++root) {
    for (size_t n : sizes) {
      SCOPED_TRACE("root " + std::to_string(root) + ", " + std::to_string(n) + " bytes, seed " + std::to_string(seed));
      const std::vector<uint8_t> expected = test::random_bytes(n, seed + static_cast<uint64_t>(root));
      // Non-roots start from their own different bytes.
      const uint64_t own_seed = seed + 1000 + static_cast<uint64_t>(world().rank());
      std::vector<uint8_t> data = world().rank() == root ? expected : test::random_bytes(n, own_seed);
      const Status s = world().broadcast(data.data(), data.size(), root);
      EXPECT_TRUE(s.ok()) << s.to_string();
      EXPECT_TRUE(data == expected);
    }
  }
  for (int root : {-1, world().world()}) {
    std::vector<uint8_t> data(4);
    const Status s = world().broadcast(data.data(), data.size(), root);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << "root " << root << ": " << s.to_string();
  }
}

TEST(MultiRank, AgreeWithoutFailuresIsOk) {
  for (int i = 0; i < 3; ++i) {
    const Status s = world().agree(ok_status());
    EXPECT_TRUE(s.ok()) << s.to_string();
  }
}

TEST(MultiRank, AgreeCarriesTheOneFailingRanksError) {
  for (int failing = 0; failing < world().world(); ++failing) {
    const std::string message = "tensor blk." + std::to_string(failing) + ".ffn_down: slice not block-aligned";
    const Status local = world().rank() == failing ? format_error(message) : ok_status();
    const Status agreed = world().agree(local);
    EXPECT_EQ(agreed.code(), ErrorCode::kFormatError) << "failing rank " << failing;
    EXPECT_EQ(agreed.message(), "rank " + std::to_string(failing) + ": " + message);
  }
}

TEST(MultiRank, AgreeWithSeveralFailuresReportsTheLowestRank) {
  const int w = world().world();
  const int me = world().rank();
  // Each pattern: which ranks fail, and the lowest of them.
  struct Pattern {
    std::string name;
    bool (*fails)(int rank, int world);
    int lowest;
  };
  const Pattern patterns[] = {
      {"all", [](int, int) { return true; }, 0},
      {"all but rank 0", [](int r, int) { return r > 0; }, 1},
      {"odd ranks", [](int r, int) { return r % 2 == 1; }, 1},
      {"the last two", [](int r, int n) { return r >= n - 2; }, w - 2},
  };
  for (const Pattern& p : patterns) {
    // Every failing rank has its own code and message, so the winner is recognizable.
    const ErrorCode code = me % 2 ? ErrorCode::kIoError : ErrorCode::kNotFound;
    const Status local = p.fails(me, w) ? Status(code, "shard " + std::to_string(me) + " unreadable") : ok_status();
    const Status agreed = world().agree(local);
    EXPECT_FALSE(agreed.ok()) << p.name;
    EXPECT_EQ(agreed.code(), p.lowest % 2 ? ErrorCode::kIoError : ErrorCode::kNotFound) << p.name;
    EXPECT_EQ(agreed.message(), "rank " + std::to_string(p.lowest) + ": shard " + std::to_string(p.lowest) +
                                    " unreadable")
        << p.name;
    EXPECT_TRUE(same_on_every_rank(agreed.to_string())) << p.name;
  }
  // Afterwards the communicator is usable and agrees on success again.
  EXPECT_TRUE(world().agree(ok_status()).ok());
}

TEST(MultiRank, AgreeCutsHugeMessages) {
  const int failing = world().world() - 1;
  const std::string huge(200000, 'x');
  const Status agreed = world().agree(world().rank() == failing ? io_error(huge) : ok_status());
  EXPECT_EQ(agreed.code(), ErrorCode::kIoError);
  const std::string prefix = "rank " + std::to_string(failing) + ": ";
  EXPECT_EQ(agreed.message().substr(0, prefix.size()), prefix);
  EXPECT_EQ(agreed.message().size(), prefix.size() + 65536);
}

TEST(MultiRank, CpuBackendAllReduceGoesThroughTheCommunicator) {
  const uint64_t seed = shared_seed();
  CpuBackend backend(&world());
  EXPECT_EQ(backend.tp_rank(), world().rank());
  EXPECT_EQ(backend.tp_world_size(), world().world());

  // x: [tokens = 3, hidden = 37], a row-parallel layer's partial output on this rank.
  const int64_t tokens = 3, hidden = 37;
  const size_t n = static_cast<size_t>(tokens * hidden);
  const std::vector<float> partial = rank_input(seed, 0, world().rank(), n);
  auto buffer = backend.allocate(n * sizeof(float));
  ASSERT_TRUE(buffer.ok());
  EXPECT_TRUE(backend.upload(partial.data(), buffer->ptr, n * sizeof(float)).ok());
  const Status s = backend.all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), tokens, hidden});
  EXPECT_TRUE(s.ok()) << s.to_string();
  std::vector<float> x(n);
  EXPECT_TRUE(backend.download(buffer->ptr, x.data(), n * sizeof(float)).ok());
  expect_sum_of_all_ranks(x, seed, 0);
  EXPECT_TRUE(same_on_every_rank(x.data(), n * sizeof(float)));

  // A view outside the allocation is refused on every rank before any collective.
  const Status outside = backend.all_reduce_sum(F32View{static_cast<float*>(buffer->ptr), tokens + 1, hidden});
  EXPECT_EQ(outside.code(), ErrorCode::kOutOfRange) << outside.to_string();
  backend.deallocate(*buffer);
}

}  // namespace
}  // namespace qrt
