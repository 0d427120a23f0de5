// The config file: TOML parsed into a DaemonConfig through the key table
// (fs/config/config_keys.h), and the checks of values that need no machine.
#pragma once

#include <string>

#include "common/status.h"
#include "fs/config/config.h"

namespace dlfs::fs {

// Parses a TOML file. Errors name the file, and the key or line at fault.
Result<DaemonConfig> load_config_file(const std::string& path);
// Parses TOML text (`origin` names it in errors).
Result<DaemonConfig> parse_config(const std::string& text, const std::string& origin);

// Checks values that do not depend on the machine: names unique and valid,
// every key within its range or choices (the key table), format options
// consistent. Errors name the key.
Status validate_config(const DaemonConfig& config);

}  // namespace dlfs::fs
