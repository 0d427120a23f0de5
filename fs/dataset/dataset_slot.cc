#include "fs/dataset/dataset_slot.h"

#include "fs/dataset/dataset.h"

namespace dlfs::fs {

DatasetSlot::DatasetSlot(std::string name, std::string backend, std::string format, int64_t root_mtime_ns)
    : name_(std::move(name)), backend_(std::move(backend)), format_(std::move(format)), root_mtime_ns_(root_mtime_ns) {}

DatasetSlot::~DatasetSlot() = default;

std::unique_ptr<DatasetSlot> DatasetSlot::borrowing(Dataset& ds) {
  auto slot = std::make_unique<DatasetSlot>(ds.name(), ds.config().backend, ds.config().format.format,
                                            ds.root_mtime_ns());
  slot->dataset_ = &ds;
  slot->state_.store(State::ready, std::memory_order_release);
  return slot;
}

Status DatasetSlot::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

Result<Dataset*> DatasetSlot::wait() const {
  if (Dataset* ds = get()) return ds;
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return settled(); });
  if (state() == State::ready) return dataset_;
  return error_;
}

bool DatasetSlot::park(std::function<void()> replay) const {
  if (settled()) return false;
  std::lock_guard lock(mu_);
  if (settled()) return false;  // settled meanwhile: settle() has taken the list already
  parked_.push_back(std::move(replay));
  return true;
}

size_t DatasetSlot::parked() const {
  std::lock_guard lock(mu_);
  return parked_.size();
}

void DatasetSlot::set_joining() {
  std::lock_guard lock(mu_);
  if (!settled()) state_.store(State::joining, std::memory_order_release);
}

void DatasetSlot::publish(std::unique_ptr<Dataset> ds) {
  {
    std::lock_guard lock(mu_);
    if (settled()) return;
    owned_ = std::move(ds);
    dataset_ = owned_.get();
  }
  settle(State::ready);
}

void DatasetSlot::fail(Status why) {
  {
    std::lock_guard lock(mu_);
    if (settled()) return;
    // EIO for every request; the message names the dataset once.
    const std::string named = "dataset '" + name_ + "'";
    error_ = Status(EIO, why.message().find(named) == std::string::npos ? named + ": " + why.message() : why.message());
  }
  settle(State::failed);
}

void DatasetSlot::settle(State to) {
  std::vector<std::function<void()>> replays;
  {
    std::lock_guard lock(mu_);
    state_.store(to, std::memory_order_release);
    replays.swap(parked_);
  }
  cv_.notify_all();
  // Outside the lock: a replay answers its request through Namespace, which
  // reads the slot again.
  for (auto& r : replays) r();
}

const char* state_name(DatasetSlot::State s) {
  switch (s) {
    case DatasetSlot::State::scanning: return "scanning";
    case DatasetSlot::State::joining: return "joining";
    case DatasetSlot::State::ready: return "ready";
    case DatasetSlot::State::failed: return "failed";
  }
  return "?";
}

}  // namespace dlfs::fs
