// libdlfs-client (client/dlfs_client.h) against a fake dlfsd client socket
// (fake_client_daemon.h): the bytes and ids of samples in the dataset memory
// and in staging, short replies, grouped samples, the daemon's errors,
// reconnects, and replies that are not the protocol's.
#include <sys/xattr.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "client/dlfs_client.h"
#include "fake_client_daemon.h"
#include "temp_dir.h"

namespace dlfs::test {
namespace {

using namespace std::chrono_literals;

std::string sample_bytes(uint64_t id, size_t length) {
  std::string s(length, '\0');
  for (size_t j = 0; j < length; ++j) s[j] = static_cast<char>((id * 131 + j * 7 + 3) & 0xff);
  return s;
}

// `n` samples of 100-499 bytes; resident(id) says which are in region 0.
std::vector<FakeSample> make_samples(uint64_t n, bool (*resident)(uint64_t) = [](uint64_t) { return true; }) {
  std::vector<FakeSample> out;
  for (uint64_t id = 0; id < n; ++id) out.push_back({sample_bytes(id, 100 + (id * 37) % 400), {}, resident(id)});
  return out;
}

std::string bytes_of(const dlfs_sample& s) { return std::string(static_cast<const char*>(s.data), s.length); }

struct ClientDeleter {
  void operator()(dlfs_client* c) const { dlfs_client_close(c); }
};
using Client = std::unique_ptr<dlfs_client, ClientDeleter>;

class ClientLib : public TempDirTest {
 protected:
  std::string socket() const { return tmp_.file("c.sock"); }

  void serve(FakeDatasetConfig config) {
    config_ = config;
    daemon_ = std::make_unique<FakeClientDaemon>(socket(), std::move(config));
  }

  Client connect() {
    char err[512];
    Client c(dlfs_client_connect(socket().c_str(), "ds", err, sizeof err));
    EXPECT_NE(c, nullptr) << err;
    return c;
  }

  // Checks out[0..got) against the fake's view from position `start`.
  void expect_view_samples(const dlfs_sample* out, uint32_t got, uint64_t start, uint32_t epoch, uint32_t world,
                           uint32_t rank) {
    auto ids = FakeClientDaemon::view_ids(config_.samples.size(), epoch, world, rank);
    for (uint32_t i = 0; i < got; ++i) {
      ASSERT_LT(start + i, ids.size());
      const uint64_t id = ids[start + i];
      EXPECT_EQ(out[i].sample_id, id) << "position " << start + i;
      EXPECT_EQ(bytes_of(out[i]), config_.samples[id].bytes) << "sample " << id;
    }
  }

  FakeDatasetConfig config_;
  std::unique_ptr<FakeClientDaemon> daemon_;
};

TEST_F(ClientLib, SamplesInTheDatasetMemoryHaveTheirBytesAndIds) {
  serve({.samples = make_samples(200)});
  Client c = connect();
  ASSERT_TRUE(c);
  EXPECT_EQ(dlfs_client_samples(c.get()), 200u);
  EXPECT_EQ(dlfs_client_slots(c.get()), 4u);
  EXPECT_EQ(dlfs_client_slot_bytes(c.get()), 64u * 1024);
  EXPECT_EQ(dlfs_client_grouped(c.get()), 0);
  EXPECT_STREQ(dlfs_client_format(c.get()), "files");
  EXPECT_STREQ(dlfs_client_dataset(c.get()), "ds");

  uint64_t n = 0;
  ASSERT_EQ(dlfs_client_view(c.get(), 2, 3, 1, &n), 0) << dlfs_client_error(c.get());
  EXPECT_EQ(n, 67u);
  std::vector<dlfs_sample> out(100);
  uint32_t got = 0;
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 100, out.data(), &got), 0) << dlfs_client_error(c.get());
  EXPECT_EQ(got, 67u);  // the view's end
  expect_view_samples(out.data(), got, 0, 2, 3, 1);
  for (uint32_t i = 0; i < got; ++i) {
    EXPECT_EQ(out[i].members, 1u);
    EXPECT_EQ(out[i].member[0].offset, 0u);
    EXPECT_EQ(out[i].member[0].length, out[i].length);
  }
  ASSERT_EQ(dlfs_client_batch(c.get(), 67, 10, out.data(), &got), 0);
  EXPECT_EQ(got, 0u);
}

