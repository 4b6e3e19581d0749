// Logs the options it was given at init and logs again at shutdown, through the host services: shows
// that options reach the plugin, that its log lines reach the host's log, and that shutdown is called.
#include <string>

#include "test_plugin.hpp"

namespace {

const strata_host_services* host = nullptr;

strata_status init(const strata_host_services* services, const char* options_json, strata_error*) {
  host = services;
  host->log(host->context, STRATA_LOG_INFO, (std::string("options ") + options_json).c_str());
  return STRATA_OK;
}

void shutdown() { host->log(host->context, STRATA_LOG_INFO, "shutting down"); }

}  // namespace

STRATA_PLUGIN_QUERY(test_plugin::descriptor("test-logs-options", {.init = init, .shutdown = shutdown}))
