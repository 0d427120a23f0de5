// Logging set-up. Every component logs through spdlog's default logger, which
// main() configures once; nothing else touches logger state.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "common/status.h"

namespace dlfs {

// level: trace, debug, info, warn, error, off. An unknown name is an error.
Status init_logging(const std::string& level, const std::string& program);

}  // namespace dlfs
