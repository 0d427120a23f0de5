#include "common/status.h"

#include <cstring>

namespace dlfs {

Status Status::from_errno(int err, const std::string& what) {
  return Status(err == 0 ? EIO : err, what + ": " + std::strerror(err == 0 ? EIO : err));
}

}  // namespace dlfs
