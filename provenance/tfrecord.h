// TFRecord files: the record framing, its CRCs, the scan that locates a
// file's records and the DALI-style index that lets a load skip the scan.
//
// A TFRecord file is records back to back, each
//
//   uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
//   | data[length] | uint32 masked_crc32c(data)
//
// with mask(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 (TensorFlow's
// record format). An index file ("tfrecord2idx" of NVIDIA DALI) is text, one
// line "<offset> <size>" per record, size being the whole framed record.
//
// CRC32C is Intel ISA-L's (crc32_iscsi, hardware-accelerated). Every error
// names the file and the byte offset of the record it is about.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace dlfs::provenance::tfrecord {

inline constexpr uint64_t kHeaderBytes = 12;  // length + its CRC
inline constexpr uint64_t kFooterBytes = 4;   // the data's CRC
inline constexpr uint64_t kFramingBytes = kHeaderBytes + kFooterBytes;

// CRC32C (Castagnoli) of `bytes`; `crc` continues an earlier value.
uint32_t crc32c(std::span<const std::byte> bytes, uint32_t crc = 0);
uint32_t mask_crc(uint32_t crc);
uint32_t masked_crc32c(std::span<const std::byte> bytes);

// The 12-byte header of a record of `length` data bytes.
std::array<std::byte, kHeaderBytes> make_header(uint64_t length);
// The 4-byte footer for a masked data CRC.
std::array<std::byte, kFooterBytes> make_footer(uint32_t masked_crc);
uint32_t load_u32(const std::byte* p);
// A whole framed record (tests, dlfs-ctl).
std::vector<std::byte> frame(std::span<const std::byte> data);

// The data length a header says, after checking the length's CRC; errors
// name `path` and the record's byte offset `at`.
Result<uint64_t> parse_header(std::span<const std::byte, kHeaderBytes> header, const std::string& path, uint64_t at);

// One record of a file: where its framing starts and how many data bytes it has.
struct Record {
  uint64_t offset = 0;  // of the length field; the data starts kHeaderBytes later
  uint64_t length = 0;  // data bytes
  bool operator==(const Record&) const = default;
};

// Reads exactly out.size() bytes at `offset` of fd; a short read is an error
// naming path, offset and `what`.
Status read_exact(int fd, std::span<std::byte> out, uint64_t offset, const std::string& path, const char* what);

// Locates every record of the file (`size` bytes) by reading each header:
// a bad length CRC, or a record running past the end, is an error naming the
// file and the record's offset. Data CRCs are not read (check_data does).
Result<std::vector<Record>> scan(int fd, uint64_t size, const std::string& path);

// Reads the data of `r` and the CRC after it, in pieces; the masked CRC when
// it matches, else EIO naming the file and the record's offset.
Result<uint32_t> check_data(int fd, const Record& r, const std::string& path);

// Parses an index file's text for a data file of `size` bytes: the records
// must tile the file from byte 0 with sizes of at least 16. Errors name the
// index and the line.
Result<std::vector<Record>> parse_index(const std::string& text, uint64_t size, const std::string& index_path);
// The index text for `records` (what parse_index reads back).
std::string index_text(const std::vector<Record>& records);

// The index of a data file: "<path>.idx".
inline std::string index_path(const std::string& data_path) { return data_path + ".idx"; }

}  // namespace dlfs::provenance::tfrecord