TEST_F(ClientLib, StagedSamplesStayValidForSlotsMinusOneFurtherCalls) {
  serve({.samples = make_samples(400, [](uint64_t id) { return id % 3 != 0; })});
  Client c = connect();
  ASSERT_TRUE(c);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  const uint32_t slots = dlfs_client_slots(c.get());
  std::vector<std::vector<dlfs_sample>> calls(slots + 1, std::vector<dlfs_sample>(20));
  for (uint32_t k = 0; k <= slots; ++k) {
    uint32_t got = 0;
    ASSERT_EQ(dlfs_client_batch(c.get(), k * 20, 20, calls[k].data(), &got), 0) << dlfs_client_error(c.get());
    ASSERT_EQ(got, 20u);
    if (k + 1 == slots) {
      // Call 0's samples, staged or not, are still intact after slots - 1 more calls.
      expect_view_samples(calls[0].data(), 20, 0, 0, 1, 0);
    }
  }
  // Call `slots` took call 0's slot again: its staged samples are where call 0's were.
  const dlfs_sample* first0 = nullptr;
  const dlfs_sample* firstn = nullptr;
  for (auto& s : calls[0]) if (!first0 && s.sample_id % 3 == 0) first0 = &s;
  for (auto& s : calls[slots]) if (!firstn && s.sample_id % 3 == 0) firstn = &s;
  ASSERT_TRUE(first0 && firstn);
  EXPECT_EQ(first0->data, firstn->data);
  expect_view_samples(calls[slots].data(), 20, slots * 20, 0, 1, 0);
}

TEST_F(ClientLib, ShortRepliesAreAskedAgainWithinTheCall) {
  serve({.samples = make_samples(100), .max_per_reply = 7});
  Client c = connect();
  ASSERT_TRUE(c);
  ASSERT_EQ(dlfs_client_view(c.get(), 1, 1, 0, nullptr), 0);
  std::vector<dlfs_sample> out(50);
  uint32_t got = 0;
  ASSERT_EQ(dlfs_client_batch(c.get(), 3, 50, out.data(), &got), 0) << dlfs_client_error(c.get());
  EXPECT_EQ(got, 50u);
  EXPECT_EQ(daemon_->batches(), 8);  // ceil(50 / 7)
  expect_view_samples(out.data(), got, 3, 1, 1, 0);
}

TEST_F(ClientLib, MoreThan4096AreAskedInSeveralRequests) {
  FakeDatasetConfig config;
  for (uint64_t id = 0; id < 10000; ++id) config.samples.push_back({sample_bytes(id, 1 + id % 5), {}, true});
  serve(config);
  Client c = connect();
  ASSERT_TRUE(c);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  std::vector<dlfs_sample> out(10000);
  uint32_t got = 0;
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 10000, out.data(), &got), 0) << dlfs_client_error(c.get());
  EXPECT_EQ(got, 10000u);
  EXPECT_EQ(daemon_->batches(), 3);
  expect_view_samples(out.data(), got, 0, 0, 1, 0);
}

TEST_F(ClientLib, AFullSlotEndsTheCallAndTheNextOneGoesOn) {
  // Nothing resident, a slot of 2000 bytes: a few samples per call.
  serve({.samples = make_samples(120, [](uint64_t) { return false; }), .slot_bytes = 2000});
  Client c = connect();
  ASSERT_TRUE(c);
  uint64_t n = 0;
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 2, 1, &n), 0);
  std::vector<dlfs_sample> out(64);
  uint64_t pos = 0;
  int calls = 0;
  while (pos < n) {
    uint32_t got = 0;
    ASSERT_EQ(dlfs_client_batch(c.get(), pos, 64, out.data(), &got), 0) << dlfs_client_error(c.get());
    ASSERT_GE(got, 1u);
    ASSERT_LT(got, 64u);
    uint64_t staged = 0;
    for (uint32_t i = 0; i < got; ++i) staged += out[i].length;
    EXPECT_LE(staged, 2000u);
    expect_view_samples(out.data(), got, pos, 0, 2, 1);
    pos += got;
    ++calls;
  }
  EXPECT_EQ(pos, 60u);
  EXPECT_EQ(daemon_->batches(), calls);  // one request per call: the slot is not asked twice
}

