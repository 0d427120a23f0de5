// The byte-level pieces of the LMDB sidecar format (docs/lmdb-sidecar.md,
// "Byte layout"): little-endian integers, varints, zigzag, the bounds-checked
// body reader and the error messages they all produce. Internal to the
// sidecar code (lmdb_sidecar*.cc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace dlfs::provenance::lmdb::sidecar_detail {

// Every decoding error: EBADMSG, "<name>: <what>".
Status bad(const std::string& name, const std::string& what);

std::string num(uint64_t v);
std::string hex(uint64_t v);  // 0x and 16 digits

uint64_t load_le(const std::byte* p, int bytes);
inline uint64_t load_u64(const std::byte* p) { return load_le(p, 8); }
inline uint32_t load_u32(const std::byte* p) { return static_cast<uint32_t>(load_le(p, 4)); }
void store_le(std::byte* p, uint64_t v, int bytes);

// ---- varints (unsigned LEB128) and zigzag ----

void put_varint(std::vector<std::byte>& out, uint64_t v);

// Offsets are residuals against "right after the previous value", which is
// usually 0 or a small positive jump but negative for a recycled page.
inline uint64_t zigzag(uint64_t residual) { return (residual << 1) ^ (0 - (residual >> 63)); }
inline uint64_t unzigzag(uint64_t z) { return (z >> 1) ^ (0 - (z & 1)); }

// Bounds-checked cursor over the (decompressed) body. Every read says what it
// was reading, so a truncated body is reported as "key sizes run past ...".
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  size_t remaining() const { return bytes_.size() - pos_; }

  Status varint(uint64_t& v, const char* what);
  Status varint32(uint32_t& v, const char* what);

  // A count of varint elements: each takes at least one byte, so a count larger
  // than the bytes left is a corrupt field and must not size an allocation.
  Status element_count(uint64_t count, uint64_t min_bytes_each, const std::string& what) const;

 private:
  std::span<const std::byte> bytes_;
  size_t pos_ = 0;
  const std::string& name_;
};

}  // namespace dlfs::provenance::lmdb::sidecar_detail
