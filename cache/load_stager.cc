#include "cache/load_stager.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <utility>

namespace dlfs::cache {

// How long the stager sleeps between looks while nobody misses.
constexpr auto kIdlePoll = std::chrono::milliseconds(2);

// Files advised, oldest first, each with the offset of its piece's last
// byte: a one-byte read there returns once the read-ahead has brought it in
// (the page cache's own wait), which bounds the requests in flight.
struct LoadStager::InFlight {
  std::deque<std::pair<UniqueFd, uint64_t>> files;
  void wait_oldest() {
    char byte;
    // A failure only means this piece is not known to be in; its extent is
    // still read (and checked) by the loader as usual.
    (void)::pread(files.front().first.get(), &byte, 1, static_cast<off_t>(files.front().second));
    files.pop_front();
  }
};

LoadStager::LoadStager(StorageBuffer& buffer, const BackendReader& backend, StagerOptions options,
                       std::function<uint64_t()> loader_cursor)
    : buffer_(buffer), backend_(backend), options_(std::move(options)), loader_cursor_(std::move(loader_cursor)) {}

LoadStager::~LoadStager() { stop(); }

void LoadStager::start() {
  if (thread_.joinable() || options_.files_in_flight == 0) return;
  if (options_.max_ahead_bytes == 0) {
    const long pages = ::sysconf(_SC_AVPHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    options_.max_ahead_bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4
                                                     : 1ull << 30;
  }
  thread_ = std::thread([this] { run(); });
}

void LoadStager::stop() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
  active_.store(false, std::memory_order_relaxed);
}

void LoadStager::run() {
  pthread_setname_np(pthread_self(), "dlfs-stage");
  const uint64_t total = buffer_.cacheable_extents();
  InFlight inflight;
  uint64_t next = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    // The loader's cursor moves on its own (and by its floor while this
    // stages): never stage what it has handed out already.
    const uint64_t cursor = loader_cursor_();
    next = std::max(next, cursor);
    while (next < total && buffer_.state(next) != ExtentState::absent) ++next;
    if (next >= total) break;
    const bool too_far = cursor < total && buffer_.extent_begin(next) - buffer_.extent_begin(cursor) >=
                                               options_.max_ahead_bytes;
    if (too_far || !buffer_.reader_misses().recent(options_.miss_window)) {
      active_.store(false, std::memory_order_relaxed);
      std::this_thread::sleep_for(kIdlePoll);
      continue;
    }
    active_.store(true, std::memory_order_relaxed);
    stage_extent(next, inflight);
    buffer_.mark_staged(next);
    ++next;
  }
  active_.store(false, std::memory_order_relaxed);
  if (buffer_.staged_extents() > 0)
    spdlog::debug("[{}] staging over: {} extents read ahead for the loader", options_.label, buffer_.staged_extents());
}

void LoadStager::stage_extent(uint64_t e, InFlight& inflight) {
  const uint64_t begin = buffer_.extent_begin(e);
  backend_.manifest().for_each_file_in(begin, begin + buffer_.extent_length(e), [&](uint32_t f, uint64_t b,
                                                                                    uint64_t end) {
    if (stop_.load(std::memory_order_relaxed)) return;
    // A file changed since the scan is refused here as everywhere: nothing
    // to stage, and its reads fail as they would anyway.
    auto fd = backend_.open_checked(f);
    if (!fd) return;
    const uint64_t in_file = b - backend_.manifest().file_data_offset(f);
    // Advice: a failure changes nothing but speed.
    (void)::posix_fadvise(fd->get(), static_cast<off_t>(in_file), static_cast<off_t>(end - b), POSIX_FADV_WILLNEED);
    inflight.files.emplace_back(std::move(fd).value(), in_file + (end - b) - 1);
    while (inflight.files.size() > options_.files_in_flight) inflight.wait_oldest();
  });
}

}  // namespace dlfs::cache
