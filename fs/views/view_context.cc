#include "fs/views/view_context.h"

namespace dlfs::fs {

Result<std::shared_ptr<const ResumeOrder>> ViewContext::remainder(uint32_t epoch, uint64_t samples,
                                                                  plan::Remainder rem) const {
  if (!resumed()) return Status(EINVAL, "not a resumed epoch");
  std::lock_guard lk(mu_);  // the views of one directory are built together: compute once
  if (cached_epoch_ == epoch)
    if (auto r = cached_.lock()) return r;
  auto r = remaining_positions(samples, resume_world_, consumed_, rem);
  if (!r) return r.status();
  cached_epoch_ = epoch;
  cached_ = *r;
  return *r;
}

}  // namespace dlfs::fs
