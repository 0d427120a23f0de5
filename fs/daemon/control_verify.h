// The `verify` command's answer for one dataset: resident memory checked
// against the backend (cache/verifier.h), with the backend files that changed
// since the scan named as such rather than counted as corruption.
#pragma once

#include <nlohmann/json.hpp>

#include "fs/daemon/control_handler.h"
#include "fs/dataset/dataset.h"

namespace dlfs::fs {

// {"name", "extents_checked", "extents_skipped", "extents_changed",
//  "bytes_checked", "seconds", "ok", "mismatches": [{"extent", "data_offset",
//  "length", "what"}], "changed_files": {"count", "files": [{"path", "what"}]}}.
// Logs what it found (an error per mismatch kind, a warning for changed files).
nlohmann::json verify_dataset_json(const Dataset& d, const ProgressFn& progress);

}  // namespace dlfs::fs
