#include "fs/epoch_view.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "fs/dataset.h"
#include "fs/tar_format.h"

namespace dlfs::fs {
namespace {

const std::byte kZeros[kTarBlock] = {};

std::string escape_entry(const std::string& name) {
  std::string out;
  out.reserve(name.size() + 8);
  for (char c : name) {
    if (c == '%') out += "%25";
    else if (c == '/') out += "%2F";
    else out += c;
  }
  return out;
}

std::string fmt_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

}  // namespace

Result<std::shared_ptr<const EpochView>> EpochView::build(const Dataset& ds, ViewKey key) {
  if (key.world_size == 0 || key.rank >= key.world_size)
    return Status(EINVAL, "rank " + std::to_string(key.rank) + " is not below world size " +
                              std::to_string(key.world_size));
  std::shared_ptr<EpochView> v(new EpochView(ds, key));
  const plan::Planner& p = ds.planner();
  v->plan_ = p.key(key.epoch, key.world_size);
  v->count_ = p.shape().samples == 0 ? 0 : plan::samples_per_rank(v->plan_);
  v->order_ = p.order(key.epoch);
  v->member_begin_.resize(v->count_ + 1);
  uint64_t off = 0;
  for (uint64_t k = 0; k < v->count_; ++k) {
    v->member_begin_[k] = off;
    off += tar_member_bytes(v->member_name(k), v->sample_length(k));
  }
  v->member_begin_[v->count_] = off;
  return std::shared_ptr<const EpochView>(std::move(v));
}

uint64_t EpochView::sample_length(uint64_t k) const { return ds_.manifest().sample(sample_at(k)).length; }

uint64_t EpochView::bin_size() const { return count_ * ds_.manifest().fixed_record_size(); }

uint64_t EpochView::tar_data_offset(uint64_t k) const {
  return member_begin_[k] + tar_header_bytes(member_name(k));
}

std::string EpochView::member_name(uint64_t k) const {
  const auto& m = ds_.manifest();
  const uint64_t s = sample_at(k);
  if (m.options().format == provenance::DatasetFormat::files) return m.file_path(m.sample(s).file);
  // fixed: <file>/<record index in that file, 8 digits>.bin
  std::string name = m.sample_name(s);  // "<file>#000123"
  auto hash = name.rfind('#');
  char rec[32];
  std::snprintf(rec, sizeof rec, "/%08llu.bin", std::stoull(name.substr(hash + 1)));
  return name.substr(0, hash) + rec;
}

std::string EpochView::entry_name(uint64_t k) const {
  const int width = static_cast<int>(std::to_string(count_ > 0 ? count_ - 1 : 0).size());
  char pos[32];
  std::snprintf(pos, sizeof pos, "%0*llu-", width, static_cast<unsigned long long>(k));
  return pos + escape_entry(member_name(k));
}

Status EpochView::add_sample(uint64_t k, uint64_t from, uint64_t n, ReplyGather& out, cache::ReadRing* ring) const {
  if (n == 0) return Status::ok();
  const auto& m = ds_.manifest();
  if (!m.lmdb()) return add_sample_bytes(k, from, n, out, ring, true);
  // LMDB: a sidecar that misplaces a value must never yield a wrong byte.
  // Every read of an overflow value checks the page header in front of it;
  // a mismatch walks the tree once (Manifest::repair_lmdb) and the read goes
  // on from the corrected offset. Round chunks and ring slots were filled
  // from the old offsets, so after a repair they are bypassed.
  const uint64_t gen = m.lmdb_generation();
  const bool placed = gen == 0;
  Status st = check_lmdb_header(k, placed, out);
  if (st.is_ok()) return add_sample_bytes(k, from, n, out, placed ? ring : nullptr, placed);
  if (st.err() != EBADMSG) return st;
  DLFS_RETURN_IF_ERROR(m.repair_lmdb(gen, st.message()));
  DLFS_RETURN_IF_ERROR(check_lmdb_header(k, false, out));
  return add_sample_bytes(k, from, n, out, nullptr, false);
}

Status EpochView::check_lmdb_header(uint64_t k, bool placed, ReplyGather& out) const {
  const auto& m = ds_.manifest();
  const uint64_t s = sample_at(k);
  const uint64_t hb = m.sample_header_bytes(s);
  if (hb == 0) return Status::ok();
  const uint64_t at = m.sample_data_offset(s) - hb;
  std::byte header[16];
  const plan::Planner& p = ds_.planner();
  cache::RoundPipeline* pipe = placed ? ds_.round_pipeline() : nullptr;
  const cache::RoundPipeline::Pin* pin = nullptr;
  if (pipe) {
    const uint32_t round = order_->round_of(position(k));
    pin = out.pinned(key_.epoch, round);
    if (!pin) pin = &out.hold(pipe->acquire(order_, round, !out.holds_pins()), key_.epoch, round);
  }
  if (pin && *pin) {
    // The planner's chunks include the header bytes of overflow values.
    std::memcpy(header, pin->sample_ptr(at, p.shape().chunk_of(s)), sizeof header);
  } else {
    const auto& b = ds_.buffer();
    const std::byte* first = b.resident_ptr(at);
    if (first && at + sizeof header <= b.range_end() &&
        b.state(b.extent_of(at + sizeof header - 1)) == cache::ExtentState::resident) {
      std::memcpy(header, first, sizeof header);
    } else {
      DLFS_RETURN_IF_ERROR(ds_.fetcher().read(at, std::span<std::byte>(header, sizeof header)));
    }
  }
  return m.check_sample_header(s, std::span<const std::byte>(header, sizeof header));
}

Status EpochView::add_sample_bytes(uint64_t k, uint64_t from, uint64_t n, ReplyGather& out, cache::ReadRing* ring,
                                   bool placed) const {
  const auto& m = ds_.manifest();
  const uint64_t s = sample_at(k);
  const uint64_t begin = m.sample_data_offset(s) + from;
  const plan::Planner& p = ds_.planner();
  if (cache::RoundPipeline* pipe = placed ? ds_.round_pipeline() : nullptr) {
    const uint64_t g = position(k);
    const uint32_t round = order_->round_of(g);
    const cache::RoundPipeline::Pin* pin = out.pinned(key_.epoch, round);
    if (!pin) pin = &out.hold(pipe->acquire(order_, round, !out.holds_pins()), key_.epoch, round);
    if (*pin) {
      const uint64_t chunk = p.shape().chunk_of(s);
      out.add_ref(pin->sample_ptr(m.sample_data_offset(s), chunk) + from, n);
      ds_.view_counters().local_bytes.fetch_add(n, std::memory_order_relaxed);
      return Status::ok();
    }
  } else {
    // Resident only if every extent it touches is: the mapping is contiguous.
    const auto& b = ds_.buffer();
    const std::byte* first = b.resident_ptr(begin);
    bool resident = first != nullptr && begin + n <= b.range_end();
    for (uint64_t e = b.extent_of(begin) + 1; resident && e <= b.extent_of(begin + n - 1); ++e)
      resident = b.state(e) == cache::ExtentState::resident;
    if (resident) {
      out.add_ref(first, n);
      ds_.view_counters().local_bytes.fetch_add(n, std::memory_order_relaxed);
      return Status::ok();
    }
  }
  std::byte* dst = out.alloc(n);
  auto& c = ds_.view_counters();
  if (ring && ring->take(k, from, n, dst)) {
    c.ring_hits.fetch_add(1, std::memory_order_relaxed);
    return Status::ok();
  }
  c.backend_reads.fetch_add(1, std::memory_order_relaxed);
  return ds_.fetcher().read(begin, std::span<std::byte>(dst, n));  // a peer's memory or the backend
}

bool EpochView::resident(uint64_t k) const {
  const auto& m = ds_.manifest();
  const uint64_t s = sample_at(k);
  if (cache::RoundPipeline* pipe = ds_.round_pipeline()) return pipe->is_ready(key_.epoch, order_->round_of(position(k)));
  const auto& b = ds_.buffer();
  const uint64_t begin = m.sample_data_offset(s), len = m.sample(s).length;
  if (len == 0) return true;
  if (begin < b.range_begin() || begin + len > b.range_end()) return false;  // another node's stripe
  for (uint64_t e = b.extent_of(begin); e <= b.extent_of(begin + len - 1); ++e)
    if (b.state(e) != cache::ExtentState::resident) return false;
  return true;
}

std::shared_ptr<cache::ReadRing> EpochView::make_ring() const {
  const size_t slot = ds_.ring_slot_bytes();
  const size_t slots = std::clamp<size_t>((8u << 20) / std::max<size_t>(slot, 1), 8, 256);
  auto self = shared_from_this();  // the ring's callbacks keep the view alive
  auto ring = std::make_shared<cache::ReadRing>(
      slots, slot, count_,
      [self](uint64_t k, std::byte* dst, size_t cap, size_t& len) -> Status {
        len = self->sample_length(k);
        if (len > cap) return Status(EFBIG, "sample larger than a ring slot");
        const auto& m = self->ds_.manifest();
        return self->ds_.fetcher().read(m.sample_data_offset(self->sample_at(k)), std::span<std::byte>(dst, len));
      },
      [self](uint64_t k) { return !self->resident(k); });
  // In a cluster, samples of other stripes come from peers: batch them, so
  // that a prefetch thread keeps several gets in flight (a get's latency is
  // mostly the round trip, not the bytes). Alone, batching would only delay
  // the first sample of a batch behind the backend reads of the others.
  if (ds_.fetcher().stripes().nodes() > 1) {
    const size_t limit = std::clamp<size_t>((4u << 20) / std::max<size_t>(slot, 1), 2, 32);
    ring->set_batch(
        [self](std::span<cache::ReadRing::BatchItem> items) {
          const auto& m = self->ds_.manifest();
          std::vector<cache::ReadRequest> reqs(items.size());
          for (size_t i = 0; i < items.size(); ++i) {
            items[i].len = self->sample_length(items[i].k);
            if (items[i].len > items[i].capacity) items[i].len = 0;  // cannot happen: slots fit the largest sample
            reqs[i].offset = m.sample_data_offset(self->sample_at(items[i].k));
            reqs[i].dst = std::span<std::byte>(items[i].dst, items[i].len);
          }
          self->ds_.fetcher().read_many(reqs);
          for (size_t i = 0; i < items.size(); ++i) items[i].status = reqs[i].status;
        },
        limit);
  }
  ds_.prefetcher().add(ring);
  return ring;
}

Status EpochView::read_tar(uint64_t offset, uint64_t size, ReplyGather& out, cache::ReadRing* ring,
                           const MemberOrder* served) const {
  // Member j of the stream is planned position k_of(j) and starts at begin[j]:
  // the planned order itself, or an opportunistic stream's served order.
  const std::vector<uint64_t>& begin = served ? served->begin : member_begin_;
  auto k_of = [&](uint64_t j) { return served ? served->planned[j] : j; };
  const uint64_t total = tar_size();
  if (offset >= total) return Status::ok();
  uint64_t end = std::min(total, offset + size);
  uint64_t pos = offset;
  // The member holding `pos`: O(log n), so a seek anywhere is cheap.
  uint64_t j = static_cast<uint64_t>(std::upper_bound(begin.begin(), begin.end(), pos) - begin.begin()) - 1;
  if (ring && !served) {  // an opportunistic stream advances its ring itself
    ring->advance(k_of(std::min(j, count_ ? count_ - 1 : 0)));
    ds_.prefetcher().wake();
  }
  std::byte header[4096];
  while (pos < end && j < count_) {
    const uint64_t k = k_of(j);
    const uint64_t mb = begin[j];
    const std::string name = member_name(k);
    const uint64_t hb = tar_header_bytes(name), len = sample_length(k);
    const uint64_t data_begin = mb + hb, data_end = data_begin + len, member_end = mb + tar_member_bytes(name, len);
    if (pos < data_begin) {  // header bytes, generated
      std::vector<std::byte> big;
      std::byte* h = header;
      if (hb > sizeof header) {
        big.resize(hb);
        h = big.data();
      }
      const auto& m = ds_.manifest();
      write_tar_header(name, len, m.file_mtime_ns(m.sample(sample_at(k)).file) / 1000000000, 0444, h);
      const uint64_t n = std::min(end, data_begin) - pos;
      out.add_copy(h + (pos - mb), n);
      pos += n;
    }
    if (pos < end && pos < data_end) {  // sample bytes
      const uint64_t n = std::min(end, data_end) - pos;
      DLFS_RETURN_IF_ERROR(add_sample(k, pos - data_begin, n, out, ring));
      pos += n;
    }
    if (pos < end && pos < member_end) {  // padding to 512
      const uint64_t n = std::min(end, member_end) - pos;
      out.add_ref(kZeros, n);
      pos += n;
    }
    if (pos >= member_end) ++j;
  }
  while (pos < end) {  // the two zero blocks that end the archive
    const uint64_t n = std::min<uint64_t>(end - pos, kTarBlock);
    out.add_ref(kZeros, n);
    pos += n;
  }
  return Status::ok();
}

Status EpochView::read_bin(uint64_t offset, uint64_t size, ReplyGather& out, cache::ReadRing* ring) const {
  const uint64_t rec = ds_.manifest().fixed_record_size();
  const uint64_t end = std::min(bin_size(), offset + size);
  if (ring && offset < end) {
    ring->advance(offset / rec);
    ds_.prefetcher().wake();
  }
  for (uint64_t pos = offset; pos < end;) {
    const uint64_t k = pos / rec, in = pos % rec;
    const uint64_t n = std::min(end - pos, rec - in);
    DLFS_RETURN_IF_ERROR(add_sample(k, in, n, out, ring));
    pos += n;
  }
  return Status::ok();
}

Status EpochView::read_entry(uint64_t k, uint64_t offset, uint64_t size, ReplyGather& out) const {
  const uint64_t len = sample_length(k);
  if (offset >= len) return Status::ok();
  return add_sample(k, offset, std::min(size, len - offset), out);
}

std::string EpochView::index_text() const {
  const plan::Planner& p = ds_.planner();
  std::string t = "# dlfs view dataset=" + ds_.name() + " epoch=" + std::to_string(key_.epoch) +
                  " world_size=" + std::to_string(key_.world_size) + " rank=" + std::to_string(key_.rank) +
                  " samples=" + std::to_string(count_) + " seed=" + std::to_string(p.seed()) +
                  " remainder=" + p.remainder_name() + " order=" + p.order_name() + " rounds=" +
                  std::to_string(order_->rounds.size()) + " shuffle_ratio=" + fmt_double(p.ratio()) +
                  " rl=" + fmt_double(p.randomization_level()) + "\n";
  t.reserve(t.size() + count_ * 48);
  for (uint64_t k = 0; k < count_; ++k) {
    t += std::to_string(k);
    t += '\t';
    t += std::to_string(sample_at(k));
    t += '\t';
    t += std::to_string(tar_data_offset(k));
    t += '\t';
    t += std::to_string(sample_length(k));
    t += '\t';
    t += member_name(k);
    t += '\n';
  }
  return t;
}

const std::vector<std::string>& EpochView::xattr_names() {
  static const std::vector<std::string> names = {
      "user.dlfs.seed",    "user.dlfs.epoch",  "user.dlfs.world_size", "user.dlfs.rank",
      "user.dlfs.samples", "user.dlfs.remainder", "user.dlfs.order",   "user.dlfs.rounds",
      "user.dlfs.shuffle_ratio", "user.dlfs.rl"};
  return names;
}

std::string EpochView::xattr(const std::string& name) const {
  const plan::Planner& p = ds_.planner();
  if (name == "user.dlfs.seed") return std::to_string(p.seed());
  if (name == "user.dlfs.epoch") return std::to_string(key_.epoch);
  if (name == "user.dlfs.world_size") return std::to_string(key_.world_size);
  if (name == "user.dlfs.rank") return std::to_string(key_.rank);
  if (name == "user.dlfs.samples") return std::to_string(count_);
  if (name == "user.dlfs.remainder") return p.remainder_name();
  if (name == "user.dlfs.order") return p.order_name();
  if (name == "user.dlfs.rounds") return std::to_string(order_->rounds.size());
  if (name == "user.dlfs.shuffle_ratio") return fmt_double(p.ratio());
  if (name == "user.dlfs.rl") return fmt_double(p.randomization_level());
  return "";
}

}  // namespace dlfs::fs
