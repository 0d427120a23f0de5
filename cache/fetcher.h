// Fetcher: where bytes that are not in this node's memory come from.
//
// A range of the byte space is split by stripe owner (StripeMap). A part
// owned by another node is read from that node's memory with a one-sided get
// when the cluster says it can (peer up, extents resident); otherwise, and on
// any failure or timeout of the get, from the backend. Either way the bytes
// are the same: a peer's fault costs speed, never correctness. A backend
// read of this node's own bytes that fit its memory (a miss while loading)
// leaves no copy in the page cache (CacheUse::drop): the loader holds them
// soon, and fresh page-cache memory is what reads while loading wait for on
// a VM that hands free memory back to its host. Those bytes are given to the
// buffer (StorageBuffer::give), so the loader does not read them again.
//
// Thread safety: read() may be called from any thread; set_remote() is called
// once, before reads start, or with a remote that outlives the Fetcher.
#pragma once

#include <atomic>
#include <cstdint>
#include <span>

#include "cache/backend_reader.h"
#include "cache/storage_buffer.h"
#include "cache/stripe_map.h"
#include "common/status.h"

namespace dlfs::cache {

// Implemented by the transport layer (transport/cluster): reads [offset,
// offset + dst.size()) from the memory of `owner`. Returns false when it
// cannot (peer down, not resident there, a failed or late get); dst is then
// unspecified and the caller reads the backend.
class RemoteFetch {
 public:
  virtual ~RemoteFetch() = default;
  virtual bool fetch(uint32_t owner, uint64_t offset, std::span<std::byte> dst) = 0;

  // Several reads from one owner with all their gets in flight at once; sets
  // each piece's `ok`. The default does them one by one.
  struct Piece {
    uint64_t offset = 0;
    std::span<std::byte> dst;
    bool ok = false;
  };
  virtual void fetch_many(uint32_t owner, std::span<Piece> pieces) {
    for (Piece& p : pieces) p.ok = fetch(owner, p.offset, p.dst);
  }
};

// One read of a batch (Fetcher::read_many).
struct ReadRequest {
  uint64_t offset = 0;
  std::span<std::byte> dst;
  Status status;
};

struct FetchCounters {
  std::atomic<uint64_t> local_bytes{0};  // parts of fetches found in this node's memory
  std::atomic<uint64_t> remote_bytes{0};
  std::atomic<uint64_t> remote_gets{0};
  std::atomic<uint64_t> remote_fallbacks{0};  // remote parts that went to the backend instead
  std::atomic<uint64_t> backend_bytes{0};
  std::atomic<uint64_t> backend_reads{0};
};

class Fetcher {
 public:
  Fetcher(const BackendReader& backend, StripeMap stripes, uint32_t self)
      : backend_(backend), stripes_(stripes), self_(self) {}

  void set_remote(RemoteFetch* remote) { remote_.store(remote, std::memory_order_release); }
  // This node's stripe: parts of a read that fall in it are copied from its
  // resident extents (a sample that straddles the stripe's edge).
  void set_local(const StorageBuffer* local) { local_ = local; }
  const StripeMap& stripes() const { return stripes_; }
  uint32_t self() const { return self_; }

  // Reads [offset, offset + dst.size()) from peers or the backend. Errors are
  // the backend's (a file named); peers never cause one.
  Status read(uint64_t offset, std::span<std::byte> dst) const;
  // A batch: the parts owned by peers are fetched with every get of an owner
  // in flight at once (prefetching a window of samples), the rest as read()
  // does. Each request gets its own status.
  void read_many(std::span<ReadRequest> requests) const;

  const FetchCounters& counters() const { return counters_; }

 private:
  bool read_local(uint64_t offset, std::span<std::byte> dst) const;
  // Counts a backend read, and gives this node's bytes in it to the buffer.
  void counted_backend_read(uint32_t owner, uint64_t offset, std::span<const std::byte> bytes) const;
  // How a backend read of this node's bytes at `offset` treats the page cache.
  CacheUse backend_cache_use(uint64_t offset) const;
  const BackendReader& backend_;
  const StripeMap stripes_;
  const uint32_t self_;
  std::atomic<RemoteFetch*> remote_{nullptr};
  const StorageBuffer* local_ = nullptr;
  mutable FetchCounters counters_;
};

}  // namespace dlfs::cache
