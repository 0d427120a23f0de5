#include "cache/sample_reader.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "cache/extent_fill.h"

namespace dlfs::cache {
namespace {

// Where the residency of the byte space may change after `pos`: the end of
// pos's extent inside this node's stripe, else the stripe's edge (other
// nodes' bytes are never resident here).
uint64_t next_boundary(const StorageBuffer& b, uint64_t pos) {
  if (pos < b.range_begin()) return b.range_begin();
  if (pos >= b.range_end()) return UINT64_MAX;
  uint64_t e = b.extent_of(pos);
  return b.extent_begin(e) + b.extent_length(e);
}

void count(std::atomic<uint64_t>& c, uint64_t n) { c.fetch_add(n, std::memory_order_relaxed); }

// A read from `pos` on goes to a peer or the backend. If pos is a byte this
// node's buffer holds once loaded, note the miss: a running loader yields to
// readers that miss (cache/load_yield.h). Other nodes' bytes and bytes over
// the budget are never loaded here, so they do not count.
void note_if_local_miss(const StorageBuffer& b, uint64_t pos) {
  if (pos >= b.range_begin() && pos < b.range_end() && b.extent_of(pos) < b.cacheable_extents())
    b.reader_misses().note();
}

}  // namespace

Status SampleReader::read_bytes(uint64_t offset, uint64_t length, Gather& out, ReadCounters& c) const {
  const uint64_t total = m_.total_bytes();
  if (offset > total || length > total - offset)
    return Status(EINVAL, "read of " + std::to_string(length) + " bytes at byte-space offset " +
                              std::to_string(offset) + " is outside the dataset's " + std::to_string(total) + " bytes");
  if (length > 0 && buffer_.resident_span(offset, length) == nullptr) load_on_miss(offset, length, c);
  // Maximal runs whose extents are all resident (one pointer range: the
  // mapping is contiguous) or all not (fetched into the arena).
  const uint64_t end = offset + length;
  for (uint64_t pos = offset; pos < end;) {
    const std::byte* mem = buffer_.resident_ptr(pos);
    uint64_t run_end = pos;
    do {
      run_end = std::min(end, next_boundary(buffer_, run_end));
    } while (run_end < end && (buffer_.resident_ptr(run_end) != nullptr) == (mem != nullptr));
    const uint64_t n = run_end - pos;
    if (mem != nullptr) {
      out.add_ref(mem, n);
      count(c.memory_bytes, n);
    } else {
      note_if_local_miss(buffer_, pos);
      // Aligned: a backend read of a raw file at a page offset can go direct.
      DLFS_RETURN_IF_ERROR(fetcher_.read(pos, std::span<std::byte>(out.alloc_aligned(n), n)));
      count(c.fetched_reads, 1);
      count(c.fetched_bytes, n);
    }
    pos = run_end;
  }
  return Status::ok();
}

void SampleReader::load_on_miss(uint64_t offset, uint64_t length, ReadCounters& c) const {
  const uint64_t lo = std::max(offset, buffer_.range_begin());
  const uint64_t hi = std::min(offset + length, buffer_.range_end());
  if (lo >= hi || buffer_.cacheable_extents() == 0) return;  // another node's stripe, or no memory
  // No load that lets readers load: a miss reads the backend at once, never
  // waiting for the loader (that would make reads during the load slower).
  std::shared_ptr<const ExtentFill> fill = buffer_.fill_on_read();
  if (!fill) return;
  const uint64_t last = std::min(buffer_.extent_of(hi - 1), buffer_.cacheable_extents() - 1);
  for (uint64_t e = buffer_.extent_of(lo); e <= last; ++e) {
    ExtentState st = buffer_.state(e);
    if (st == ExtentState::absent) {
      if (fill->claim_and_load(e)) {
        count(c.extents_loaded, 1);
        continue;
      }
      st = buffer_.state(e);  // another thread claimed it first
    }
    if (st != ExtentState::loading || load_wait_.count() <= 0) continue;
    count(c.load_waits, 1);
    if (!buffer_.wait_settled(e, load_wait_)) count(c.load_wait_timeouts, 1);
  }
}

const RoundPipeline::Pin* SampleReader::pin(const SampleContext& at, Gather& out) const {
  if (rounds_ == nullptr || at.order == nullptr) return nullptr;
  const plan::EpochOrder& order = **at.order;
  const uint32_t round = order.round_of(at.position);
  const RoundPipeline::Pin* p = out.pinned(order.epoch, round);
  // A reply that already holds a pin never waits for a slot (two such waits deadlock).
  if (!p) p = &out.hold(rounds_->acquire(*at.order, round, !out.holds_pins()), order.epoch, round);
  return *p ? p : nullptr;
}

Status SampleReader::read_sample(uint64_t s, uint64_t from, uint64_t n, const SampleContext& at, Gather& out,
                                 ReadCounters& c) const {
  if (n == 0) return Status::ok();
  if (m_.sample_check_bytes(s) == 0) return gather_piece(s, from, n, at, true, out, c);
  // Checked reads. Round buffers and ring slots were filled from the
  // locations of generation 0; after a repair they are bypassed.
  const uint64_t gen = m_.samples_generation();
  const bool placed = gen == 0;
  Status st = check_sample(s, at, placed, out);
  if (st.is_ok()) return gather_piece(s, from, n, at, placed, out, c);
  if (st.err() != EBADMSG) return st;
  DLFS_RETURN_IF_ERROR(m_.repair_samples(gen, st.message()));
  DLFS_RETURN_IF_ERROR(check_sample(s, at, false, out));
  return gather_piece(s, from, n, at, false, out, c);
}

Status SampleReader::check_sample(uint64_t s, const SampleContext& at, bool placed, Gather& out) const {
  const uint64_t len = m_.sample_check_bytes(s);
  const uint64_t offset = m_.sample_data_offset(s) - len;
  std::byte small[64];
  std::vector<std::byte> big;
  std::span<std::byte> bytes(small, len);
  if (len > sizeof small) {
    big.resize(len);
    bytes = big;
  }
  const RoundPipeline::Pin* p = placed ? pin(at, out) : nullptr;
  const uint64_t chunk = p ? shape_->chunk_of(s) : 0;
  RoundRemote* remote = p ? round_remote_.load(std::memory_order_acquire) : nullptr;
  if (p && p->local(chunk)) {
    // The planner's chunks include the bytes checked before a sample.
    std::memcpy(bytes.data(), p->sample_ptr(offset, chunk), len);
    p->note_read(len);
  } else if (remote && remote->fetch_round(p->holder(chunk), p->epoch(), p->round(), p->slot(),
                                           p->holder_offset(offset, chunk), bytes)) {
    // From the member that holds the chunk: it counts these bytes as read.
  } else if (const std::byte* mem = buffer_.resident_span(offset, len)) {
    // Not loaded on a miss: a few bytes; the sample's own read loads the extent.
    std::memcpy(bytes.data(), mem, len);
  } else {
    DLFS_RETURN_IF_ERROR(fetcher_.read(offset, bytes));
  }
  return m_.check_sample(s, bytes);
}

Status SampleReader::gather_piece(uint64_t s, uint64_t from, uint64_t n, const SampleContext& at, bool placed,
                                  Gather& out, ReadCounters& c) const {
  const uint64_t sample_begin = m_.sample_data_offset(s);
  const uint64_t begin = sample_begin + from;
  const RoundPipeline::Pin* p = placed ? pin(at, out) : nullptr;
  const uint64_t chunk = p ? shape_->chunk_of(s) : 0;  // a binary search: once per piece
  if (p && p->local(chunk)) {
    out.add_ref(p->sample_ptr(sample_begin, chunk) + from, n);
    p->note_read(n);
    count(c.memory_bytes, n);
    return Status::ok();
  }
  // A chunk of the round another member holds (rounds over the job's
  // memory): from that member's slot, else as any byte not here.
  if (p) {
    std::byte* dst = out.alloc(n);
    RoundRemote* remote = round_remote_.load(std::memory_order_acquire);
    if (remote && remote->fetch_round(p->holder(chunk), p->epoch(), p->round(), p->slot(),
                                      p->holder_offset(sample_begin, chunk) + from, std::span<std::byte>(dst, n))) {
      count(c.round_remote_bytes, n);
      return Status::ok();
    }
    count(c.fetched_reads, 1);
    count(c.fetched_bytes, n);
    return fetcher_.read(begin, std::span<std::byte>(dst, n));
  }
  const bool ring = placed && at.ring != nullptr;
  const std::byte* mem = buffer_.resident_span(begin, n);
  if (mem == nullptr && !ring) {  // with a ring: look there first (it may hold the sample)
    load_on_miss(begin, n, c);
    mem = buffer_.resident_span(begin, n);
  }
  if (mem != nullptr) {
    out.add_ref(mem, n);
    count(c.memory_bytes, n);
    return Status::ok();
  }
  std::byte* dst = out.alloc(n);
  if (ring) {
    if (at.ring->take(at.k, from, n, dst)) {
      count(c.ring_hits, 1);
      return Status::ok();
    }
    load_on_miss(begin, n, c);
    if (const std::byte* loaded = buffer_.resident_span(begin, n)) {
      std::memcpy(dst, loaded, n);  // the arena slot is taken already
      count(c.memory_bytes, n);
      return Status::ok();
    }
  }
  note_if_local_miss(buffer_, begin);
  count(c.fetched_reads, 1);
  count(c.fetched_bytes, n);
  return fetcher_.read(begin, std::span<std::byte>(dst, n));  // a peer's memory or the backend
}

bool SampleReader::in_memory(uint64_t s, const SampleContext& at) const {
  if (rounds_ != nullptr && at.order != nullptr) {
    // Rounds over the job's memory: the round buffers are the read-ahead (a
    // round not loaded yet is being loaded, or will be, with large
    // sequential reads, and its chunks elsewhere come from their nodes). A
    // ring that fetched its samples from the backend meanwhile would read
    // them twice (in 39_cluster_rounds, as many bytes again as the loads).
    if (rounds_->spread()) return true;
    const plan::EpochOrder& order = **at.order;
    return rounds_->is_ready(order.epoch, order.round_of(at.position));
  }
  const uint64_t len = m_.sample(s).length;
  return len == 0 || buffer_.resident_span(m_.sample_data_offset(s), len) != nullptr;
}

Status SampleReader::fetch_sample(uint64_t s, std::span<std::byte> dst) const {
  return fetcher_.read(m_.sample_data_offset(s), dst);
}

}  // namespace dlfs::cache
