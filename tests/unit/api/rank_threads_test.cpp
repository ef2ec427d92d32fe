// An in-process tensor-parallel model keeps its rank threads: they start with the model and every forward pass
// after that reuses them. Counted at the source: this executable defines pthread_create (every std::thread goes
// through it), counts the call and forwards it to the C library's.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <string>
#include <thread>

#include "qrt/runtime.hpp"
#include "test_support.hpp"

namespace {
std::atomic<int> g_threads_created{0};
}  // namespace

extern "C" int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*), void* arg) {
  using Real = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_create"));
  g_threads_created.fetch_add(1);
  return real(thread, attr, start, arg);
}

namespace qrt {
namespace {

const std::string kDefaultModel = std::string(QRT_SOURCE_DIR) + "/models/default/war-and-peace-q8_0.gguf";

TEST(RankThreads, TheCounterSeesEveryThreadStart) {
  const int before = g_threads_created.load();
  std::thread([] {}).join();
  std::thread([] {}).join();
  EXPECT_EQ(g_threads_created.load() - before, 2);
}

TEST(RankThreads, StartedWithTheModelAndReusedByEveryForwardPass) {
  {
    const int ranks = 2;  // the default model's 6 query and 2 KV heads split among 2 ranks only
    ModelOptions options;
    options.tensor_parallel = ranks;
    const int before_open = g_threads_created.load();
    auto model = Model::open(kDefaultModel, options);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    EXPECT_EQ(g_threads_created.load() - before_open, ranks - 1) << "one thread per rank beyond the caller's";
    auto session = model->new_session();
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    const int before_passes = g_threads_created.load();
    ASSERT_TRUE(session->add_prompt("The prince").ok());
    GenerateOptions gen;
    gen.max_tokens = 100;  // 100 forward passes after the prompt's
    gen.stop_at_end_of_generation = false;
    auto result = session->generate(gen);
    ASSERT_TRUE(result.ok()) << result.status().to_string();
    EXPECT_EQ(result->tokens.size(), 100u);
    EXPECT_EQ(g_threads_created.load() - before_passes, 0) << ranks << " ranks: a forward pass started a thread";
  }
}

}  // namespace
}  // namespace qrt
