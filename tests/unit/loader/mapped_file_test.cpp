#include <gtest/gtest.h>

#include <cstring>

#include "loader/mapped_file.hpp"
#include "loader/model_source.hpp"
#include "loader_test_util.hpp"

namespace qrt {
namespace {

using test::FailsWith;

TEST(MappedFile, MapsTheBytes) {
  test::TempDir dir;
  const std::vector<uint8_t> bytes = test::random_bytes(1000, 7);
  test::write_file(dir.file("a.bin"), bytes);
  auto f = MappedFile::open(dir.file("a.bin"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->size(), 1000u);
  EXPECT_EQ(f->path(), dir.file("a.bin"));
  EXPECT_EQ(std::memcmp(f->data(), bytes.data(), bytes.size()), 0);
  auto s = f->span(10, 20);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->data, f->data() + 10);
  EXPECT_EQ(s->size, 20u);
  EXPECT_TRUE(f->span(1000, 0).ok());
  EXPECT_TRUE(f->span(0, 1000).ok());
}

TEST(MappedFile, SpansAreBoundsCheckedWithoutOverflow) {
  test::TempDir dir;
  test::write_file(dir.file("a.bin"), test::random_bytes(100, 8));
  auto f = MappedFile::open(dir.file("a.bin"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->span(1, 100).status().code(), ErrorCode::kOutOfRange);
  EXPECT_TRUE(FailsWith(f->span(1, 100).status(), {"a.bin", "100 bytes"}));
  EXPECT_FALSE(f->span(101, 0).ok());
  EXPECT_FALSE(f->span(UINT64_MAX, 2).ok());  // offset + size wraps to 1
  EXPECT_FALSE(f->span(2, UINT64_MAX).ok());
  EXPECT_FALSE(f->span(UINT64_MAX, UINT64_MAX).ok());
}

TEST(MappedFile, EmptyFileIsAnEmptyView) {
  test::TempDir dir;
  test::write_file(dir.file("empty"), {});
  auto f = MappedFile::open(dir.file("empty"));
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_EQ(f->size(), 0u);
  EXPECT_TRUE(f->span(0, 0).ok());
  EXPECT_FALSE(f->span(0, 1).ok());
}

TEST(MappedFile, ErrorsNameThePathAndReason) {
  test::TempDir dir;
  auto missing = MappedFile::open(dir.file("missing.gguf"));
  EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
  EXPECT_TRUE(FailsWith(missing.status(), {"missing.gguf", "No such file"}));
  auto directory = MappedFile::open(dir.path().string());
  EXPECT_TRUE(FailsWith(directory.status(), {dir.path().string(), "directory"}));
  EXPECT_FALSE(MappedFile::open("").ok());
  EXPECT_TRUE(FailsWith(MappedFile::open("/dev/null").status(), {"not a regular file"}));
}

TEST(MappedFile, MovesAndSharedOwnershipKeepTheBytes) {
  test::TempDir dir;
  const std::vector<uint8_t> bytes = test::random_bytes(64, 9);
  test::write_file(dir.file("a.bin"), bytes);
  auto f = MappedFile::open(dir.file("a.bin"));
  ASSERT_TRUE(f.ok());
  MappedFile moved = std::move(*f);
  EXPECT_EQ(f->data(), nullptr);
  EXPECT_EQ(f->size(), 0u);
  MappedFile assigned;
  assigned = std::move(moved);
  ASSERT_EQ(assigned.size(), 64u);
  EXPECT_EQ(assigned.data()[5], bytes[5]);

  ModelSource source;
  ByteSpan span;
  {
    auto shared = MappedFile::open_shared(dir.file("a.bin"));
    ASSERT_TRUE(shared.ok());
    span = (*shared)->bytes();
    source.keep_alive.push_back(*shared);
  }
  ModelSource copy = source;  // sources may be copied; the mapping lives while any copy does
  source = ModelSource{};
  EXPECT_EQ(std::memcmp(span.data, bytes.data(), 64), 0);
}

}  // namespace
}  // namespace qrt
