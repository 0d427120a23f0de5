#include "fs/views/view_stream.h"

#include <algorithm>
#include <vector>

#include "fs/dataset/dataset.h"

namespace dlfs::fs {

std::shared_ptr<cache::ReadRing> make_read_ring(const std::shared_ptr<const EpochView>& view) {
  const Dataset& ds = view->dataset();
  if (!ds.planner().config().readahead) return nullptr;
  const size_t slot = ds.ring_slot_bytes();
  const size_t slots = std::clamp<size_t>((8u << 20) / std::max<size_t>(slot, 1), 8, 256);
  std::shared_ptr<const EpochView> v = view;  // the ring's callbacks keep the view alive
  auto ring = std::make_shared<cache::ReadRing>(
      slots, slot, view->count(),
      [v](uint64_t k, std::byte* dst, size_t cap, size_t& len) -> Status {
        len = v->sample_length(k);
        if (len > cap) return Status(EFBIG, "sample larger than a ring slot");
        return v->dataset().reader().fetch_sample(v->sample_at(k), std::span<std::byte>(dst, len));
      },
      [v](uint64_t k) { return !v->in_memory(k); });
  // In a cluster, samples of other stripes come from peers: batch them, so
  // that a prefetch thread keeps several gets in flight (a get's latency is
  // mostly the round trip, not the bytes). Alone, batching would only delay
  // the first sample of a batch behind the backend reads of the others.
  if (ds.fetcher().stripes().nodes() > 1) {
    const size_t limit = std::clamp<size_t>((4u << 20) / std::max<size_t>(slot, 1), 2, 32);
    ring->set_batch(
        [v](std::span<cache::ReadRing::BatchItem> items) {
          const auto& m = v->dataset().manifest();
          std::vector<cache::ReadRequest> reqs(items.size());
          for (size_t i = 0; i < items.size(); ++i) {
            items[i].len = v->sample_length(items[i].k);
            if (items[i].len > items[i].capacity) items[i].len = 0;  // cannot happen: slots fit the largest sample
            reqs[i].offset = m.sample_data_offset(v->sample_at(items[i].k));
            reqs[i].dst = std::span<std::byte>(items[i].dst, items[i].len);
          }
          v->dataset().reader().fetch_samples(reqs);
          for (size_t i = 0; i < items.size(); ++i) items[i].status = reqs[i].status;
        },
        limit);
  }
  ds.prefetcher().add(ring);
  return ring;
}

void advance_ring(const EpochView& view, cache::ReadRing* ring, uint64_t k) {
  if (!ring) return;
  ring->advance(k);
  view.dataset().prefetcher().wake();
}

}  // namespace dlfs::fs
