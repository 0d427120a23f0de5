#include "cache/storage_buffer.h"

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <vector>

namespace dlfs::cache {
namespace {

std::unique_ptr<StorageBuffer> create(uint64_t begin, uint64_t end, uint64_t extent, uint64_t budget = ~0ull,
                                      bool huge = true) {
  StorageOptions o;
  o.extent_size = extent;
  o.memory_budget = budget;
  o.huge_pages = huge;
  auto r = StorageBuffer::create(begin, end, o);
  EXPECT_TRUE(r.is_ok()) << r.status().message();
  return r ? std::move(r).value() : nullptr;
}

TEST(StorageBufferGeometry, ShortLastExtent) {
  auto b = create(0, 1000, 64);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 16u);  // ceil(1000 / 64)
  EXPECT_EQ(b->cacheable_extents(), 16u);
  EXPECT_EQ(b->capacity_bytes(), 1000u);
  EXPECT_EQ(b->extent_length(0), 64u);
  EXPECT_EQ(b->extent_length(14), 64u);
  EXPECT_EQ(b->extent_length(15), 1000u - 15 * 64);
  EXPECT_EQ(b->extent_of(0), 0u);
  EXPECT_EQ(b->extent_of(63), 0u);
  EXPECT_EQ(b->extent_of(64), 1u);
  EXPECT_EQ(b->extent_of(999), 15u);
}

TEST(StorageBufferGeometry, ExactMultiple) {
  auto b = create(0, 4096, 1024);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 4u);
  EXPECT_EQ(b->extent_length(3), 1024u);
  EXPECT_EQ(b->capacity_bytes(), 4096u);
}

TEST(StorageBufferGeometry, BudgetSmallerThanRange) {
  auto b = create(0, 1000, 64, 300);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 16u);
  EXPECT_EQ(b->cacheable_extents(), 4u);  // whole extents only: 300 / 64
  EXPECT_EQ(b->capacity_bytes(), 256u);
  EXPECT_FALSE(b->try_mark_loading(4)) << "extent beyond the budget must never load";
  EXPECT_TRUE(b->try_mark_loading(3));
}

TEST(StorageBufferGeometry, BudgetEqualToRangeCachesShortExtent) {
  auto b = create(0, 1000, 64, 1000);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->cacheable_extents(), 16u);
  EXPECT_EQ(b->capacity_bytes(), 1000u);
}

TEST(StorageBufferGeometry, BudgetZero) {
  auto b = create(0, 1000, 64, 0);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 16u);
  EXPECT_EQ(b->cacheable_extents(), 0u);
  EXPECT_EQ(b->capacity_bytes(), 0u);
  EXPECT_FALSE(b->try_mark_loading(0));
  EXPECT_EQ(b->resident_ptr(0), nullptr);
  EXPECT_EQ(b->state(0), ExtentState::absent);
}

TEST(StorageBufferGeometry, EmptyRange) {
  auto b = create(500, 500, 64);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 0u);
  EXPECT_EQ(b->cacheable_extents(), 0u);
  EXPECT_EQ(b->capacity_bytes(), 0u);
  EXPECT_EQ(b->resident_ptr(500), nullptr);
}

TEST(StorageBufferGeometry, StripeNotAtZero) {
  auto b = create(10000, 10300, 128);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->extent_count(), 3u);
  EXPECT_EQ(b->extent_begin(1), 10128u);
  EXPECT_EQ(b->extent_length(2), 300u - 256);
  EXPECT_EQ(b->extent_of(10255), 1u);
  ASSERT_TRUE(b->try_mark_loading(1));
  b->mark_resident(1, 7);
  EXPECT_EQ(b->resident_ptr(10130), b->extent_data(1) + 2);
  EXPECT_EQ(b->resident_ptr(9999), nullptr);
  EXPECT_EQ(b->resident_ptr(10300), nullptr);
  EXPECT_EQ(b->resident_ptr(10000), nullptr);  // extent 0 not resident
}

TEST(StorageBufferGeometry, RejectsBadArguments) {
  StorageOptions o;
  o.extent_size = 0;
  auto r = StorageBuffer::create(0, 100, o);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().err(), EINVAL);
  EXPECT_NE(r.status().message().find("extent size"), std::string::npos) << r.status().message();
  o.extent_size = 64;
  auto r2 = StorageBuffer::create(100, 50, o);
  ASSERT_FALSE(r2.is_ok());
  EXPECT_EQ(r2.status().err(), EINVAL);
}

TEST(StorageBufferMemory, WholeCapacityWritableWithAndWithoutHugePages) {
  for (bool huge : {true, false}) {
    auto b = create(0, (3ull << 20) + 123, 1 << 20, ~0ull, huge);
    ASSERT_TRUE(b);
    EXPECT_EQ(b->extent_count(), 4u);
    if (!huge) {
      EXPECT_FALSE(b->huge_pages_in_use());
    }
    for (uint64_t e = 0; e < b->extent_count(); ++e) std::memset(b->extent_data(e), int(e + 1), b->extent_length(e));
    EXPECT_EQ(static_cast<int>(b->extent_data(3)[122]), 4);
    EXPECT_EQ(static_cast<int>(b->extent_data(0)[0]), 1);
  }
}

TEST(StorageBufferState, TransitionsAndCounters) {
  auto b = create(0, 1000, 64);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->state(2), ExtentState::absent);
  EXPECT_EQ(b->resident_ptr(130), nullptr);

  ASSERT_TRUE(b->try_mark_loading(2));
  EXPECT_EQ(b->state(2), ExtentState::loading);
  EXPECT_FALSE(b->try_mark_loading(2)) << "a second loader must not take a loading extent";
  EXPECT_EQ(b->resident_ptr(130), nullptr) << "loading is not resident";

  b->mark_resident(2, 0xabcdef);
  EXPECT_EQ(b->state(2), ExtentState::resident);
  EXPECT_EQ(b->checksum(2), 0xabcdefu);
  EXPECT_EQ(b->resident_ptr(130), b->extent_data(2) + 2);
  EXPECT_EQ(b->resident_ptr(128), b->extent_data(0) + 128) << "the mapping is linear";
  EXPECT_FALSE(b->try_mark_loading(2));
  EXPECT_EQ(b->resident_bytes(), 64u);
  EXPECT_EQ(b->resident_extents(), 1u);

  // The short last extent counts its real length.
  ASSERT_TRUE(b->try_mark_loading(15));
  b->mark_resident(15, 1);
  EXPECT_EQ(b->resident_bytes(), 64u + 40);
  EXPECT_EQ(b->resident_extents(), 2u);
  EXPECT_NE(b->resident_ptr(999), nullptr);

  ASSERT_TRUE(b->try_mark_loading(3));
  b->mark_failed(3);
  EXPECT_EQ(b->state(3), ExtentState::failed);
  EXPECT_EQ(b->resident_ptr(3 * 64), nullptr);
  EXPECT_FALSE(b->try_mark_loading(3));
  EXPECT_EQ(b->resident_extents(), 2u);
  EXPECT_FALSE(b->try_mark_loading(16)) << "past the last extent";
}

TEST(StorageBufferChecksum, IsXxh3AndSeesOneByte) {
  std::vector<std::byte> v(1000, std::byte{7});
  uint64_t c = extent_checksum(v);
  EXPECT_EQ(c, XXH3_64bits(v.data(), v.size()));
  v[500] = std::byte{8};
  EXPECT_NE(extent_checksum(v), c);
  EXPECT_EQ(extent_checksum({}), XXH3_64bits(nullptr, 0));
}

}  // namespace
}  // namespace dlfs::cache