TEST_F(ClientLib, GroupedSamplesHaveTheirMembersLengths) {
  FakeDatasetConfig config{.grouped = true};
  for (uint64_t id = 0; id < 60; ++id) {
    FakeSample s;
    for (uint32_t m = 0; m < 1 + id % 3; ++m) {
      s.members.push_back(10 + uint32_t(id + m * 13) % 50);
      s.bytes += sample_bytes(id * 10 + m, s.members.back());
    }
    s.resident = id % 2 == 0;
    config.samples.push_back(s);
  }
  serve(config);
  Client c = connect();
  ASSERT_TRUE(c);
  EXPECT_EQ(dlfs_client_grouped(c.get()), 1);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  std::vector<dlfs_sample> out(60);
  uint32_t got = 0;
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 60, out.data(), &got), 0) << dlfs_client_error(c.get());
  ASSERT_EQ(got, 60u);
  expect_view_samples(out.data(), got, 0, 0, 1, 0);
  for (uint32_t i = 0; i < got; ++i) {
    const auto& want = config.samples[out[i].sample_id].members;
    ASSERT_EQ(out[i].members, want.size());
    uint32_t at = 0;
    for (uint32_t m = 0; m < out[i].members; ++m) {
      EXPECT_EQ(out[i].member[m].offset, at);
      EXPECT_EQ(out[i].member[m].length, want[m]);
      at += want[m];
    }
  }
}

TEST_F(ClientLib, TheDaemonsRefusalIsTheError) {
  serve({.samples = make_samples(10), .refuse_open_code = "EACCES",
         .refuse_open_message = "uid 1000 may not read the views of dataset 'ds' (group ml)"});
  char err[512];
  EXPECT_EQ(dlfs_client_connect(socket().c_str(), "ds", err, sizeof err), nullptr);
  EXPECT_STREQ(err, "uid 1000 may not read the views of dataset 'ds' (group ml)");
}

TEST_F(ClientLib, AnErrorReplyLeavesTheConnectionUsable) {
  serve({.samples = make_samples(10)});
  Client c = connect();
  ASSERT_TRUE(c);
  std::vector<dlfs_sample> out(4);
  uint32_t got = 7;
  EXPECT_EQ(dlfs_client_batch(c.get(), 0, 4, out.data(), &got), -EINVAL);
  EXPECT_EQ(got, 0u);
  EXPECT_NE(std::string(dlfs_client_error(c.get())).find("no view selected"), std::string::npos);
  EXPECT_EQ(dlfs_client_view(c.get(), 0, 2, 5, nullptr), -EINVAL);
  EXPECT_STREQ(dlfs_client_error(c.get()), "rank 5 is not below world size 2");
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 2, 1, nullptr), 0);
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 4, out.data(), &got), 0);
  EXPECT_EQ(got, 4u);
  EXPECT_STREQ(dlfs_client_error(c.get()), "");
  EXPECT_EQ(daemon_->opens(), 1);
}

TEST_F(ClientLib, NoSocketSaysSo) {
  char err[512];
  EXPECT_EQ(dlfs_client_connect(socket().c_str(), "ds", err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("no dlfsd client socket at " + socket()), std::string::npos) << err;
  // A short buffer gets a truncated, terminated message.
  char small[8];
  EXPECT_EQ(dlfs_client_connect(socket().c_str(), "ds", small, sizeof small), nullptr);
  EXPECT_EQ(std::string(small), "no dlfs");
}

TEST_F(ClientLib, ReconnectsWhenTheDaemonRestarts) {
  serve({.samples = make_samples(300, [](uint64_t id) { return id % 4 != 0; })});
  Client c = connect();
  ASSERT_TRUE(c);
  ASSERT_EQ(dlfs_client_view(c.get(), 5, 2, 0, nullptr), 0);
  std::vector<dlfs_sample> before(30), after(30);
  uint32_t got = 0;
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 30, before.data(), &got), 0);
  ASSERT_EQ(got, 30u);

  daemon_.reset();  // the daemon exits: the client's socket reads EOF
  auto restarted = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(300ms);
    serve(config_);
  });
  ASSERT_EQ(dlfs_client_batch(c.get(), 30, 30, after.data(), &got), 0) << dlfs_client_error(c.get());
  restarted.get();
  ASSERT_EQ(got, 30u);
  expect_view_samples(after.data(), got, 30, 5, 2, 0);
  // The first daemon's memory stays mapped: what it returned is intact.
  expect_view_samples(before.data(), 30, 0, 5, 2, 0);
  EXPECT_EQ(daemon_->opens(), 1);
  EXPECT_EQ(daemon_->views(), 1);
}

