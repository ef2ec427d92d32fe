#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "loader/ollama_store.hpp"

namespace qrt::ollama {
namespace {
namespace fs = std::filesystem;

// The table of spec/ollama.md §1.2.
TEST(OllamaName, ResolvesLikeOllama) {
  struct Case { const char* text; const char* path; };
  const Case cases[] = {
      {"llama3.2:3b", "registry.ollama.ai/library/llama3.2/3b"},
      {"llama3.2", "registry.ollama.ai/library/llama3.2/latest"},
      {"myuser/mymodel:q4", "registry.ollama.ai/myuser/mymodel/q4"},
      {"hf.co/bartowski/Foo-GGUF:Q4_K_M", "hf.co/bartowski/Foo-GGUF/Q4_K_M"},
      {"localhost:5000/ns/m", "localhost:5000/ns/m/latest"},
      {"https://example.com/ns/m:v1", "example.com/ns/m/v1"},
  };
  for (const Case& c : cases) {
    auto n = parse_model_name(c.text);
    ASSERT_TRUE(n.ok()) << c.text << ": " << n.status().to_string();
    EXPECT_EQ(n->manifest_relative_path().string(), c.path) << c.text;
  }
}

TEST(OllamaName, RejectsInvalidNames) {
  for (const char* bad : {"", ":tag", "a/b/c/d", "ns.dot/model", "-model", "model:", "model:t@g", "a//b"}) {
    auto n = parse_model_name(bad);
    EXPECT_FALSE(n.ok()) << bad;
    if (!n.ok()) {
      EXPECT_NE(n.status().message().find("not an Ollama model name"), std::string::npos);
    }
  }
  EXPECT_FALSE(parse_model_name(std::string(81, 'a')).ok());
}

TEST(OllamaBlob, DigestBecomesAFileName) {
  const std::string hex(64, 'a');
  auto p = blob_path("/store", "sha256:" + hex);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->string(), "/store/blobs/sha256-" + hex);
  EXPECT_FALSE(blob_path("/store", "sha256:" + hex.substr(1)).ok());
  EXPECT_FALSE(blob_path("/store", "md5:" + hex).ok());
  EXPECT_FALSE(blob_path("/store", "sha256:" + std::string(63, 'a') + "g").ok());
  EXPECT_FALSE(blob_path("/store", "sha256:../../" + std::string(58, 'a')).ok());
}

class OllamaStore : public testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("qrt-ollama-" + std::to_string(::getpid()) + "-" +
                                         testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "blobs");
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string blob(char fill, const std::string& content) {
    const std::string hex(64, fill);
    std::ofstream(root_ / "blobs" / ("sha256-" + hex)) << content;
    return "sha256:" + hex;
  }
  void manifest(const std::string& rel, const std::string& text) {
    fs::create_directories((root_ / "manifests" / rel).parent_path());
    std::ofstream(root_ / "manifests" / rel) << text;
  }
  fs::path root_;
};

TEST_F(OllamaStore, FindsTheGgufLayerCaseInsensitively) {
  const std::string cfg = blob('c', R"({"model_format":"gguf","file_type":"Q4_K_M","architecture":"llama"})");
  const std::string w1 = blob('1', "GGUF...");
  const std::string w2 = blob('2', "GGUF...");
  const std::string tmpl = blob('3', "{{ .Prompt }}");
  manifest("registry.ollama.ai/library/Llama3.2/3B",
           R"({"schemaVersion":2,"mediaType":"application/vnd.docker.distribution.manifest.v2+json",
               "config":{"mediaType":"application/vnd.docker.container.image.v1+json","digest":")" + cfg + R"(","size":10},
               "layers":[{"mediaType":"application/vnd.ollama.image.model","digest":")" + w1 + R"(","size":7},
                         {"mediaType":"application/vnd.ollama.image.template","digest":")" + tmpl + R"(","size":13},
                         {"mediaType":"application/vnd.ollama.image.model","digest":")" + w2 + R"(","size":7}]})");
  auto m = open_manifest(root_, *parse_model_name("llama3.2:3b"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_TRUE(m->is_gguf());
  EXPECT_EQ(m->file_type, "Q4_K_M");
  ASSERT_NE(m->gguf_model_layer(), nullptr);
  EXPECT_EQ(m->gguf_model_layer()->digest, w2);  // the last model layer wins, as in Ollama
  EXPECT_EQ(m->layers_of_type(kMediaTemplate).size(), 1u);
}

TEST_F(OllamaStore, ExplainsWhatIsMissingOrMalformed) {
  auto missing = open_manifest(root_, *parse_model_name("nothere:1b"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nothere:1b"), std::string::npos);

  manifest("registry.ollama.ai/library/broken/latest", "{not json");
  auto broken = open_manifest(root_, *parse_model_name("broken"));
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("not a JSON object"), std::string::npos);

  const std::string cfg = blob('d', R"({"remote_host":"https://ollama.com","remote_model":"x"})");
  manifest("registry.ollama.ai/library/cloud/latest",
           R"({"schemaVersion":2,"config":{"mediaType":"x","digest":")" + cfg + R"("},"layers":[]})");
  auto cloud = open_manifest(root_, *parse_model_name("cloud"));
  ASSERT_FALSE(cloud.ok());
  EXPECT_NE(cloud.status().message().find("cloud model"), std::string::npos);

  manifest("registry.ollama.ai/library/baddigest/latest",
           R"({"schemaVersion":2,"config":{"mediaType":"x","digest":"sha256:zz"},"layers":[]})");
  auto bad = open_manifest(root_, *parse_model_name("baddigest"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("malformed blob digest"), std::string::npos);
}

TEST_F(OllamaStore, RootComesFromTheEnvironment) {
  ::setenv("OLLAMA_MODELS", root_.c_str(), 1);
  auto r = store_root();
  ::unsetenv("OLLAMA_MODELS");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, root_);
}

}  // namespace
}  // namespace qrt::ollama
