// The test main of the communicator tests. Run alone it is one rank and runs the single-rank tests; under
// `mpirun -np N` every rank runs every test (the MultiRank.* tests issue the same collectives in the same order on
// all ranks), rank 0 prints the usual gtest report, the other ranks print only their failures, and every rank
// exits with the same status: failed when any rank failed.
#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "comm_test_world.hpp"

namespace qrt::test {
namespace {

std::unique_ptr<Communicator> g_world;

// The report of a rank other than 0: its failures only, prefixed with the rank.
class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  // The test's name is kept from OnTestStart: gtest calls OnTestPartResult holding the lock that
  // UnitTest::current_test_info() takes.
  void OnTestStart(const testing::TestInfo& test) override {
    test_ = std::string(test.test_suite_name()) + "." + test.name();
  }
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::fprintf(stderr, "[rank %d] %s failed at %s:%d\n%s\n", rank_, test_.c_str(),
                 result.file_name() ? result.file_name() : "?", result.line_number(), result.summary());
  }

 private:
  int rank_;
  std::string test_;
};

}  // namespace

Communicator& world_communicator() { return *g_world; }

}  // namespace qrt::test

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto world = qrt::make_communicator_from_environment();
  if (!world.ok()) {
    std::fprintf(stderr, "qrt_comm_tests: %s\n", world.status().to_string().c_str());
    return 1;
  }
  qrt::test::g_world = std::move(world).value();
  qrt::Communicator& comm = *qrt::test::g_world;

  if (comm.world() == 1) {
    // Alone, the multi-rank tests have no peers: leave them out (also from --gtest_list_tests, so that ctest does
    // not register tests that could only skip); the mpirun runs execute them.
    std::string filter = GTEST_FLAG_GET(filter);
    filter += filter.find('-') == std::string::npos ? "-MultiRank.*" : ":MultiRank.*";
    GTEST_FLAG_SET(filter, filter);
  } else if (comm.rank() != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new qrt::test::FailurePrinter(comm.rank()));
  }

  const int failed = RUN_ALL_TESTS();
  const qrt::Status all = comm.agree(failed ? qrt::internal_error("some tests failed") : qrt::ok_status());
  if (!all.ok() && comm.world() > 1 && comm.rank() == 0) {
    std::fprintf(stderr, "qrt_comm_tests: %s\n", all.to_string().c_str());
  }
  qrt::test::g_world.reset();
  return all.ok() ? 0 : 1;
}
