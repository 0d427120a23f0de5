// RawOverlays (fs/kernel/raw_overlay.h) without mounting: the option string overlayfs
// parses, and a mode that mounts nothing. The mounts themselves are tested
// through a real dlfsd in tests/integration/36_raw_overlay.sh.
#include "fs/kernel/raw_overlay.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace dlfs::fs {
namespace {

TEST(RawOverlay, OptionsNameBothLowerLayersInOrder) {
  EXPECT_EQ(RawOverlays::mount_options("/mnt/dlfs/ds/raw", "/tmp/dlfs-overlay-empty-x"),
            "lowerdir=/mnt/dlfs/ds/raw:/tmp/dlfs-overlay-empty-x");
}

// overlayfs splits lowerdir at ':' and the options at ','; a backslash escapes.
TEST(RawOverlay, SeparatorsAndBackslashesInPathsAreEscaped) {
  EXPECT_EQ(RawOverlays::mount_options("/m,n:o\\p/ds/raw", "/t:e"), "lowerdir=/m\\,n\\:o\\\\p/ds/raw:/t\\:e");
}

TEST(RawOverlay, OffMountsNothingAndSaysWhy) {
  std::atomic<bool> asked{false};
  RawOverlays o(AutoOff::off);
  o.request("/nonexistent/ds/raw", [&] { return asked = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  o.shutdown();
  o.join();
  const auto s = o.stats();
  EXPECT_EQ(s["mode"], "off");
  EXPECT_EQ(s["reason"], "raw_overlay = off");
  EXPECT_TRUE(s["mounted"].empty());
  EXPECT_EQ(s["failures"], 0);
  EXPECT_FALSE(asked) << "an overlay that is off waited for a dataset";
}

TEST(RawOverlay, TheDaemonsReasonForOffIsKept) {
  RawOverlays o(AutoOff::off, "allow_other is off");
  EXPECT_EQ(o.stats()["reason"], "allow_other is off");
}

TEST(RawOverlay, AutoIsOffWhenNotRoot) {
  RawOverlays o(AutoOff::automatic);
  if (::geteuid() == 0) {
    EXPECT_EQ(o.stats()["mode"], "auto");
    EXPECT_TRUE(o.stats()["reason"].is_null());
  } else {
    EXPECT_EQ(o.stats()["mode"], "off");
    EXPECT_EQ(o.stats()["reason"], "dlfsd is not root");
  }
}

// A mount that fails (no such directory) is counted with its reason and
// leaves nothing mounted; only root gets as far as trying.
TEST(RawOverlay, AFailedMountIsCountedWithItsReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root tries to mount";
  RawOverlays o(AutoOff::automatic);
  o.request("/nonexistent-dlfs-test/ds/raw");
  for (int i = 0; i < 200 && o.stats()["failures"] == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const auto s = o.stats();
  EXPECT_EQ(s["failures"], 1);
  EXPECT_TRUE(s["mounted"].empty());
  EXPECT_NE(s["last_error"].get<std::string>().find("cannot mount overlayfs over '/nonexistent-dlfs-test/ds/raw'"),
            std::string::npos)
      << s["last_error"];
  o.shutdown();
  o.join();
}

// A request waits for its dataset (ready()): nothing is tried before.
TEST(RawOverlay, AMountWaitsUntilItsDatasetIsReady) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root tries to mount";
  RawOverlays o(AutoOff::automatic);
  std::atomic<bool> loaded{false};
  o.request("/nonexistent-dlfs-test/ds/raw", [&] { return loaded.load(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(o.stats()["failures"], 0) << "tried before the dataset was ready";
  loaded = true;
  for (int i = 0; i < 200 && o.stats()["failures"] == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(o.stats()["failures"], 1);
  o.shutdown();
  o.join();
}

// A shutdown does not wait for a dataset that never becomes ready.
TEST(RawOverlay, ShutdownDoesNotWaitForADatasetStillLoading) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root queues mounts";
  RawOverlays o(AutoOff::automatic);
  std::atomic<int> asked{0};
  o.request("/nonexistent-dlfs-test/ds/raw", [&] { return ++asked, false; });
  for (int i = 0; i < 200 && asked == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_GT(asked, 0) << "the request was never looked at";
  const auto t0 = std::chrono::steady_clock::now();
  o.shutdown();
  o.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(o.stats()["failures"], 0);
}

// After shutdown nothing more is mounted, nor even looked at.
TEST(RawOverlay, RequestsAfterShutdownAreIgnored) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root queues mounts";
  RawOverlays o(AutoOff::automatic);
  o.shutdown();
  std::atomic<bool> asked{false};
  o.request("/nonexistent-dlfs-test/ds/raw", [&] { return asked = true; });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  o.join();
  EXPECT_FALSE(asked);
  EXPECT_EQ(o.stats()["failures"], 0);
}

// Datasets load side by side: one still loading does not hold another's overlay.
TEST(RawOverlay, AReadyDatasetDoesNotWaitForAnEarlierOne) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root tries to mount";
  RawOverlays o(AutoOff::automatic);
  o.request("/nonexistent-dlfs-test/first/raw", [] { return false; });
  o.request("/nonexistent-dlfs-test/second/raw");
  for (int i = 0; i < 200 && o.stats()["failures"] == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(o.stats()["failures"], 1);
  EXPECT_NE(o.stats()["last_error"].get<std::string>().find("/second/raw"), std::string::npos) << o.stats()["last_error"];
  o.shutdown();
  o.join();
}

}  // namespace
}  // namespace dlfs::fs
