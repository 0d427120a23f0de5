#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace dlfs {

Status init_logging(const std::string& level, const std::string& program) {
  auto lvl = spdlog::level::from_str(level);
  // from_str maps unknown names to "off"; only accept "off" when asked for.
  if (lvl == spdlog::level::off && level != "off")
    return Status(EINVAL, "log level '" + level + "' is not one of trace, debug, info, warn, error, off");
  auto logger = spdlog::stderr_color_mt(program);
  spdlog::set_default_logger(logger);
  spdlog::set_level(lvl);
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %n[%P] %^%l%$: %v");
  spdlog::flush_on(spdlog::level::info);
  return Status::ok();
}

}  // namespace dlfs
