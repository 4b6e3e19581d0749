#include "core/util/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "core/util/error.hpp"

namespace strata {

spdlog::logger& log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto created = spdlog::stderr_color_mt("strata");
    created->set_pattern("%^[%Y-%m-%d %H:%M:%S.%e] [%l]%$ %v");
    created->set_level(spdlog::level::info);
    return created;
  }();
  return *logger;
}

void set_log_level(const std::string& level) {
  const auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw Error("unknown log level '" + level + "' (use debug, info, warn, error or off)");
  }
  log().set_level(parsed);
}

}  // namespace strata
