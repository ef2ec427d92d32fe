// The communicator of a job with one rank: every collective is the identity, after the same argument checks as
// the multi-rank communicators (so that a caller's bug shows on one rank too).
#include <cstdlib>
#include <string>

#include "backend/comm/communicator.hpp"

namespace qrt {
namespace {

class SingleRankCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world() const override { return 1; }
  int local_rank() const override { return 0; }
  std::string_view kind() const override { return "single"; }

  Status all_reduce_sum(float* data, size_t n, void* compute_stream) override {
    if (data == nullptr && n > 0) {
      return invalid_argument("all_reduce_sum: null data for " + std::to_string(n) + " floats");
    }
    return ok_status();
  }

  Status broadcast(void* host_data, size_t bytes, int root) override {
    if (root != 0) return invalid_argument("broadcast: root rank " + std::to_string(root) + " outside a world of 1");
    if (host_data == nullptr && bytes > 0) {
      return invalid_argument("broadcast: null data for " + std::to_string(bytes) + " bytes");
    }
    return ok_status();
  }

  Status agree(const Status& local) override { return local; }

  [[noreturn]] void abort(int exit_code) override { std::exit(exit_code); }
};

}  // namespace

Result<std::unique_ptr<Communicator>> make_single_rank_communicator() {
  return std::unique_ptr<Communicator>(new SingleRankCommunicator());
}

}  // namespace qrt
