#include "tools/ctl/ctl_man.h"

#include <CLI/CLI.hpp>

#include "common/cli_man.h"
#include "common/roff.h"

namespace dlfs::ctl {
namespace {

constexpr const char* kDescription =
    "dlfs-ctl administers the DLFS daemon, dlfsd(8), on this machine: its status and statistics, a check of its "
    "memory against the backend, the epoch plan, waiting until it serves, and unmounting it. It talks to dlfsd over "
    "the daemon's Unix control socket (mode 0600: root or the daemon's user may use it) and knows nothing of its "
    "internals. The socket is the one given with --socket, else the one of the daemon mounted at --mount, else the "
    "only socket in /run/dlfs (as root; /tmp/dlfs-UID or $XDG_RUNTIME_DIR/dlfs for other users).\n"
    "\n"
    "The lmdb, tfrecord and tar commands need no daemon: they build, index, show and verify dataset files "
    "(LMDB environments and their sidecars, TFRecord files and their index files, WebDataset tar shards).";

constexpr const char* kExitStatus =
    "0 on success. 1 when the command failed (verify found a mismatch, wait-ready timed out or a dataset "
    "failed, the daemon answered with an error). 2 for a usage error or when no daemon answers on the socket.";

constexpr const char* kExamples =
    "dlfs-ctl status                   # the only dlfsd here\n"
    "dlfs-ctl --mount /mnt/dlfs stats --json\n"
    "dlfs-ctl --socket /run/dlfs/imagenet.sock wait-ready\n"
    "dlfs-ctl plan --dataset imagenet --epoch 3 --rank 5\n"
    "dlfs-ctl --mount /mnt/dlfs --timeout 20 unmount\n"
    "dlfs-ctl lmdb sidecar /data/ilsvrc12_train_lmdb\n";

}  // namespace

std::string ctl_man_page(const CLI::App& app, std::string_view version) {
  roff::Page page("dlfs-ctl", 8, "DLFS " + std::string(version), "DLFS Manual");
  page.name_line("dlfs-ctl", "administer the DLFS daemon (dlfsd) and check dataset files");
  page.heading("SYNOPSIS");
  page.roff_line(roff::bold("dlfs-ctl") + " [" + roff::italic("OPTIONS") + "] " + roff::italic("COMMAND") + " [" +
                 roff::italic("COMMAND OPTIONS") + "]");
  page.heading("DESCRIPTION");
  page.para(kDescription);
  page.heading("OPTIONS");
  page.para("These go before or after the command.");
  roff::add_options(page, app, true);
  page.heading("COMMANDS");
  roff::add_subcommands(page, app);
  page.heading("EXIT STATUS");
  page.para(kExitStatus);
  page.heading("FILES");
  page.para("/run/dlfs/*.sock: the control sockets of the dlfsd processes run as root; /run/dlfs/NAME.sock is "
            "the service instance dlfsd@NAME's.");
  page.heading("EXAMPLES");
  page.example(kExamples);
  page.heading("SEE ALSO");
  page.roff_line(roff::bold("dlfsd") + "(8), " + roff::bold("dlfs.toml") + "(5); " +
                 roff::escape("docs/stats.md, docs/lmdb-sidecar.md and docs/webdataset.md (in /usr/share/doc/dlfs "
                              "when installed from the Debian package)."));
  return page.str();
}

}  // namespace dlfs::ctl
