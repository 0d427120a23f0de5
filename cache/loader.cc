#include "cache/loader.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "cache/thread_priority.h"
#include "common/units.h"

namespace dlfs::cache {
namespace {

std::string format_seconds(double s) {
  char buf[32];
  if (s < 1) std::snprintf(buf, sizeof buf, "%.2fs", s);
  else if (s < 10) std::snprintf(buf, sizeof buf, "%.1fs", s);
  else if (s < 60) std::snprintf(buf, sizeof buf, "%.0fs", s);
  else if (s < 3600) std::snprintf(buf, sizeof buf, "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  else std::snprintf(buf, sizeof buf, "%dh%02dm", static_cast<int>(s) / 3600, static_cast<int>(s) / 60 % 60);
  return buf;
}

}  // namespace

// How long a loader thread that walked every extent sleeps between looks at stop_ while readers
// finish the extents they claimed.
constexpr auto kSettlePoll = std::chrono::milliseconds(50);
// How long a loader thread waits before looking again while the stager reads ahead for readers.
constexpr auto kStagePause = std::chrono::milliseconds(5);

Loader::Loader(StorageBuffer& buffer, const BackendReader& backend, LoaderOptions options)
    : buffer_(buffer), options_(std::move(options)) {
  options_.threads = std::max(1u, options_.threads);
  options_.read_size = std::max<uint64_t>(1, options_.read_size);
  if (options_.label.empty()) options_.label = "dataset";
  fill_ = std::make_shared<const ExtentFill>(buffer_, backend, options_.read_size, options_.label,
                                             options_.backend_cache);
}

Loader::~Loader() { stop(); }

void Loader::start() {
  if (started_.load(std::memory_order_relaxed)) return;
  start_time_ = std::chrono::steady_clock::now();
  progress_ns_.store(ReaderMisses::now_ns());  // the floor counts from the start
  const uint64_t total = buffer_.cacheable_extents();
  const unsigned n = static_cast<unsigned>(std::min<uint64_t>(options_.threads, total));
  running_.store(n);
  started_.store(true, std::memory_order_release);
  if (n == 0) {  // nothing fits the budget (or an empty dataset): done at once
    finish_ns_.store(1);
    return;
  }
  spdlog::info("[{}] loading {} in {} extents of {} with {} threads", options_.label,
               format_size(buffer_.capacity_bytes()), total, format_size(buffer_.extent_size()), n);
  if (options_.readers_load) buffer_.set_fill_on_read(fill_);  // a reader loads the absent extent it needs
  // Readers that miss hand in what they read; the loader then reads only the rest.
  buffer_.set_accepts_given(true);
  if (options_.stage_files > 0) {
    stager_ = std::make_unique<LoadStager>(
        buffer_, fill_->backend(),
        StagerOptions{.files_in_flight = options_.stage_files, .miss_window = options_.yield.miss_window,
                      .label = options_.label},
        [this] { return next_extent_.load(std::memory_order_relaxed); });
    stager_->start();
  }
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { run_worker(); });
  if (options_.log_interval_s > 0) monitor_ = std::thread([this] { run_monitor(); });
}

void Loader::stop() {
  // Readers stop claiming extents; one already loading finishes (it holds the fill).
  if (buffer_.fill_on_read() == fill_) buffer_.set_fill_on_read(nullptr);
  buffer_.set_accepts_given(false);
  stop_.store(true);
  if (stager_) stager_->stop();
  { std::lock_guard lk(mu_); }  // a waiter is either before its check or asleep
  cv_.notify_all();
  for (auto& t : threads_)
    if (t.joinable()) t.join();
  if (monitor_.joinable()) monitor_.join();
}

void Loader::wait() {
  std::unique_lock lk(mu_);
  cv_.wait(lk, [this] { return running_.load() == 0; });
}

LoadProgress Loader::progress() const {
  LoadProgress p;
  p.bytes_total = buffer_.capacity_bytes();
  p.extents_total = buffer_.cacheable_extents();
  // The buffer's counts: extents loaded by readers (or an earlier loader) count too.
  p.extents_failed = buffer_.failed_extents();
  p.extents_background = background_extents_.load(std::memory_order_relaxed);
  p.extents_staged = buffer_.staged_extents();
  p.bytes_given = buffer_.given_bytes();
  p.extents_loaded = buffer_.resident_extents();
  p.bytes_loaded = buffer_.resident_bytes();
  p.done = buffer_.settled_extents() >= p.extents_total;
  if (started_.load(std::memory_order_acquire)) {
    int64_t ns = finish_ns_.load();
    if (ns == 0)
      ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_time_)
               .count();
    p.elapsed_s = static_cast<double>(ns) / 1e9;
  }
  if (p.elapsed_s > 0) p.rate_bps = static_cast<double>(p.bytes_loaded) / p.elapsed_s;
  // Failed bytes are not "remaining": nobody will load them.
  uint64_t settled = p.bytes_loaded + buffer_.failed_bytes();
  uint64_t remaining = p.bytes_total > settled ? p.bytes_total - settled : 0;
  if (!p.done && p.rate_bps > 0) p.eta_s = static_cast<double>(remaining) / p.rate_bps;
  return p;
}