TEST_F(ClientLib, ReconnectsWhenTheConnectionDropsMidView) {
  serve({.samples = make_samples(500, [](uint64_t id) { return id % 2 == 0; }), .close_after_batches = 3});
  Client c = connect();
  ASSERT_TRUE(c);
  uint64_t n = 0;
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, &n), 0);
  std::vector<dlfs_sample> out(16);
  for (uint64_t pos = 0; pos < n;) {
    uint32_t got = 0;
    ASSERT_EQ(dlfs_client_batch(c.get(), pos, 16, out.data(), &got), 0) << dlfs_client_error(c.get());
    ASSERT_GT(got, 0u);
    expect_view_samples(out.data(), got, pos, 0, 1, 0);
    pos += got;
  }
  EXPECT_GE(daemon_->opens(), 10);
}

TEST_F(ClientLib, GivesUpAfterTheReconnectTimeoutAndTriesAgainLater) {
  serve({.samples = make_samples(50)});
  Client c = connect();
  ASSERT_TRUE(c);
  dlfs_client_set_reconnect_timeout(c.get(), 0.3);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  daemon_.reset();
  std::vector<dlfs_sample> out(5);
  uint32_t got = 0;
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(dlfs_client_batch(c.get(), 0, 5, out.data(), &got), -ECONNRESET);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 3s);
  std::string err = dlfs_client_error(c.get());
  EXPECT_NE(err.find("dlfsd went away"), std::string::npos) << err;
  EXPECT_NE(err.find("did not come back within 0.3 s"), std::string::npos) << err;

  serve(config_);
  ASSERT_EQ(dlfs_client_batch(c.get(), 0, 5, out.data(), &got), 0) << dlfs_client_error(c.get());
  EXPECT_EQ(got, 5u);
  expect_view_samples(out.data(), got, 0, 0, 1, 0);
}

TEST_F(ClientLib, ADatasetThatChangedAcrossARestartIsRefused) {
  serve({.samples = make_samples(50)});
  Client c = connect();
  ASSERT_TRUE(c);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  daemon_.reset();
  serve({.samples = make_samples(49)});
  std::vector<dlfs_sample> out(5);
  uint32_t got = 0;
  EXPECT_EQ(dlfs_client_batch(c.get(), 0, 5, out.data(), &got), -ESTALE);
  EXPECT_STREQ(dlfs_client_error(c.get()), "dataset 'ds' changed while dlfsd was away: 50 samples before, 49 now");
}

TEST_F(ClientLib, MoreThan64ViewsTakeAFreshConnection) {
  serve({.samples = make_samples(100)});
  Client c = connect();
  ASSERT_TRUE(c);
  std::vector<dlfs_sample> out(3);
  for (uint32_t epoch = 0; epoch < 70; ++epoch) {
    ASSERT_EQ(dlfs_client_view(c.get(), epoch, 1, 0, nullptr), 0) << "epoch " << epoch << ": " << dlfs_client_error(c.get());
    uint32_t got = 0;
    ASSERT_EQ(dlfs_client_batch(c.get(), 0, 3, out.data(), &got), 0) << dlfs_client_error(c.get());
    expect_view_samples(out.data(), got, 0, epoch, 1, 0);
  }
  EXPECT_EQ(daemon_->opens(), 2);
  EXPECT_EQ(daemon_->views(), 70);
  // A view selected again is not asked again.
  ASSERT_EQ(dlfs_client_view(c.get(), 69, 1, 0, nullptr), 0);
  EXPECT_EQ(daemon_->views(), 70);
}

class ClientLibGarbage : public ClientLib, public ::testing::WithParamInterface<Garbage> {};

