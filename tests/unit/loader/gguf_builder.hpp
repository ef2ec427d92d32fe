// A small GGUF writer for the loader's own tests: builds valid files field by field and records where each
// structural field starts, so tests can corrupt exactly one thing. Files read back against gguf-py's writer and
// reader are covered by the oracle tests (tests/oracle/loader); this one exists to make bad files.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace qrt::test {

class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    int32_t ggml_type;
    std::vector<int64_t> ne;
    std::vector<uint8_t> data;
    int64_t offset_override = -1;  // store this offset instead of the computed one
  };

  uint32_t version = 3;
  uint64_t alignment = 32;  // only used for layout; add general.alignment yourself to change it in the file

  // Raw value bytes after the type: for any type, including hand-made arrays.
  void kv_raw(const std::string& key, int32_t type, std::vector<uint8_t> value) {
    kvs_.push_back({key, type, std::move(value)});
  }
  void kv_u32(const std::string& key, uint32_t v) { kv_raw(key, 4, le(v)); }
  void kv_i32(const std::string& key, int32_t v) { kv_raw(key, 5, le(v)); }
  void kv_u16(const std::string& key, uint16_t v) { kv_raw(key, 2, le(v)); }
  void kv_u64(const std::string& key, uint64_t v) { kv_raw(key, 10, le(v)); }
  void kv_f32(const std::string& key, float v) { kv_raw(key, 6, le(v)); }
  void kv_bool(const std::string& key, bool v) { kv_raw(key, 7, {static_cast<uint8_t>(v ? 1 : 0)}); }
  void kv_string(const std::string& key, const std::string& v) { kv_raw(key, 8, str(v)); }
  void kv_string_array(const std::string& key, const std::vector<std::string>& items) {
    std::vector<uint8_t> v = le(int32_t{8});
    append(v, le(static_cast<uint64_t>(items.size())));
    for (const auto& s : items) append(v, str(s));
    kv_raw(key, 9, v);
  }
  void kv_i32_array(const std::string& key, const std::vector<int32_t>& items) {
    std::vector<uint8_t> v = le(int32_t{5});
    append(v, le(static_cast<uint64_t>(items.size())));
    for (int32_t x : items) append(v, le(x));
    kv_raw(key, 9, v);
  }

  void tensor(Tensor t) { tensors_.push_back(std::move(t)); }

  // Offsets of fields in the last build(): "n_tensors", "n_kv", "kv<i>.key", "kv<i>.type", "kv<i>.value",
  // "ti<i>.name", "ti<i>.n_dims", "ti<i>.ne", "ti<i>.type", "ti<i>.offset", "data", "t<i>.data".
  std::map<std::string, uint64_t> at;

  std::vector<uint8_t> build() {
    at.clear();
    std::vector<uint8_t> b = {'G', 'G', 'U', 'F'};
    append(b, le(version));
    at["n_tensors"] = b.size();
    append(b, le(static_cast<int64_t>(tensors_.size())));
    at["n_kv"] = b.size();
    append(b, le(static_cast<int64_t>(kvs_.size())));
    for (size_t i = 0; i < kvs_.size(); ++i) {
      const std::string p = "kv" + std::to_string(i);
      at[p + ".key"] = b.size();
      append(b, str(kvs_[i].key));
      at[p + ".type"] = b.size();
      append(b, le(kvs_[i].type));
      at[p + ".value"] = b.size();
      append(b, kvs_[i].value);
    }
    uint64_t offset = 0;
    std::vector<uint64_t> offsets;
    for (size_t i = 0; i < tensors_.size(); ++i) {
      const Tensor& t = tensors_[i];
      const std::string p = "ti" + std::to_string(i);
      at[p + ".name"] = b.size();
      append(b, str(t.name));
      at[p + ".n_dims"] = b.size();
      append(b, le(static_cast<uint32_t>(t.ne.size())));
      at[p + ".ne"] = b.size();
      for (int64_t d : t.ne) append(b, le(d));
      at[p + ".type"] = b.size();
      append(b, le(t.ggml_type));
      at[p + ".offset"] = b.size();
      offsets.push_back(offset);
      append(b, le(t.offset_override >= 0 ? static_cast<uint64_t>(t.offset_override) : offset));
      offset += (t.data.size() + alignment - 1) / alignment * alignment;
    }
    if (!tensors_.empty()) {
      b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
      at["data"] = b.size();
      const uint64_t data_start = b.size();
      for (size_t i = 0; i < tensors_.size(); ++i) {
        b.resize(data_start + offsets[i], 0);
        at["t" + std::to_string(i) + ".data"] = b.size();
        append(b, tensors_[i].data);
      }
      b.resize((b.size() + alignment - 1) / alignment * alignment, 0);
    }
    return b;
  }

  template <class T>
  static std::vector<uint8_t> le(T v) {
    std::vector<uint8_t> out(sizeof(T));
    std::memcpy(out.data(), &v, sizeof(T));
    return out;
  }
  static std::vector<uint8_t> str(const std::string& s) {
    std::vector<uint8_t> out = le(static_cast<uint64_t>(s.size()));
    out.insert(out.end(), s.begin(), s.end());
    return out;
  }
  static void append(std::vector<uint8_t>& dst, const std::vector<uint8_t>& src) {
    dst.insert(dst.end(), src.begin(), src.end());
  }
  template <class T>
  static void patch(std::vector<uint8_t>& b, uint64_t at, T v) {
    std::memcpy(b.data() + at, &v, sizeof(T));
  }

 private:
  struct Kv {
    std::string key;
    int32_t type;
    std::vector<uint8_t> value;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

// A small valid model: metadata of several types and three tensors (F32 [4, 8], Q8_0 [2, 64], F16 [8]) filled
// with random bytes that are valid for their types.
inline GgufBuilder small_model(uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto random_bytes = [&](size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(gen());
    return v;
  };
  GgufBuilder g;
  g.kv_string("general.architecture", "llama");
  g.kv_u32("llama.block_count", 2);
  g.kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.kv_string_array("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hello"});
  g.kv_i32_array("tokenizer.ggml.token_type", {2, 3, 3, 1});
  g.kv_bool("test.flag", true);
  std::vector<float> embd(32);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& x : embd) x = normal(gen);
  std::vector<uint8_t> embd_bytes(embd.size() * 4);
  std::memcpy(embd_bytes.data(), embd.data(), embd_bytes.size());
  g.tensor({"token_embd.weight", 0, {8, 4}, embd_bytes});
  // Q8_0 blocks: a finite f16 scale (0x2e66 ~ 0.1) then random int8 codes.
  std::vector<uint8_t> q8 = random_bytes(2 * 2 * 34);
  for (size_t b = 0; b < 4; ++b) {
    q8[b * 34] = 0x66;
    q8[b * 34 + 1] = 0x2e;
  }
  g.tensor({"blk.0.attn_q.weight", 8, {64, 2}, q8});
  std::vector<uint8_t> norm(16);
  for (size_t i = 0; i < 8; ++i) {
    norm[2 * i] = static_cast<uint8_t>(gen());
    norm[2 * i + 1] = 0x3c;  // f16 in [1, 2)
  }
  g.tensor({"output_norm.weight", 1, {8}, norm});
  return g;
}

}  // namespace qrt::test