void Loader::run_worker() {
  pthread_setname_np(pthread_self(), "dlfs-load");
  const uint64_t total = buffer_.cacheable_extents();
  ThreadPriority priority;
  // Extents are handed out in byte-space order, so the backend sees nearly
  // sequential reads even with several threads.
  while (!stop_.load(std::memory_order_relaxed)) {
    const bool background =
        options_.yield.background(buffer_.reader_misses(), ReaderMisses::now_ns(), progress_ns_);
    // The stager reads ahead for the readers: loading beside it (even in the
    // background) would spend the CPU and fresh memory they need; the floor
    // (background() false while readers miss) still loads.
    if (background && stager_ && stager_->active()) {
      std::this_thread::sleep_for(kStagePause);
      continue;
    }
    priority.set_background(background);
    uint64_t e = next_extent_.fetch_add(1, std::memory_order_relaxed);
    if (e >= total) break;
    // A staged extent is in the page cache: copy it from there.
    const CacheUse use = options_.backend_cache == CacheUse::drop && buffer_.staged(e) ? CacheUse::drop_buffered
                                                                                      : options_.backend_cache;
    // Claimed already (by a reader, or loaded before this loader ran): the
    // buffer counts it when it settles.
    if (fill_->claim_and_load(e, use)) {
      progress_ns_.store(ReaderMisses::now_ns(), std::memory_order_relaxed);
      if (priority.background()) background_extents_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  priority.set_background(false);
  // Then wait for the extents readers claimed, so that wait() and the final
  // line mean "every extent settled" (or stopped).
  while (!stop_.load(std::memory_order_relaxed) && !buffer_.wait_all_settled(kSettlePoll)) {
  }
  if (running_.fetch_sub(1) == 1) {  // last one out
    buffer_.set_accepts_given(false);   // every extent is settled: no loader takes them any more
    finish_ns_.store(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_time_)
               .count()));
    log_final();
    { std::lock_guard lk(mu_); }
    cv_.notify_all();
  }
}

void Loader::run_monitor() {
  pthread_setname_np(pthread_self(), "dlfs-load-log");
  const auto period = std::chrono::duration<double>(options_.log_interval_s);
  std::unique_lock lk(mu_);
  while (!cv_.wait_for(lk, period, [this] { return stop_.load() || running_.load() == 0; })) {
    LoadProgress p = progress();
    lk.unlock();
    double pct = p.bytes_total ? 100.0 * static_cast<double>(p.bytes_loaded) / static_cast<double>(p.bytes_total) : 100;
    spdlog::info("[{}] loaded {} of {} ({:.0f}%) at {}, ETA {}{}", options_.label, format_size(p.bytes_loaded),
                 format_size(p.bytes_total), pct, format_rate(p.rate_bps), format_seconds(p.eta_s),
                 p.extents_failed ? fmt::format(", {} failed extents", p.extents_failed) : std::string());
    lk.lock();
  }
}

void Loader::log_final() {
  LoadProgress p = progress();
  if (p.done) {
    auto level = p.extents_failed ? spdlog::level::warn : spdlog::level::info;
    spdlog::log(level,
                "[{}] load done: {} in {} ({}), {} failed extents, {} loaded yielding to readers, {} staged for them, "
                "{} given by readers that missed",
                options_.label, format_size(p.bytes_loaded), format_seconds(p.elapsed_s), format_rate(p.rate_bps),
                p.extents_failed, p.extents_background, p.extents_staged, format_size(p.bytes_given));
  } else {
    spdlog::info("[{}] load stopped: {} of {} in {} ({}), {} failed extents", options_.label,
                 format_size(p.bytes_loaded), format_size(p.bytes_total), format_seconds(p.elapsed_s),
                 format_rate(p.rate_bps), p.extents_failed);
  }
}

}  // namespace dlfs::cache
