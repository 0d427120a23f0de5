// Locating a view's samples for a local client (docs/client-protocol.md).
//
// A client that maps dlfsd's memory reads each sample where it lies: the
// daemon reads the sample through the view's one read path
// (EpochView::read_sample, so the same bytes and checks as the mount), and
// when that path answers with one reference into the dataset memory the
// client maps (region 0), the client gets its offset there. Anything else
// (bytes fetched from a peer or the backend, a round buffer's, several
// pieces) is copied into the client's staging slot (region 1) and located
// there. Nothing else is ever handed out: region 0 holds only resident
// extents' bytes, which never change.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "cache/gather.h"
#include "common/status.h"
#include "fs/views/epoch_view.h"

namespace dlfs::fs {

enum class ClientRegion : uint16_t { memory = 0, staging = 1 };

// One sample as the protocol's 24-byte record says it.
struct LocatedSample {
  uint64_t offset = 0;  // in its region
  uint64_t sample = 0;  // the sample's id
  uint32_t length = 0;
  ClientRegion region = ClientRegion::memory;
  uint16_t members = 1;
};

struct LocateTarget {
  const std::byte* memory = nullptr;  // region 0: the dataset memory clients map
  uint64_t memory_bytes = 0;
  std::byte* slot = nullptr;          // the staging slot asked for
  uint64_t slot_bytes = 0;
  uint64_t slot_offset = 0;           // the slot's offset in region 1
};

struct LocatedBatch {
  std::vector<LocatedSample> samples;
  // Grouped datasets: every sample's members in order, as (first byte from
  // the sample's, length): a tar shard's members have headers between them.
  std::vector<std::pair<uint32_t, uint32_t>> members;
  uint64_t staged_bytes = 0;             // copied into the slot
  uint64_t memory_samples = 0;           // located in region 0
};

// Locates positions [start, start + count) of `view` (count is cut at the
// view's end), appending to `out`. Stops early before a sample whose bytes
// would not fit the rest of the slot; a first sample larger than the whole
// slot is an error (ENOBUFS), as is a sample of 4 GiB or more (EFBIG: the
// record's length field). Read errors (a backend file that changed, a
// failed check) name the sample.
Status locate_samples(const EpochView& view, uint64_t start, uint64_t count, const LocateTarget& target,
                      cache::Gather& gather, LocatedBatch& out);

}  // namespace dlfs::fs
