// dlfs-ctl(8): a short hand-written text around dlfs-ctl's global options and
// commands, which come from its CLI11 app (dlfs_ctl.cc, lmdb_cli.cc,
// tfrecord_cli.cc, tar_cli.cc): the page lists what --help and each
// command's --help list. `dlfs-ctl --man-page` prints it; the build installs
// it (docs/man/meson.build).
#pragma once

#include <string>
#include <string_view>

namespace CLI {
class App;
}  // namespace CLI

namespace dlfs::ctl {

std::string ctl_man_page(const CLI::App& app, std::string_view version);

}  // namespace dlfs::ctl
