// dlfsd(8): a short hand-written text around dlfsd's options, which come from
// its CLI11 app (main.cc's own flags and the config key table's, added by
// add_config_flags): the page lists what --help lists. `dlfsd --man-page 8`
// prints it; the build installs it (docs/man/meson.build). Compiled into
// dlfsd only, as main.cc: it needs CLI11.
#pragma once

#include <string>
#include <string_view>

namespace CLI {
class App;
}  // namespace CLI

namespace dlfs::fs {

std::string dlfsd_man_page(const CLI::App& app, std::string_view version);

}  // namespace dlfs::fs
