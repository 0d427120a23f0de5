// RawOverlays (fs/raw_overlay.h) without mounting: the option string overlayfs
// parses, and a mode that mounts nothing. The mounts themselves are tested
// through a real dlfsd in tests/integration/36_raw_overlay.sh.
#include "fs/raw_overlay.h"

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

TEST(RawOverlay, OffMountsNothing) {
  RawOverlays o("off");
  o.request("/nonexistent/ds/raw");
  o.shutdown();
  o.join();
  const auto s = o.stats();
  EXPECT_EQ(s["mode"], "off");
  EXPECT_TRUE(s["mounted"].empty());
  EXPECT_EQ(s["failures"], 0);
}

// A mount that fails (no such directory) is counted with its reason and
// leaves nothing mounted; only root gets as far as trying.
TEST(RawOverlay, AFailedMountIsCountedWithItsReason) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root tries to mount";
  RawOverlays o("auto");
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
  RawOverlays o("auto");
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
  RawOverlays o("auto");
  o.request("/nonexistent-dlfs-test/ds/raw", [] { return false; });
  const auto t0 = std::chrono::steady_clock::now();
  o.shutdown();
  o.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  EXPECT_EQ(o.stats()["failures"], 0);
}

// After shutdown nothing more is mounted.
TEST(RawOverlay, RequestsAfterShutdownAreIgnored) {
  RawOverlays o("auto");
  o.shutdown();
  o.request("/nonexistent-dlfs-test/ds/raw");
  o.join();
  EXPECT_EQ(o.stats()["failures"], 0);
}

}  // namespace
}  // namespace dlfs::fs
