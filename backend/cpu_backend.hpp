// The CPU reference backend: fp32, single-threaded, exact. "Device" memory is host memory; every op runs before
// it returns. Linear layers decode the packed weights row by row through the shared format decoders (never the
// whole model up front), so it runs any format in the list. It also checks that every view lies inside an
// allocation, which makes it the place to catch a transformer indexing bug.
#pragma once

#include <map>
#include <memory>

#include "backend/backend.hpp"

namespace qrt {

class Communicator;

class CpuBackend final : public Backend {
 public:
  CpuBackend();
  // A rank of a tensor-parallel job: all_reduce_sum goes through `comm` (not owned; it must outlive the backend
  // and hold host memory collectives: "single" or "mpi"). A null `comm` is a single rank.
  explicit CpuBackend(Communicator* comm);
  ~CpuBackend() override;
  CpuBackend(const CpuBackend&) = delete;
  CpuBackend& operator=(const CpuBackend&) = delete;

  std::string name() const override { return "cpu"; }
  MemoryStats memory_stats() const override;
  Result<MemoryAvailable> memory_available() const override;

  Result<DeviceBuffer> allocate(uint64_t bytes) override;
  void deallocate(DeviceBuffer buffer) override;
  Status upload(const void* host, void* device, uint64_t bytes) override;
  Status download(const void* device, void* host, uint64_t bytes) override;
  Status synchronize() override { return ok_status(); }

  Result<WeightHandle> upload_weight(const QuantTensor& tensor) override;
  Result<WeightInfo> weight_info(WeightHandle weight) const override;
  void free_weight(WeightHandle weight) override;

  Status embed(WeightHandle table, ConstI32View tokens, F32View out) override;
  Status rms_norm(ConstF32View x, WeightHandle weight, float eps, F32View out) override;
  Status linear(ConstF32View x, WeightHandle w, WeightHandle bias, F32View y) override;
  Status rope(F32View x, int heads, ConstI32View positions, const RopeParams& params) override;
  Status kv_write(const KvLayerView& cache, ConstI32View slots, ConstI32View positions, ConstF32View k,
                  ConstF32View v) override;
  Status attention(ConstF32View q, ConstI32View q_positions, const KvLayerView& cache, ConstI32View keys,
                   const AttentionParams& params, F32View out) override;
  Status silu_mul(ConstF32View gate, ConstF32View up, F32View out) override;
  Status gelu_tanh_mul(ConstF32View gate, ConstF32View up, F32View out) override;
  Status swiglu_clamped_mul(ConstF32View gate, ConstF32View up, float alpha, float limit, F32View out) override;
  Status add_indexed_rows(F32View y, ConstF32View table, ConstI32View ids) override;
  Status scale(ConstF32View x, float s, F32View out) override;
  Status softcap(ConstF32View x, float cap, F32View out) override;
  Status add(ConstF32View a, ConstF32View b, F32View out) override;
  Status concat_cols(ConstF32View a, ConstF32View b, F32View out) override;
  Status gather_rows(ConstF32View x, ConstI32View rows, F32View out) override;
  Status moe_route(ConstF32View logits, bool renormalize, I32View ids, F32View weights) override;
  Status moe_route_grouped(ConstF32View logits, const MoeRouting& routing, I32View ids, F32View weights) override;
  Status linear_experts(ConstF32View x, WeightHandle w, ConstI32View ids, F32View y) override;
  Status moe_combine(ConstF32View y, ConstF32View weights, F32View out) override;
  Status sample(ConstF32View logits, const SampleStep& step, I32View ids) override;

  Status all_reduce_sum(F32View x) override;
  int tp_rank() const override;
  int tp_world_size() const override;

  // Live allocations and weights, for leak checks in tests.
  size_t live_allocations() const { return allocations_.size(); }
  size_t live_weights() const;

 private:
  struct Weight;
  Result<const Weight*> find_weight(WeightHandle handle, const char* op, const char* role) const;
  // Checks that [p, p + bytes) lies inside one live allocation.
  Status check_range(const void* p, uint64_t bytes, const char* op, const char* what) const;
  template <class T>
  Status check_view(const DeviceView<T>& v, const char* op, const char* what) const;

  std::map<uintptr_t, uint64_t> allocations_;  // start address -> bytes
  uint64_t allocated_bytes_ = 0, allocated_peak_ = 0;
  std::vector<std::unique_ptr<Weight>> weights_;  // handle id - 1 -> weight (null once freed)
  Communicator* comm_ = nullptr;                  // tensor-parallel peers; null on a single rank
};

}  // namespace qrt
