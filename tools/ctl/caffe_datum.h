// Caffe's Datum record (caffe.proto), encoded by hand: a dependency on
// libprotobuf for five fields would be heavier than the fields. Field
// numbers: channels 1, height 2, width 3 (varint), data 4 (bytes), label 5
// (varint), encoded 7 (bool).
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace dlfs::ctl {

struct DatumFields {
  uint32_t channels = 0, height = 0, width = 0;  // 0: not written (encoded images)
  int32_t label = 0;
  bool encoded = false;  // data is an image file (JPEG, PNG), not raw pixels
};

// Appends the serialized Datum to `out` (cleared first).
void encode_datum(const DatumFields& f, std::span<const std::byte> data, std::string& out);

}  // namespace dlfs::ctl
