// The .tar view's layout: member offsets (built once per view) and reads.
#include "fs/views/tar_layout.h"

#include <algorithm>

#include "fs/dataset/dataset.h"
#include "fs/views/tar_format.h"
#include "fs/views/view_format.h"
#include "fs/views/view_stream.h"

namespace dlfs::fs {
namespace {

const std::byte kZeros[kTarBlock] = {};

// One tar member of a planned position: a sample, or one file of a sample
// group (its bytes at `offset` of the sample's).
struct Member {
  std::string name;
  uint64_t offset = 0, length = 0;
  uint32_t file = 0;
};

// Calls f(member) for each tar member of planned position k, in order; stops
// when f returns false. Ungrouped samples take no detour through SampleMember.
template <typename F>
void for_each_member(const EpochView& view, uint64_t k, F&& f) {
  const auto& m = view.dataset().manifest();
  const uint64_t s = view.sample_at(k);
  if (!m.samples_grouped()) {
    f(Member{view.member_name(k), 0, view.sample_length(k), m.sample(s).file});
    return;
  }
  for (uint32_t j = 0, n = m.sample_member_count(s); j < n; ++j) {
    provenance::SampleMember sm = m.sample_member(s, j);
    if (!f(Member{std::move(sm.name), sm.offset, sm.length, sm.file})) return;
  }
}

// Appends the bytes of [pos, end) that fall in one member (header, data,
// padding) starting at member_begin; returns the new position in pos.
Status read_member(const EpochView& view, uint64_t k, const Member& mb, uint64_t member_begin, uint64_t& pos,
                   uint64_t end, cache::Gather& out, cache::ReadRing* ring) {
  const uint64_t hb = tar_header_bytes(mb.name), len = mb.length;
  const uint64_t data_begin = member_begin + hb, data_end = data_begin + len;
  const uint64_t member_end = member_begin + tar_member_bytes(mb.name, len);
  if (pos < data_begin) {  // header bytes, generated (on the stack: long names are rare)
    std::byte small[4096];
    std::vector<std::byte> big(hb > sizeof small ? hb : 0);
    std::byte* header = big.empty() ? small : big.data();
    const auto& m = view.dataset().manifest();
    write_tar_header(mb.name, len, m.file_mtime_ns(mb.file) / 1000000000, 0444, header);
    const uint64_t n = std::min(end, data_begin) - pos;
    out.add_copy(header + (pos - member_begin), n);
    pos += n;
  }
  if (pos < end && pos < data_end) {  // sample bytes
    const uint64_t n = std::min(end, data_end) - pos;
    DLFS_RETURN_IF_ERROR(view.read_sample(k, mb.offset + (pos - data_begin), n, out, ring));
    pos += n;
  }
  if (pos < end && pos < member_end) {  // padding to 512
    const uint64_t n = std::min(end, member_end) - pos;
    out.add_ref(kZeros, n);
    pos += n;
  }
  return Status::ok();
}

// The members of planned position k that [pos, end) touches, from its first
// header at sample_begin.
Status read_position(const EpochView& view, uint64_t k, uint64_t sample_begin, uint64_t& pos, uint64_t end,
                     cache::Gather& out, cache::ReadRing* ring) {
  Status st;
  uint64_t member_begin = sample_begin;
  for_each_member(view, k, [&](const Member& mb) {
    const uint64_t bytes = tar_member_bytes(mb.name, mb.length);
    if (pos < member_begin + bytes) st = read_member(view, k, mb, member_begin, pos, end, out, ring);
    member_begin += bytes;
    return st.is_ok() && pos < end;
  });
  return st;
}

}  // namespace

std::shared_ptr<const TarLayout> TarLayout::of(const EpochView& view) {
  static const size_t slot = *view_format_index(".tar");
  return view.layout<TarLayout>(slot, [](const EpochView& v) {
    auto l = std::make_shared<TarLayout>();
    l->begin_.resize(v.count() + 1);
    uint64_t off = 0;
    for (uint64_t k = 0; k < v.count(); ++k) {
      l->begin_[k] = off;
      for_each_member(v, k, [&](const Member& mb) { return off += tar_member_bytes(mb.name, mb.length), true; });
    }
    l->begin_[v.count()] = off;
    return l;
  });
}

uint64_t TarLayout::size() const { return begin_.back() + kTarTrailer; }

TarLayout::Span TarLayout::index_span(const EpochView& view, uint64_t k) const {
  if (view.dataset().manifest().samples_grouped()) return {begin_[k], member_bytes(k)};
  return {begin_[k] + tar_header_bytes(view.member_name(k)), view.sample_length(k)};
}

Status TarLayout::read(const EpochView& view, uint64_t offset, uint64_t size, cache::Gather& out,
                       cache::ReadRing* ring, const MemberOrder* served) const {
  // Member j of the stream is planned position k_of(j) and starts at begin[j].
  const std::vector<uint64_t>& begin = served ? served->begin : begin_;
  auto k_of = [&](uint64_t j) { return served ? served->planned[j] : j; };
  const uint64_t total = this->size(), count = view.count();
  if (offset >= total) return Status::ok();
  const uint64_t end = std::min(total, offset + size);
  uint64_t pos = offset;
  // The member holding `pos`: O(log n), so a seek anywhere is cheap.
  uint64_t j = static_cast<uint64_t>(std::upper_bound(begin.begin(), begin.end(), pos) - begin.begin()) - 1;
  if (!served) advance_ring(view, ring, std::min(j, count ? count - 1 : 0));  // opportunistic: the stream does
  for (; pos < end && j < count; ++j) {
    DLFS_RETURN_IF_ERROR(read_position(view, k_of(j), begin[j], pos, end, out, ring));
  }
  while (pos < end) {  // the two zero blocks that end the archive
    const uint64_t n = std::min<uint64_t>(end - pos, kTarBlock);
    out.add_ref(kZeros, n);
    pos += n;
  }
  return Status::ok();
}

}  // namespace dlfs::fs
