#include "cache/loader.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>

#include "common/units.h"

namespace dlfs::cache {
namespace {

// Failed extents are logged one by one up to this many, then only counted:
// a vanished directory of a million files must not flood the log.
constexpr unsigned kMaxFailureLines = 5;

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

Loader::Loader(StorageBuffer& buffer, const BackendReader& backend, LoaderOptions options)
    : buffer_(buffer), backend_(backend), options_(std::move(options)) {
  options_.threads = std::max(1u, options_.threads);
  options_.read_size = std::max<uint64_t>(1, options_.read_size);
  if (options_.label.empty()) options_.label = "dataset";
}

Loader::~Loader() { stop(); }

void Loader::start() {
  if (started_.load(std::memory_order_relaxed)) return;
  start_time_ = std::chrono::steady_clock::now();
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
  for (unsigned i = 0; i < n; ++i) threads_.emplace_back([this] { run_worker(); });
  if (options_.log_interval_s > 0) monitor_ = std::thread([this] { run_monitor(); });
}

void Loader::stop() {
  stop_.store(true);
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
  p.bytes_loaded = bytes_loaded_.load(std::memory_order_relaxed);
  p.extents_loaded = extents_loaded_.load(std::memory_order_relaxed);
  p.extents_failed = extents_failed_.load(std::memory_order_relaxed);
  p.done = p.extents_loaded + p.extents_failed == p.extents_total;
  if (started_.load(std::memory_order_acquire)) {
    int64_t ns = finish_ns_.load();
    if (ns == 0)
      ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_time_)
               .count();
    p.elapsed_s = static_cast<double>(ns) / 1e9;
  }
  if (p.elapsed_s > 0) p.rate_bps = static_cast<double>(p.bytes_loaded) / p.elapsed_s;
  // Failed bytes are not "remaining": nobody will load them.
  uint64_t settled = p.bytes_loaded + bytes_failed_.load(std::memory_order_relaxed);
  uint64_t remaining = p.bytes_total > settled ? p.bytes_total - settled : 0;
  if (!p.done && p.rate_bps > 0) p.eta_s = static_cast<double>(remaining) / p.rate_bps;
  return p;
}

void Loader::run_worker() {
  pthread_setname_np(pthread_self(), "dlfs-load");
  const uint64_t total = buffer_.cacheable_extents();
  // Extents are handed out in byte-space order, so the backend sees nearly
  // sequential reads even with several threads.
  while (!stop_.load(std::memory_order_relaxed)) {
    uint64_t e = next_extent_.fetch_add(1, std::memory_order_relaxed);
    if (e >= total) break;
    const uint64_t len = buffer_.extent_length(e);
    if (!buffer_.try_mark_loading(e)) {
      // Loaded before this loader ran: count it so that `done` still means
      // "every cacheable extent settled".
      ExtentState st = buffer_.state(e);
      if (st == ExtentState::resident) {
        bytes_loaded_.fetch_add(len, std::memory_order_relaxed);
        extents_loaded_.fetch_add(1, std::memory_order_relaxed);
      } else if (st == ExtentState::failed) {
        bytes_failed_.fetch_add(len, std::memory_order_relaxed);
        extents_failed_.fetch_add(1, std::memory_order_relaxed);
      }
      continue;
    }
    Status s = load_extent(e);
    if (s) {
      bytes_loaded_.fetch_add(len, std::memory_order_relaxed);
      extents_loaded_.fetch_add(1, std::memory_order_relaxed);
    } else {
      buffer_.mark_failed(e);
      bytes_failed_.fetch_add(len, std::memory_order_relaxed);
      extents_failed_.fetch_add(1, std::memory_order_relaxed);
      report_failure(e, s);
    }
  }
  if (running_.fetch_sub(1) == 1) {  // last one out
    finish_ns_.store(std::max<int64_t>(
        1, std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_time_)
               .count()));
    log_final();
    { std::lock_guard lk(mu_); }
    cv_.notify_all();
  }
}

Status Loader::load_extent(uint64_t e) {
  std::byte* dst = buffer_.extent_data(e);
  const uint64_t base = buffer_.extent_begin(e);
  const uint64_t len = buffer_.extent_length(e);
  // Straight into the mapping, at most read_size per request; the backend
  // reader splits a request that spans small files into one pread per file.
  for (uint64_t off = 0; off < len;) {
    uint64_t n = std::min(options_.read_size, len - off);
    DLFS_RETURN_IF_ERROR(backend_.read(base + off, std::span<std::byte>(dst + off, n)));
    off += n;
  }
  buffer_.mark_resident(e, extent_checksum(std::span<const std::byte>(dst, len)));
  return Status::ok();
}

void Loader::report_failure(uint64_t e, const Status& s) {
  unsigned n = failure_lines_.fetch_add(1, std::memory_order_relaxed);
  if (n < kMaxFailureLines) {
    spdlog::warn("[{}] extent {} (byte-space [{}, {})) not loaded, reads of it go to the backend: {}",
                 options_.label, e, buffer_.extent_begin(e), buffer_.extent_begin(e) + buffer_.extent_length(e),
                 s.message());
  } else if (n == kMaxFailureLines) {
    spdlog::warn("[{}] more extents failed to load; not logging each (the final line has the count)",
                 options_.label);
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
    spdlog::log(level, "[{}] load done: {} in {} ({}), {} failed extents", options_.label, format_size(p.bytes_loaded),
                format_seconds(p.elapsed_s), format_rate(p.rate_bps), p.extents_failed);
  } else {
    spdlog::info("[{}] load stopped: {} of {} in {} ({}), {} failed extents", options_.label,
                 format_size(p.bytes_loaded), format_size(p.bytes_total), format_seconds(p.elapsed_s),
                 format_rate(p.rate_bps), p.extents_failed);
  }
}

}  // namespace dlfs::cache
