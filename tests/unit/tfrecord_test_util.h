// An independent TFRecord encoder and decoder for the tests: CRC32C computed
// bit by bit from the polynomial (not ISA-L, which the product uses), the
// framing written and parsed here from TensorFlow's description of it.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dlfs::test {

// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), one bit at a time.
inline uint32_t ref_crc32c(const std::string& s) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char c : s) {
    crc ^= c;
    for (int b = 0; b < 8; ++b) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

inline uint32_t ref_masked_crc(const std::string& s) {
  const uint32_t c = ref_crc32c(s);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

inline std::string le_bytes(uint64_t v, int n) {
  std::string out(static_cast<size_t>(n), '\0');
  for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = static_cast<char>(v >> (8 * i));
  return out;
}

inline std::string ref_frame(const std::string& data) {
  const std::string len = le_bytes(data.size(), 8);
  return len + le_bytes(ref_masked_crc(len), 4) + data + le_bytes(ref_masked_crc(data), 4);
}

inline uint64_t le_value(const std::string& s, size_t at, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[at + static_cast<size_t>(i)]);
  return v;
}

// The records of a TFRecord stream; every CRC must match and the stream must
// end exactly after a record (gtest failures otherwise).
inline std::vector<std::string> ref_parse(const std::string& t) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at < t.size()) {
    EXPECT_GE(t.size() - at, 16u) << "truncated record at byte " << at;
    if (t.size() - at < 16) break;
    const uint64_t len = le_value(t, at, 8);
    EXPECT_EQ(le_value(t, at + 8, 4), ref_masked_crc(t.substr(at, 8))) << "length CRC at byte " << at;
    EXPECT_LE(len, t.size() - at - 16) << "record at byte " << at << " runs past the end";
    if (len > t.size() - at - 16) break;
    std::string data = t.substr(at + 12, len);
    EXPECT_EQ(le_value(t, at + 12 + len, 4), ref_masked_crc(data)) << "data CRC of the record at byte " << at;
    out.push_back(std::move(data));
    at += 16 + len;
  }
  return out;
}

}  // namespace dlfs::test
