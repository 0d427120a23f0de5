// Human-readable rendering of the daemon's JSON answers for dlfs-ctl.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace dlfs::ctl {

std::string render_status(const nlohmann::json& status);
// The cluster part of a status: members, state, stripes, load, bytes by source.
std::string render_cluster(const nlohmann::json& cluster);
std::string render_stats(const nlohmann::json& stats);   // status plus served bytes and views
std::string render_verify(const nlohmann::json& result);
std::string render_plan(const nlohmann::json& plan);
std::string render_shuffle_report(const nlohmann::json& report);

}  // namespace dlfs::ctl
