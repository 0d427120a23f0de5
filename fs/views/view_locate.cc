#include "fs/views/view_locate.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "common/units.h"
#include "fs/dataset/dataset.h"

namespace dlfs::fs {
namespace {

// The one reference of `g` if it lies inside region 0, else null.
const std::byte* in_memory_region(const cache::Gather& g, const LocateTarget& t) {
  if (g.count() != 1 || t.memory == nullptr) return nullptr;
  const auto* p = static_cast<const std::byte*>(g.iov()[0].iov_base);
  const uint64_t n = g.iov()[0].iov_len;
  if (p < t.memory || n > t.memory_bytes || static_cast<uint64_t>(p - t.memory) > t.memory_bytes - n) return nullptr;
  return p;
}

}  // namespace

Status locate_samples(const EpochView& view, uint64_t start, uint64_t count, const LocateTarget& target,
                      cache::Gather& gather, LocatedBatch& out) {
  const provenance::Manifest& m = view.dataset().manifest();
  const bool grouped = m.samples_grouped();
  const uint64_t end = start >= view.count() ? start : start + std::min(count, view.count() - start);
  uint64_t staged = 0;
  for (uint64_t k = start; k < end; ++k) {
    const uint64_t id = view.sample_at(k);
    const uint64_t len = m.sample(id).length;
    if (len > std::numeric_limits<uint32_t>::max())
      return Status(EFBIG, "sample " + m.sample_name(id) + " has " + format_size(len) +
                               ": the client protocol locates samples below 4 GiB; read it through the mount");
    LocatedSample s;
    s.sample = id;
    s.length = static_cast<uint32_t>(len);
    gather.reset(len);
    Status st = view.read_sample(k, 0, len, gather, nullptr);
    if (!st) {
      gather.release();
      return Status(st.err(), "sample " + m.sample_name(id) + " (position " + std::to_string(k) + "): " + st.message());
    }
    if (const std::byte* p = len == 0 ? target.memory : in_memory_region(gather, target); p != nullptr || len == 0) {
      s.region = ClientRegion::memory;
      s.offset = p == nullptr ? 0 : static_cast<uint64_t>(p - target.memory);
      ++out.memory_samples;
    } else {
      if (staged + len > target.slot_bytes) {
        gather.release();
        if (k == start)
          return Status(ENOBUFS, "sample " + m.sample_name(id) + " (" + format_size(len) + ") does not fit a " +
                                     format_size(target.slot_bytes) + " staging slot");
        break;  // the client asks again from here
      }
      std::byte* dst = target.slot + staged;
      for (int i = 0; i < gather.count(); ++i) {
        std::memcpy(dst, gather.iov()[i].iov_base, gather.iov()[i].iov_len);
        dst += gather.iov()[i].iov_len;
      }
      s.region = ClientRegion::staging;
      s.offset = target.slot_offset + staged;
      staged += len;
    }
    gather.release();  // round pins go once the bytes are copied or referenced in region 0
    if (grouped) {
      const uint32_t n = m.sample_member_count(id);
      if (n > std::numeric_limits<uint16_t>::max())
        return Status(EFBIG, "sample " + m.sample_name(id) + " has " + std::to_string(n) +
                                 " members: the client protocol counts at most 65535; read it through the mount");
      s.members = static_cast<uint16_t>(n);
      for (uint32_t j = 0; j < n; ++j) {
        const provenance::SampleMember member = m.sample_member(id, j);
        out.members.emplace_back(static_cast<uint32_t>(member.offset), static_cast<uint32_t>(member.length));
      }
    }
    out.samples.push_back(s);
  }
  out.staged_bytes += staged;
  return Status::ok();
}

}  // namespace dlfs::fs
