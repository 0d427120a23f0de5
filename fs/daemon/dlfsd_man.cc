#include "fs/daemon/dlfsd_man.h"

#include <CLI/CLI.hpp>

#include "common/cli_man.h"
#include "common/roff.h"

namespace dlfs::fs {
namespace {

constexpr const char* kDescription =
    "dlfsd serves read-only datasets to deep-learning training from memory through a FUSE mount. It loads each "
    "dataset from its backend directory (Lustre, NFS, GPFS, a local disk) into memory in the background and serves "
    "it while it loads: MOUNTPOINT/NAME/raw/ is the backend's tree, read-only, and MOUNTPOINT/NAME/epochs/ holds the "
    "epoch views, virtual files whose sequential read is one rank's samples in that epoch's shuffled order "
    "(tar, fixed records, a directory, an index), reproducible from a seed. MOUNTPOINT/.dlfs/stats is the "
    "daemon's statistics as JSON.\n"
    "\n"
    "Every node of a job runs one dlfsd with the same datasets and peer list; each holds one stripe of every "
    "dataset and reads the others from its peers' memory over UCX, with a job token, heartbeats, and the backend "
    "as the fallback for a failed peer.\n"
    "\n"
    "dlfsd stays in the foreground (for systemd and srun), logs to standard error and never forks. The mount "
    "comes up before the datasets are scanned: reads inside a dataset wait until its scan is done, and "
    "dlfs-ctl wait-ready returns when every dataset is served. A dead mount left at MOUNTPOINT by a dlfsd that was "
    "killed is unmounted and mounted afresh; a live one, or another file system, is refused.";

constexpr const char* kSignals =
    "SIGTERM and SIGINT (and dlfs-ctl unmount) stop dlfsd cleanly: it unmounts, detaching the overlays it "
    "mounted over raw/, and exits 0.";

constexpr const char* kExitStatus =
    "0 after a clean stop. 2 when dlfsd cannot start: a bad flag or config key, a mountpoint that is missing, "
    "not empty or busy, a backend that is missing or unreadable, or a dataset whose scan fails after the mount "
    "(dlfsd then unmounts first); nothing is left mounted. 1 when the mount fails or the FUSE session ends in "
    "error.";

constexpr const char* kFiles =
    "/run/dlfs/MOUNTPOINT.sock: the control socket (dlfs-ctl) of a dlfsd run as root, the mountpoint's path "
    "with '/' as '-'; /tmp/dlfs-UID or $XDG_RUNTIME_DIR/dlfs for other users. /run/dlfs-client/: the client "
    "sockets (python/dlfs, libdlfs-client). /etc/dlfs/NAME.toml, NAME.env and NAME.token: the config, "
    "environment and job token of the service instance dlfsd@NAME.service, whose unit is dlfsd@.service "
    "(not enabled when installed). MOUNTPOINT/.dlfs/stats: statistics.";

constexpr const char* kExamples =
    "dlfsd --mountpoint /mnt/dlfs --backend /lustre/imagenet\n"
    "dlfsd --config /etc/dlfs/job.toml\n"
    "dlfsd -m /mnt/dlfs -b /data/cifar --format fixed --record-size 3073\n"
    "dlfsd --config job.toml --peers node1,node2 --token-file job.token\n"
    "systemctl enable --now dlfsd@imagenet   # /etc/dlfs/imagenet.toml\n";

}  // namespace

std::string dlfsd_man_page(const CLI::App& app, std::string_view version) {
  roff::Page page("dlfsd", 8, "DLFS " + std::string(version), "DLFS Manual");
  page.name_line("dlfsd", "serve read-only deep-learning datasets from memory through a FUSE mount");
  page.heading("SYNOPSIS");
  page.roff_line(roff::bold("dlfsd --mountpoint") + " " + roff::italic("DIR") + " " + roff::bold("--backend") + " " +
                 roff::italic("DIR") + " [" + roff::italic("OPTIONS") + "]");
  page.roff_line(".br");
  page.roff_line(roff::bold("dlfsd --config") + " " + roff::italic("FILE") + " [" + roff::italic("OPTIONS") + "]");
  page.heading("DESCRIPTION");
  page.para(kDescription);
  page.heading("OPTIONS");
  page.para("Flags override the config file (dlfs.toml(5), which lists every key with its flag). A flag without a "
            "value sets its key to true, or to false where it says so.");
  roff::add_options(page, app, true);
  page.heading("SIGNALS");
  page.para(kSignals);
  page.heading("EXIT STATUS");
  page.para(kExitStatus);
  page.heading("FILES");
  page.para(kFiles);
  page.heading("EXAMPLES");
  page.example(kExamples);
  page.heading("SEE ALSO");
  page.roff_line(roff::bold("dlfs-ctl") + "(8), " + roff::bold("dlfs.toml") + "(5), " +
                 roff::bold("dlfs-slurm-launch") + "(1), " + roff::bold("fusermount3") + "(1); " +
                 roff::escape("README.md and docs/ (in /usr/share/doc/dlfs when installed from the Debian "
                              "package): docs/deploy.md for clusters, Slurm and the service, docs/views.md for the "
                              "epoch views."));
  return page.str();
}

}  // namespace dlfs::fs
