#include "provenance/tfrecord.h"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <sstream>

#include <isa-l/crc.h>

namespace dlfs::provenance::tfrecord {
namespace {

std::string at_record(const std::string& path, uint64_t at) {
  return path + ": record at byte " + std::to_string(at);
}

}  // namespace

uint32_t crc32c(std::span<const std::byte> bytes, uint32_t crc) {
  // ISA-L keeps the CRC register un-inverted and takes an int length.
  uint32_t reg = ~crc;
  constexpr size_t kPiece = size_t{1} << 30;
  for (size_t at = 0; at < bytes.size(); at += kPiece) {
    const size_t n = std::min(kPiece, bytes.size() - at);
    reg = crc32_iscsi(reinterpret_cast<unsigned char*>(const_cast<std::byte*>(bytes.data() + at)),
                      static_cast<int>(n), reg);
  }
  return ~reg;
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t masked_crc32c(std::span<const std::byte> bytes) { return mask_crc(crc32c(bytes)); }

uint32_t load_u32(const std::byte* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::array<std::byte, kHeaderBytes> make_header(uint64_t length) {
  std::array<std::byte, kHeaderBytes> h{};
  for (int i = 0; i < 8; ++i) h[i] = static_cast<std::byte>(length >> (8 * i));
  const uint32_t crc = masked_crc32c(std::span<const std::byte>(h.data(), 8));
  for (int i = 0; i < 4; ++i) h[8 + i] = static_cast<std::byte>(crc >> (8 * i));
  return h;
}

std::array<std::byte, kFooterBytes> make_footer(uint32_t masked_crc) {
  std::array<std::byte, kFooterBytes> f{};
  for (int i = 0; i < 4; ++i) f[i] = static_cast<std::byte>(masked_crc >> (8 * i));
  return f;
}

std::vector<std::byte> frame(std::span<const std::byte> data) {
  std::vector<std::byte> out;
  out.reserve(data.size() + kFramingBytes);
  const auto h = make_header(data.size());
  const auto f = make_footer(masked_crc32c(data));
  out.insert(out.end(), h.begin(), h.end());
  out.insert(out.end(), data.begin(), data.end());
  out.insert(out.end(), f.begin(), f.end());
  return out;
}

Result<uint64_t> parse_header(std::span<const std::byte, kHeaderBytes> header, const std::string& path, uint64_t at) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<uint8_t>(header[i]);
  const uint32_t stored = load_u32(header.data() + 8);
  const uint32_t actual = masked_crc32c(header.first(8));
  if (stored != actual)
    return Status(EIO, at_record(path, at) + ": the length's CRC does not match (not a TFRecord file, or damaged)");
  return length;
}

Status read_exact(int fd, std::span<std::byte> out, uint64_t offset, const std::string& path, const char* what) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::pread(fd, out.data() + got, out.size() - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::from_errno(errno, path + ": reading " + what + " at byte " + std::to_string(offset + got));
    }
    if (n == 0)
      return Status(EIO, path + ": file ends at byte " + std::to_string(offset + got) + " inside " + what);
    got += static_cast<size_t>(n);
  }
  return Status::ok();
}

Result<std::vector<Record>> scan(int fd, uint64_t size, const std::string& path) {
  std::vector<Record> records;
  for (uint64_t at = 0; at < size;) {
    if (size - at < kFramingBytes)
      return Status(EIO, at_record(path, at) + ": truncated: " + std::to_string(size - at) +
                             " bytes left, a record has at least 16");
    std::array<std::byte, kHeaderBytes> header;
    DLFS_RETURN_IF_ERROR(read_exact(fd, header, at, path, "a record header"));
    DLFS_ASSIGN_OR_RETURN(const uint64_t length, parse_header(header, path, at));
    if (length > size - at - kFramingBytes)
      return Status(EIO, at_record(path, at) + ": truncated: the record has " + std::to_string(length) +
                             " data bytes but the file ends " + std::to_string(size - at - kFramingBytes) +
                             " bytes after its header and footer would start");
    records.push_back({at, length});
    at += kFramingBytes + length;
  }
  return records;
}

Result<uint32_t> check_data(int fd, const Record& r, const std::string& path) {
  constexpr uint64_t kPiece = 1 << 20;
  std::vector<std::byte> buf(std::min(kPiece, r.length + kFooterBytes));
  uint32_t crc = 0;
  uint64_t done = 0;
  const uint64_t data = r.offset + kHeaderBytes;
  std::array<std::byte, kFooterBytes> footer{};
  while (done < r.length + kFooterBytes) {
    const uint64_t n = std::min<uint64_t>(buf.size(), r.length + kFooterBytes - done);
    DLFS_RETURN_IF_ERROR(read_exact(fd, std::span(buf.data(), n), data + done, path, "record data"));
    const uint64_t data_n = done >= r.length ? 0 : std::min(n, r.length - done);
    crc = crc32c(std::span<const std::byte>(buf.data(), data_n), crc);
    // The footer's bytes, wherever they fall in this piece.
    for (uint64_t i = data_n; i < n; ++i) footer[done + i - r.length] = buf[i];
    done += n;
  }
  const uint32_t stored = load_u32(footer.data()), actual = mask_crc(crc);
  if (stored != actual)
    return Status(EIO, at_record(path, r.offset) + ": the data's CRC does not match (" + std::to_string(r.length) +
                           " data bytes at byte " + std::to_string(data) + " are damaged)");
  return actual;
}

Result<std::vector<Record>> parse_index(const std::string& text, uint64_t size, const std::string& index_path) {
  std::vector<Record> records;
  std::istringstream in(text);
  std::string line;
  uint64_t expect = 0, line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    std::istringstream fields(line);
    uint64_t offset = 0, framed = 0;
    std::string rest;
    const std::string where = index_path + ", line " + std::to_string(line_no);
    if (!(fields >> offset >> framed) || (fields >> rest))
      return Status(EINVAL, where + ": not \"<offset> <size>\": '" + line + "'");
    if (offset != expect)
      return Status(EINVAL, where + ": record at byte " + std::to_string(offset) + ", the previous one ends at byte " +
                                std::to_string(expect) + " (stale index?)");
    if (framed < kFramingBytes || framed > size || offset > size - framed)
      return Status(EINVAL, where + ": a " + std::to_string(framed) + "-byte record at byte " + std::to_string(offset) +
                                " does not fit a " + std::to_string(size) + "-byte file (stale index?)");
    records.push_back({offset, framed - kFramingBytes});
    expect = offset + framed;
  }
  if (expect != size)
    return Status(EINVAL, index_path + ": its records end at byte " + std::to_string(expect) + " but the file has " +
                              std::to_string(size) + " bytes (stale index?)");
  return records;
}

std::string index_text(const std::vector<Record>& records) {
  std::string out;
  for (const Record& r : records)
    out += std::to_string(r.offset) + " " + std::to_string(r.length + kFramingBytes) + "\n";
  return out;
}

}  // namespace dlfs::provenance::tfrecord
