// FUSE over io_uring's wire work (fs/kernel/wire/fuse_uring.h): a request the kernel
// put in an entry becomes the bytes read(2) would have returned, and a reply
// as libfuse writes it goes into the entry as the kernel reads it back. The
// queues themselves run against the kernel in
// tests/integration/35_fuse_uring.sh.
#include "fs/kernel/wire/fuse_uring.h"

#include <sys/sysinfo.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace dlfs::fs {
namespace {

constexpr size_t kPayloadSzOffset = kUringEntOffset + 16;  // fuse_uring_ent_in_out.payload_sz

template <typename T>
void put(std::vector<char>& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
template <typename T>
T get(const void* b, size_t off) {
  T v;
  std::memcpy(&v, static_cast<const char*>(b) + off, sizeof v);
  return v;
}

// An entry header as the kernel fills it: in header (len, opcode, unique,
// nodeid), the op struct, and the payload size.
std::vector<char> entry_header(uint32_t len, uint32_t opcode, uint64_t unique, const std::string& op_in,
                               uint32_t payload_sz) {
  std::vector<char> h(kUringHeaderSize, 0);
  put<uint32_t>(h, 0, len);
  put<uint32_t>(h, 4, opcode);
  put<uint64_t>(h, 8, unique);
  put<uint64_t>(h, 16, 42);  // nodeid
  std::memcpy(h.data() + kUringInOutSize, op_in.data(), op_in.size());
  put<uint32_t>(h, kPayloadSzOffset, payload_sz);
  return h;
}

TEST(FuseUringWire, LookupHasNoOpStructAndItsNameInThePayload) {
  const std::string name("cat.jpg", 8);  // with its NUL
  auto h = entry_header(40 + 8, 1, 77, "", 8);
  std::vector<char> out;
  ASSERT_TRUE(rebuild_request(h.data(), name.data(), 4096, out).is_ok());
  ASSERT_EQ(out.size(), 48u);
  EXPECT_EQ(0, std::memcmp(out.data(), h.data(), 40));
  EXPECT_EQ(0, std::memcmp(out.data() + 40, name.data(), 8));
  EXPECT_EQ(request_unique(h.data()), 77u);
}

TEST(FuseUringWire, ReadHasItsOpStructAndNoPayload) {
  std::string read_in(40, '\0');
  for (size_t i = 0; i < read_in.size(); ++i) read_in[i] = static_cast<char>(i + 1);
  auto h = entry_header(80, 15, 5, read_in, 0);
  std::vector<char> out(3, 'x');  // reused buffers are resized
  ASSERT_TRUE(rebuild_request(h.data(), nullptr, 4096, out).is_ok());
  ASSERT_EQ(out.size(), 80u);
  EXPECT_EQ(0, std::memcmp(out.data() + 40, read_in.data(), 40));
}

TEST(FuseUringWire, OpStructAndPayloadTogether) {
  const std::string op(16, 'o'), payload("payload-bytes");
  auto h = entry_header(static_cast<uint32_t>(40 + op.size() + payload.size()), 21, 9, op,
                        static_cast<uint32_t>(payload.size()));
  std::vector<char> out;
  ASSERT_TRUE(rebuild_request(h.data(), payload.data(), 4096, out).is_ok());
  EXPECT_EQ(std::string(out.data() + 40, op.size()), op);
  EXPECT_EQ(std::string(out.data() + 40 + op.size(), payload.size()), payload);
}

TEST(FuseUringWire, InconsistentLengthsAreRefusedNamingThem) {
  std::vector<char> out;
  std::string big(64, 'p');
  // A payload larger than the buffer it is said to be in.
  auto h1 = entry_header(40 + 64, 1, 1, "", 64);
  Status s1 = rebuild_request(h1.data(), big.data(), 32, out);
  EXPECT_EQ(s1.err(), EPROTO);
  EXPECT_NE(s1.message().find("payload of 64 bytes in a buffer of 32"), std::string::npos) << s1.message();
  // A length shorter than header and payload.
  auto h2 = entry_header(40, 1, 1, "", 8);
  Status s2 = rebuild_request(h2.data(), big.data(), 4096, out);
  EXPECT_EQ(s2.err(), EPROTO);
  EXPECT_NE(s2.message().find("length 40"), std::string::npos) << s2.message();
  // An op struct larger than its 128-byte slot.
  auto h3 = entry_header(40 + 129, 1, 1, "", 0);
  EXPECT_EQ(rebuild_request(h3.data(), nullptr, 4096, out).err(), EPROTO);
}

std::vector<char> out_header(uint32_t len, int32_t error, uint64_t unique) {
  std::vector<char> oh(16);
  put<uint32_t>(oh, 0, len);
  put<int32_t>(oh, 4, error);
  put<uint64_t>(oh, 8, unique);
  return oh;
}

TEST(FuseUringWire, AReplyGoesHeaderToHeaderArgsToPayload) {
  auto oh = out_header(16 + 11, 0, 31);
  std::string a("hello "), b("world");
  iovec iov[3] = {{oh.data(), oh.size()}, {a.data(), a.size()}, {b.data(), b.size()}};
  std::vector<char> header(kUringHeaderSize, 'h'), payload(64, '.');
  EXPECT_EQ(fill_reply(iov, 3, header.data(), payload.data(), payload.size()), 27u);
  EXPECT_EQ(0, std::memcmp(header.data(), oh.data(), 16));
  EXPECT_EQ(std::string(payload.data(), 11), "hello world");
  EXPECT_EQ(get<uint32_t>(header.data(), kPayloadSzOffset), 11u);
  EXPECT_EQ(reply_unique(iov, 3), 31u);
}

TEST(FuseUringWire, AnErrorReplyHasNoPayload) {
  auto oh = out_header(16, -ENOENT, 8);
  iovec iov[1] = {{oh.data(), oh.size()}};
  std::vector<char> header(kUringHeaderSize, 'h'), payload(64, '.');
  EXPECT_EQ(fill_reply(iov, 1, header.data(), payload.data(), payload.size()), 16u);
  EXPECT_EQ(get<int32_t>(header.data(), 4), -ENOENT);
  EXPECT_EQ(get<uint32_t>(header.data(), kPayloadSzOffset), 0u);
}

TEST(FuseUringWire, AReplyLargerThanThePayloadBecomesEio) {
  auto oh = out_header(16 + 100, 0, 12);
  std::string big(100, 'b');
  iovec iov[2] = {{oh.data(), oh.size()}, {big.data(), big.size()}};
  std::vector<char> header(kUringHeaderSize, 'h'), payload(64, '.');
  fill_reply(iov, 2, header.data(), payload.data(), payload.size());
  EXPECT_EQ(get<int32_t>(header.data(), 4), -EIO);
  EXPECT_EQ(get<uint64_t>(header.data(), 8), 12u);  // still this request's answer
  EXPECT_EQ(get<uint32_t>(header.data(), kPayloadSzOffset), 0u);
  EXPECT_EQ(payload[0], '.');  // nothing written past what fits
}

TEST(FuseUringWire, NotificationsAreNotRingReplies) {
  auto oh = out_header(16, 3, 0);  // unique 0: a notification
  iovec iov[1] = {{oh.data(), oh.size()}};
  EXPECT_EQ(reply_unique(iov, 1), 0u);
  EXPECT_EQ(reply_unique(iov, 0), 0u);
}

TEST(FuseUringWire, RepliesToRequestsNoEntryHoldsGoToDevFuse) {
  FuseUring::Options o;
  o.threads_per_queue = 2;
  FuseUring u(nullptr, -1, o);  // not started: no entry holds a request
  auto oh = out_header(16, 0, 1234);
  iovec iov[1] = {{oh.data(), oh.size()}};
  EXPECT_EQ(u.deliver(iov, 1), 0u);  // 0: not an entry's, it goes to /dev/fuse
  EXPECT_EQ(u.stats()["threads"], 2 * uring_queue_count());
  EXPECT_EQ(u.stats()["entries"], 0);  // each thread registers its own when started
  EXPECT_EQ(u.stats()["requests"], 0);
}

TEST(FuseUringWire, OneQueuePerPossibleCpu) {
  EXPECT_EQ(count_cpu_list("0-1\n"), 2u);
  EXPECT_EQ(count_cpu_list("0"), 1u);
  EXPECT_EQ(count_cpu_list("0-3,8,10-11"), 7u);
  EXPECT_EQ(count_cpu_list("zero"), 0u);
  std::ifstream in("/sys/devices/system/cpu/possible");
  std::string list;
  ASSERT_TRUE(std::getline(in, list));
  EXPECT_EQ(uring_queue_count(), count_cpu_list(list));
  EXPECT_GE(uring_queue_count(), static_cast<unsigned>(get_nprocs()));  // every online CPU is possible
}

}  // namespace
}  // namespace dlfs::fs
