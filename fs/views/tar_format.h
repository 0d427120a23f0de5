// Tar member headers, computed: the epoch views' tar streams are laid out
// from the manifest alone (sizes and offsets without reading any data).
//
// A member is its header block(s), then its data, then zeros up to the next
// 512-byte boundary; the stream ends with two zero blocks. Names that fit
// ustar's name (100) + prefix (155) split use one header; longer names use a
// GNU long-name record ('L') first, which GNU tar, Python's tarfile and
// libarchive all read. Sizes of 8 GiB and more use GNU base-256.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace dlfs::fs {

inline constexpr uint64_t kTarBlock = 512;
inline constexpr uint64_t kTarTrailer = 2 * kTarBlock;

inline constexpr uint64_t tar_padded(uint64_t n) { return (n + kTarBlock - 1) & ~(kTarBlock - 1); }

// Bytes of header blocks a member named `name` needs (512, or more for long names).
uint64_t tar_header_bytes(std::string_view name);

// Bytes a member occupies in the stream: headers + data rounded up to 512.
inline uint64_t tar_member_bytes(std::string_view name, uint64_t size) {
  return tar_header_bytes(name) + tar_padded(size);
}

// Writes the tar_header_bytes(name) bytes of a regular-file member's headers.
void write_tar_header(std::string_view name, uint64_t size, int64_t mtime_s, uint32_t mode, std::byte* out);

}  // namespace dlfs::fs
