#include "provenance/tar_shard_scan.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string_view>

namespace dlfs::provenance {
namespace {

constexpr uint64_t kBlock = 512;
// pax and long-name records are names and numbers: anything larger is not a
// header a writer made, and is not worth holding in memory.
constexpr uint64_t kMaxMetaBytes = 1 << 20;

uint64_t padded(uint64_t n) { return (n + kBlock - 1) / kBlock * kBlock; }

using Block = std::array<unsigned char, kBlock>;

std::string field(const Block& b, size_t at, size_t len) {
  const auto* p = reinterpret_cast<const char*>(b.data() + at);
  return std::string(p, strnlen(p, len));
}

// An octal field (leading spaces allowed, ended by space or NUL) or a GNU
// base-256 one (high bit of the first byte set); nullopt if it is neither.
std::optional<uint64_t> number_field(const Block& b, size_t at, size_t len) {
  if (b[at] & 0x80) {
    if (b[at] != 0x80) return std::nullopt;  // negative, or more than 64 bits
    uint64_t v = 0;
    for (size_t i = at + 1; i < at + len; ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | b[i];
    }
    return v;
  }
  size_t i = at, end = at + len;
  while (i < end && b[i] == ' ') ++i;
  uint64_t v = 0;
  bool digits = false;
  for (; i < end && b[i] != ' ' && b[i] != '\0'; ++i) {
    if (b[i] < '0' || b[i] > '7' || (v >> 61)) return std::nullopt;
    v = v * 8 + (b[i] - '0');
    digits = true;
  }
  for (; i < end; ++i)
    if (b[i] != ' ' && b[i] != '\0') return std::nullopt;
  if (!digits) return std::nullopt;
  return v;
}

// The checksum is the byte sum with its own field read as spaces; old
// writers summed signed chars, which tar readers also accept.
bool checksum_matches(const Block& b) {
  const std::optional<uint64_t> want = number_field(b, 148, 8);
  if (!want) return false;
  int64_t unsigned_sum = 0, signed_sum = 0;
  for (size_t i = 0; i < kBlock; ++i) {
    const unsigned char c = (i >= 148 && i < 156) ? ' ' : b[i];
    unsigned_sum += c;
    signed_sum += static_cast<signed char>(c);
  }
  return static_cast<int64_t>(*want) == unsigned_sum || static_cast<int64_t>(*want) == signed_sum;
}

bool all_zero(const Block& b) {
  return std::all_of(b.begin(), b.end(), [](unsigned char c) { return c == 0; });
}

Status read_exact(int fd, void* out, uint64_t n, uint64_t offset) {
  auto* p = static_cast<char*>(out);
  for (uint64_t got = 0; got < n;) {
    const ssize_t r = ::pread(fd, p + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Status::from_errno(errno, "read");
    if (r == 0) return Status(EIO, "unexpected end of file");
    got += static_cast<uint64_t>(r);
  }
  return Status::ok();
}

// "./a/b" -> "a/b"; an empty, absolute or ".."-climbing name is refused: a
// view must not offer a member that extracts outside its directory.
std::optional<std::string> clean_name(std::string name) {
  while (name.starts_with("./")) name.erase(0, 2);
  if (name.empty() || name.front() == '/') return std::nullopt;
  for (size_t at = 0; at <= name.size();) {
    const size_t slash = std::min(name.find('/', at), name.size());
    if (std::string_view(name).substr(at, slash - at) == "..") return std::nullopt;
    at = slash + 1;
  }
  return name;
}

// What pax records and GNU long names say about the next member.
struct Pending {
  std::optional<std::string> name;
  std::optional<uint64_t> size;
  uint64_t first_header = 0;
  bool active = false;
};

// "LEN key=value\n" records; path= and size= are the ones that place data.
Status parse_pax(std::string_view text, Pending& next) {
  while (!text.empty()) {
    const size_t space = text.find(' ');
    uint64_t len = 0;
    if (space == std::string_view::npos || space == 0) return Status(EINVAL, "malformed pax record");
    for (char c : text.substr(0, space)) {
      if (c < '0' || c > '9' || len > text.size()) return Status(EINVAL, "malformed pax record length");
      len = len * 10 + static_cast<uint64_t>(c - '0');
    }
    if (len <= space + 1 || len > text.size() || text[len - 1] != '\n')
      return Status(EINVAL, "malformed pax record");
    const std::string_view record = text.substr(space + 1, len - space - 2);
    const size_t eq = record.find('=');
    if (eq == std::string_view::npos) return Status(EINVAL, "pax record without '='");
    const std::string_view key = record.substr(0, eq), value = record.substr(eq + 1);
    if (key == "path") next.name = std::string(value);
    if (key == "size") {
      uint64_t v = 0;
      if (value.empty() || value.size() > 19 ||
          !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return Status(EINVAL, "pax size '" + std::string(value) + "' is not a number");
      for (char c : value) v = v * 10 + static_cast<uint64_t>(c - '0');
      next.size = v;
    }
    text.remove_prefix(len);
  }
  return Status::ok();
}

class ShardScanner {
 public:
  ShardScanner(int fd, uint64_t size, const std::function<void(TarShardMember&&)>& on_member)
      : fd_(fd), size_(size), on_member_(on_member) {}

  // The shard's entries until the zero block; errors say what, the caller where.
  Status run() {
    while (true) {
      if (pos_ + kBlock > size_)
        return Status(EINVAL, "ends without the end-of-archive block (truncated?)");
      Block b;
      DLFS_RETURN_IF_ERROR(read_exact(fd_, b.data(), kBlock, pos_));
      if (all_zero(b)) break;
      DLFS_RETURN_IF_ERROR(entry(b));
    }
    facts_.end_offset = pos_;
    return Status::ok();
  }
  uint64_t pos() const { return pos_; }
  const TarShardFacts& facts() const { return facts_; }

 private:
  Status entry(const Block& b) {
    if (!checksum_matches(b)) return Status(EINVAL, "header checksum does not match (not a tar header)");
    const std::optional<uint64_t> field_size = number_field(b, 124, 12);
    if (!field_size) return Status(EINVAL, "size field is not a number");
    if (!next_.active) {  // the first record about this member: its bytes start here
      next_.first_header = pos_;
      next_.active = true;
    }
    const char type = static_cast<char>(b[156]);
    const uint64_t size = (type == '0' || type == '\0' || type == '7') && next_.size ? *next_.size : *field_size;
    const uint64_t data = pos_ + kBlock;
    if (size > size_ - data)
      return Status(EINVAL, "member of " + std::to_string(size) + " bytes runs past the end of the shard (" +
                                std::to_string(size_) + " bytes)");
    if (type == 'x' || type == 'L') {
      if (size > kMaxMetaBytes) return Status(EINVAL, "pax or long-name record of " + std::to_string(size) + " bytes");
      std::string text(size, '\0');
      DLFS_RETURN_IF_ERROR(read_exact(fd_, text.data(), size, data));
      if (type == 'x') {
        DLFS_RETURN_IF_ERROR(parse_pax(text, next_));
      } else {
        next_.name = text.substr(0, strnlen(text.data(), text.size()));
      }
    } else if (type == 'g' || type == 'K') {
      // Global pax records and long link names place no member's data.
    } else if (type == 'S') {
      return Status(EINVAL, "GNU sparse member (not supported: its data is not one range)");
    } else {
      DLFS_RETURN_IF_ERROR(finish(b, type, data, size));
    }
    pos_ = data + padded(size);
    return Status::ok();
  }

  // A real entry (not a record about the next one): a member, or skipped.
  Status finish(const Block& b, char type, uint64_t data, uint64_t size) {
    const Pending meta = std::exchange(next_, Pending{});
    if (type != '0' && type != '\0' && type != '7') {
      ++facts_.skipped;
      return Status::ok();
    }
    std::string name = meta.name ? *meta.name : field(b, 0, 100);
    const std::string prefix = field(b, 345, 155);
    const bool ustar = std::memcmp(b.data() + 257, "ustar", 5) == 0;
    if (!meta.name && ustar && !prefix.empty()) name = prefix + "/" + name;
    if (name.ends_with('/')) {  // old (v7) writers mark directories by the name only
      ++facts_.skipped;
      return Status::ok();
    }
    std::optional<std::string> clean = clean_name(name);
    if (!clean) return Status(EINVAL, "member name '" + name + "' is empty, absolute or climbs out with '..'");
    ++facts_.members;
    on_member_(TarShardMember{std::move(*clean), meta.first_header, data, size});
    return Status::ok();
  }

  int fd_;
  uint64_t size_;
  const std::function<void(TarShardMember&&)>& on_member_;
  uint64_t pos_ = 0;
  Pending next_;
  TarShardFacts facts_;
};

}  // namespace

Result<TarShardFacts> scan_tar_shard(int fd, uint64_t size, const std::string& label,
                                     const std::function<void(TarShardMember&&)>& on_member) {
  ShardScanner scanner(fd, size, on_member);
  DLFS_RETURN_IF_ERROR(
      scanner.run().with_context("tar shard '" + label + "' at byte " + std::to_string(scanner.pos())));
  return scanner.facts();
}

}  // namespace dlfs::provenance
