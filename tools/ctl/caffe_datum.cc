#include "tools/ctl/caffe_datum.h"

namespace dlfs::ctl {

namespace {

void varint(uint64_t v, std::string& out) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void field_varint(uint32_t field, uint64_t v, std::string& out) {
  varint(field << 3 | 0, out);
  varint(v, out);
}

}  // namespace

void encode_datum(const DatumFields& f, std::span<const std::byte> data, std::string& out) {
  out.clear();
  out.reserve(data.size() + 32);
  // proto2 optional fields: Caffe's writers set channels/height/width only for
  // raw pixels; order by field number like protobuf's serializer.
  if (f.channels || f.height || f.width) {
    field_varint(1, f.channels, out);
    field_varint(2, f.height, out);
    field_varint(3, f.width, out);
  }
  varint(4 << 3 | 2, out);
  varint(data.size(), out);
  out.append(reinterpret_cast<const char*>(data.data()), data.size());
  // int32 label: negative values are sign-extended to 64 bits (10 bytes).
  field_varint(5, static_cast<uint64_t>(static_cast<int64_t>(f.label)), out);
  if (f.encoded) field_varint(7, 1, out);
}

}  // namespace dlfs::ctl
