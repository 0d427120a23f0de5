// A fake dlfsd client socket for libdlfs-client's unit tests: one thread
// serving SOCK_SEQPACKET per docs/client-protocol.md (open, view, batch), the
// dataset memory and each connection's staging memory as memfd files with
// known bytes. Connections are served one at a time.
//
// Views: epochs/<e>/<w>/<r> holds the ids i with i % w == r, rotated left by
// e (view_ids()). Samples marked resident are in region 0; the others are
// copied into the slot a batch names, as far as it has room.
//
// Faults: refuse open (a code and a message), short replies (max_per_reply),
// garbage replies to batch (Garbage), closing the connection after some
// batches (a crash), a limit of 64 views per connection as the spec says.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace dlfs::test {

struct FakeSample {
  std::string bytes{};
  std::vector<uint32_t> members{};  // grouped datasets: the members' lengths (adding up to bytes.size())
  bool resident = true;           // in region 0; else staged on request
};

enum class Garbage {
  kNone,
  kNotJson,           // the header is not JSON
  kTinyPacket,        // 2 bytes: no header length
  kHeaderTooLong,     // the header length is past the packet
  kOffsetPastRegion,  // a record points past region 0
  kShortPayload,      // "count" says more records than the payload holds
  kWrongStart,        // "start" is not the one asked
  kZeroCount,         // 0 samples while start is below the view's size
  kBadRegion,         // a record in region 7
  kMembersMismatch,   // a grouped sample's member lies past the sample's bytes
};

struct FakeDatasetConfig {
  std::string name = "ds";
  std::string format = "files";
  bool grouped = false;
  std::vector<FakeSample> samples{};
  uint32_t slots = 4;
  uint64_t slot_bytes = 64 * 1024;
  uint32_t max_per_reply = 4096;  // replies shorter than asked, as the daemon may give
  std::string refuse_open_code{};  // set: open is refused with it
  std::string refuse_open_message{};
  Garbage garbage = Garbage::kNone;
  int close_after_batches = -1;   // >= 0: the connection closes after that many batch replies
};

class FakeClientDaemon {
 public:
  FakeClientDaemon(std::string socket_path, FakeDatasetConfig config);
  ~FakeClientDaemon();  // stops: closes the socket and its connection
  FakeClientDaemon(const FakeClientDaemon&) = delete;
  FakeClientDaemon& operator=(const FakeClientDaemon&) = delete;

  static std::vector<uint64_t> view_ids(uint64_t samples, uint32_t epoch, uint32_t world_size, uint32_t rank);

  int opens() const { return opens_; }
  int views() const { return views_; }
  int batches() const { return batches_; }

 private:
  void serve();
  void serve_connection(int fd);

  std::string path_;
  FakeDatasetConfig config_;
  int listen_fd_ = -1;
  int stop_pipe_[2] = {-1, -1};
  int region0_fd_ = -1;
  std::vector<uint64_t> region0_offset_;  // per sample; UINT64_MAX if not resident
  uint64_t region0_bytes_ = 0;
  std::atomic<int> opens_{0}, views_{0}, batches_{0};
  std::thread thread_;
};

}  // namespace dlfs::test