TEST_P(ClientLibGarbage, IsAClearErrorNotACrash) {
  FakeDatasetConfig config{.grouped = GetParam() == Garbage::kMembersMismatch, .garbage = GetParam()};
  for (uint64_t id = 0; id < 20; ++id) config.samples.push_back({sample_bytes(id, 40), {20, 20}, true});
  serve(config);
  Client c = connect();
  ASSERT_TRUE(c);
  dlfs_client_set_reconnect_timeout(c.get(), 0);
  ASSERT_EQ(dlfs_client_view(c.get(), 0, 1, 0, nullptr), 0);
  std::vector<dlfs_sample> out(10);
  uint32_t got = 9;
  EXPECT_EQ(dlfs_client_batch(c.get(), 0, 10, out.data(), &got), -EPROTO);
  EXPECT_EQ(got, 0u);
  std::string err = dlfs_client_error(c.get());
  EXPECT_NE(err.find("dlfsd's batch reply"), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(Replies, ClientLibGarbage,
                         ::testing::Values(Garbage::kNotJson, Garbage::kTinyPacket, Garbage::kHeaderTooLong,
                                           Garbage::kOffsetPastRegion, Garbage::kShortPayload, Garbage::kWrongStart,
                                           Garbage::kZeroCount, Garbage::kBadRegion, Garbage::kMembersMismatch));

// dlfs_client_open: the socket and the dataset's name from the view file's
// extended attributes (user.* attributes need a file system that keeps them).
class ClientLibOpen : public ClientLib {
 protected:
  // <tmp>/mnt/ds/epochs/0/1/0.index with the attributes; false if the file
  // system keeps no user attributes.
  bool make_dataset_dir(const std::string& socket_attr) {
    index_ = tmp_.write_file("mnt/ds/epochs/0/1/0.index", "");
    if (::setxattr(index_.c_str(), "user.dlfs.dataset", "ds", 2, 0) != 0) return false;
    if (!socket_attr.empty()) {
      EXPECT_EQ(::setxattr(index_.c_str(), "user.dlfs.client_socket", socket_attr.data(), socket_attr.size(), 0), 0);
    }
    return true;
  }
  std::string index_;
};

TEST_F(ClientLibOpen, FindsTheSocketByTheViewFilesAttributes) {
  if (!make_dataset_dir(socket())) GTEST_SKIP() << tmp_.path() << " keeps no user.* extended attributes";
  serve({.samples = make_samples(10)});
  char err[512];
  Client c(dlfs_client_open(tmp_.file("mnt/ds/").c_str(), err, sizeof err));
  ASSERT_TRUE(c) << err;
  EXPECT_EQ(dlfs_client_samples(c.get()), 10u);
}

TEST_F(ClientLibOpen, TheEnvironmentOverridesTheSocket) {
  if (!make_dataset_dir("/nonexistent/dlfs.sock")) GTEST_SKIP() << tmp_.path() << " keeps no user.* extended attributes";
  serve({.samples = make_samples(10)});
  char err[512];
  EXPECT_EQ(dlfs_client_open(tmp_.file("mnt/ds").c_str(), err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("/nonexistent/dlfs.sock"), std::string::npos) << err;
  ::setenv("DLFS_CLIENT_SOCKET", socket().c_str(), 1);
  Client c(dlfs_client_open(tmp_.file("mnt/ds").c_str(), err, sizeof err));
  ::unsetenv("DLFS_CLIENT_SOCKET");
  ASSERT_TRUE(c) << err;
}

TEST_F(ClientLibOpen, NoClientSocketAttributeMeansReadTheMount) {
  if (!make_dataset_dir("")) GTEST_SKIP() << tmp_.path() << " keeps no user.* extended attributes";
  char err[512];
  EXPECT_EQ(dlfs_client_open(tmp_.file("mnt/ds").c_str(), err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find("dlfsd serves no client socket"), std::string::npos) << err;
  EXPECT_NE(std::string(err).find(index_), std::string::npos) << err;
}

TEST_F(ClientLibOpen, ADirectoryThatIsNoDatasetIsNamed) {
  char err[512];
  EXPECT_EQ(dlfs_client_open(tmp_.file("nothing").c_str(), err, sizeof err), nullptr);
  EXPECT_NE(std::string(err).find(tmp_.file("nothing/epochs/0/1/0.index")), std::string::npos) << err;
}

}  // namespace
}  // namespace dlfs::test
