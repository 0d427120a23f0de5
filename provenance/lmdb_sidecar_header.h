// The sidecar's fixed header and trailer (docs/lmdb-sidecar.md, "Byte
// layout"): what encode_sidecar writes around the body and decode_sidecar
// checks first. Internal to the sidecar code (lmdb_sidecar*.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace dlfs::provenance::lmdb::sidecar_detail {

inline constexpr unsigned char kMagic[8] = {'D', 'L', 'F', 'S', 'L', 'M', 'D', 'B'};
inline constexpr uint32_t kFlagExplicit = 1u << 0;  // form 2 (else form 1, provenance)
inline constexpr uint32_t kFlagZstd = 1u << 1;      // the body is zstd-compressed
inline constexpr uint32_t kKnownFlags = kFlagExplicit | kFlagZstd;

inline constexpr size_t kOffVersion = 8, kOffFlags = 12, kOffFileSize = 16, kOffBodySize = 24, kOffRecords = 32,
                        kOffKey = 40;
inline constexpr size_t kKeyBytes = 72;
inline constexpr size_t kHeaderSize = kOffKey + kKeyBytes;  // 112
inline constexpr size_t kTrailerSize = 8;                   // xxh3-64 of every byte before it

}  // namespace dlfs::provenance::lmdb::sidecar_detail
