// One logger for the whole process. Plugins log through the host services, which end here too.
#pragma once

#include <spdlog/spdlog.h>

namespace strata {

// The process-wide logger ("strata"), writing to stderr.
spdlog::logger& log();

// Sets the level by name ("debug", "info", "warn", "error", "off"); throws strata::Error on a bad name.
void set_log_level(const std::string& level);

}  // namespace strata
