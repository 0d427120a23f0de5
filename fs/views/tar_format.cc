#include "fs/views/tar_format.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace dlfs::fs {
namespace {

constexpr size_t kNameLen = 100, kPrefixLen = 155;

// Where to split `name` into ustar prefix + name; npos when it cannot be.
size_t ustar_split(std::string_view name) {
  if (name.size() <= kNameLen) return 0;
  if (name.size() > kPrefixLen + 1 + kNameLen) return std::string_view::npos;
  // The prefix must end at a '/', be at most 155 bytes, and leave at most 100.
  for (size_t slash = name.find('/'); slash != std::string_view::npos; slash = name.find('/', slash + 1)) {
    if (slash > kPrefixLen) break;
    if (name.size() - slash - 1 <= kNameLen && slash > 0 && slash + 1 < name.size()) return slash;
  }
  return std::string_view::npos;
}

void octal(char* field, size_t width, uint64_t value) {  // width - 1 zero-padded digits, then NUL
  field[width - 1] = '\0';
  for (size_t i = width - 1; i-- > 0; value >>= 3) field[i] = static_cast<char>('0' + (value & 7));
}

void size_field(char* field, uint64_t size) {  // 12 bytes
  if (size < (1ull << 33)) return octal(field, 12, size);
  field[0] = static_cast<char>(0x80);  // GNU base-256, big-endian
  for (int i = 11; i >= 1; --i, size >>= 8) field[i] = static_cast<char>(size & 0xff);
}

// A text field (not NUL-terminated when full). memcpy's source must not be
// null even for 0 bytes, and an empty string_view's data() may be.
void text_field(char* field, std::string_view text, size_t width) {
  if (!text.empty()) std::memcpy(field, text.data(), std::min(text.size(), width));
}

void one_header(std::string_view name, std::string_view prefix, uint64_t size, int64_t mtime_s, uint32_t mode,
                char type, char* h) {
  std::memset(h, 0, kTarBlock);
  text_field(h, name, kNameLen);
  octal(h + 100, 8, mode & 07777);
  octal(h + 108, 8, 0);  // uid
  octal(h + 116, 8, 0);  // gid
  size_field(h + 124, size);
  octal(h + 136, 12, static_cast<uint64_t>(mtime_s < 0 ? 0 : mtime_s));
  h[156] = type;
  std::memcpy(h + 257, "ustar", 6);  // magic "ustar\0" + version "00"
  std::memcpy(h + 263, "00", 2);
  std::memcpy(h + 265, "root", 4);
  std::memcpy(h + 297, "root", 4);
  text_field(h + 345, prefix, kPrefixLen);
  std::memset(h + 148, ' ', 8);  // checksum counts its own field as spaces
  unsigned sum = 0;
  for (size_t i = 0; i < kTarBlock; ++i) sum += static_cast<unsigned char>(h[i]);
  octal(h + 148, 7, sum);  // six digits and a NUL, then a space
  h[155] = ' ';
}

}  // namespace

uint64_t tar_header_bytes(std::string_view name) {
  if (ustar_split(name) != std::string_view::npos) return kTarBlock;
  return kTarBlock + tar_padded(name.size() + 1) + kTarBlock;  // 'L' header + name + real header
}

void write_tar_header(std::string_view name, uint64_t size, int64_t mtime_s, uint32_t mode, std::byte* out) {
  char* h = reinterpret_cast<char*>(out);
  size_t split = ustar_split(name);
  if (split == 0) return one_header(name, {}, size, mtime_s, mode, '0', h);
  if (split != std::string_view::npos)
    return one_header(name.substr(split + 1), name.substr(0, split), size, mtime_s, mode, '0', h);
  // GNU long name: an 'L' member whose data is the name and a NUL.
  one_header("././@LongLink", {}, name.size() + 1, 0, 0644, 'L', h);
  const uint64_t data = tar_padded(name.size() + 1);
  std::memset(h + kTarBlock, 0, data);
  std::memcpy(h + kTarBlock, name.data(), name.size());
  one_header(name.substr(0, kNameLen), {}, size, mtime_s, mode, '0', h + kTarBlock + data);
}

}  // namespace dlfs::fs
