// How gets are done on a data endpoint (UCX fabric): `rma` = ucp_get;
// `am` = DLFS's own request and reply messages (transport/am_get.h);
// `automatic` = `am` where UCX would only emulate a get (no RMA transport on
// the endpoint, as over TCP), where a peer killed mid-get can abort the
// target; `rma` elsewhere (shared memory, RDMA: the target takes no part).
// In its own header: the config (cluster.gets) holds one.
#pragma once

#include <array>
#include <string_view>

#include "common/enum_names.h"

namespace dlfs::transport {

enum class GetMode { automatic, rma, am };
constexpr std::array<std::string_view, 3> enum_names(GetMode) { return {"auto", "rma", "am"}; }

}  // namespace dlfs::transport
