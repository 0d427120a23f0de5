// dlfs.toml(5), the manual page of dlfsd's config file: a short hand-written
// text around the config key table (config_keys.h), the same table that makes
// the TOML parsing, dlfsd's flags and docs/configuration.md, so that the
// page lists every key with its type, default, flag and meaning.
// `dlfsd --man-page 5` prints it; the build installs it (docs/man/meson.build).
#pragma once

#include <string>
#include <string_view>

namespace dlfs::fs {

std::string config_man_page(std::string_view version);

}  // namespace dlfs::fs
