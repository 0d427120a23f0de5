// The sidecar's byte-level pieces (lmdb_sidecar_bytes.h).
#include "provenance/lmdb_sidecar_bytes.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>

namespace dlfs::provenance::lmdb::sidecar_detail {

Status bad(const std::string& name, const std::string& what) { return Status(EBADMSG, name + ": " + what); }

std::string num(uint64_t v) { return std::to_string(v); }

std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

uint64_t load_le(const std::byte* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | std::to_integer<uint64_t>(p[i]);
  return v;
}

void store_le(std::byte* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<std::byte>(v >> (8 * i));
}

void put_varint(std::vector<std::byte>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::byte>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::byte>(v));
}

Status Reader::varint(uint64_t& v, const char* what) {
  v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos_ >= bytes_.size()) return bad(name_, std::string("truncated: body ends inside ") + what);
    uint64_t b = std::to_integer<uint64_t>(bytes_[pos_++]);
    if (shift == 63 && b > 1) return bad(name_, std::string(what) + ": varint exceeds 64 bits");
    v |= (b & 0x7f) << shift;
    if (!(b & 0x80)) return Status::ok();
  }
  return bad(name_, std::string(what) + ": varint longer than 10 bytes");
}

Status Reader::varint32(uint32_t& v, const char* what) {
  uint64_t w = 0;
  DLFS_RETURN_IF_ERROR(varint(w, what));
  if (w > UINT32_MAX) return bad(name_, std::string(what) + " " + num(w) + " does not fit 32 bits");
  v = static_cast<uint32_t>(w);
  return Status::ok();
}

Status Reader::element_count(uint64_t count, uint64_t min_bytes_each, const std::string& what) const {
  if (count > remaining() / min_bytes_each)
    return bad(name_, "truncated: body says " + num(count) + " " + what + " but " + num(remaining()) +
                          " bytes remain");
  return Status::ok();
}

}  // namespace dlfs::provenance::lmdb::sidecar_detail
