#include "core/plugin/plugin_host.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <boost/dll/shared_library.hpp>
#include <cstddef>
#include <cstdlib>

#include "core/plugin/abi_call.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "strata/backend.h"
#include "strata/cpu_isa.hpp"
#include "strata/quant.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

constexpr int32_t kScoreWithoutProbe = 1;
constexpr const char* kCoreProvider = "core";

// Bytes a descriptor must have before a field may be read: struct_size says which fields a plugin has.
constexpr std::size_t kDescriptorVersionBytes = STRATA_FIELD_END(strata_plugin_descriptor, abi_minor);
constexpr std::size_t kDescriptorAbi1_0Bytes = STRATA_FIELD_END(strata_plugin_descriptor, shutdown);
constexpr std::size_t kQuantTableAbi1_0Bytes = STRATA_FIELD_END(strata_quant_table, types);
constexpr std::size_t kBackendTableAbi1_0Bytes = STRATA_FIELD_END(strata_backend_table, scale_rows);

const char* kind_name(uint32_t kind) {
  switch (kind) {
    case STRATA_PLUGIN_KIND_QUANT:
      return "quant";
    case STRATA_PLUGIN_KIND_BACKEND:
      return "backend";
    default:
      return nullptr;
  }
}

bool host_speaks(uint16_t major, uint16_t minor) { return major == STRATA_ABI_MAJOR && minor <= STRATA_ABI_MINOR; }

spdlog::level::level_enum log_level_of(int32_t plugin_level) {
  switch (plugin_level) {
    case STRATA_LOG_DEBUG:
      return spdlog::level::debug;
    case STRATA_LOG_WARN:
      return spdlog::level::warn;
    case STRATA_LOG_ERROR:
      return spdlog::level::err;
    default:
      return spdlog::level::info;
  }
}

// The host services' log callback; context is the plugin's name. Nothing may throw into a plugin.
void log_from_plugin(void* context, int32_t level, const char* message) noexcept {
  try {
    log().log(log_level_of(level), "[{}] {}", *static_cast<const std::string*>(context), message ? message : "");
  } catch (...) {
  }
}

// Boost.DLL drops dlerror()'s text, which is what tells a user why (bad ELF header, missing dependency):
// ask dlopen once more for it.
std::string load_failure_reason(const fs::path& file) {
  if (void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    ::dlclose(handle);
    return "loading failed once and then succeeded";
  }
  const char* text = ::dlerror();
  std::string reason = text ? text : "unknown reason";
  const std::string file_prefix = file.string() + ": ";
  if (reason.starts_with(file_prefix)) reason.erase(0, file_prefix.size());
  return reason;
}

// Checks the fields every ABI 1.x descriptor has; throws Error with the reason to skip the plugin.
void check_descriptor(const strata_plugin_descriptor* descriptor) {
  if (descriptor == nullptr) throw Error(std::string(STRATA_PLUGIN_QUERY_SYMBOL) + " returned no descriptor (NULL)");
  const std::size_t size = descriptor->struct_size;
  if (size < kDescriptorVersionBytes) {
    throw Error("its descriptor is " + std::to_string(size) + " bytes, too small to hold even the ABI version");
  }
  if (!host_speaks(descriptor->abi_major, descriptor->abi_minor)) {
    throw Error("built for plugin ABI " + abi_version_text(descriptor->abi_major, descriptor->abi_minor) +
                ", this host speaks " + abi_version_text(STRATA_ABI_MAJOR, STRATA_ABI_MINOR));
  }
  if (size < kDescriptorAbi1_0Bytes) {
    throw Error("its descriptor is " + std::to_string(size) + " bytes, too small for the ABI 1.0 fields (" +
                std::to_string(kDescriptorAbi1_0Bytes) + " bytes)");
  }
  if (kind_name(descriptor->kind) == nullptr) {
    throw Error("unknown plugin kind " + std::to_string(descriptor->kind) + "; this host loads quant (" +
                std::to_string(STRATA_PLUGIN_KIND_QUANT) + ") and backend (" +
                std::to_string(STRATA_PLUGIN_KIND_BACKEND) + ") plugins");
  }
  if (descriptor->name == nullptr || descriptor->name[0] == '\0') throw Error("its descriptor has no name");
  if (descriptor->table == nullptr) throw Error(std::string(kind_name(descriptor->kind)) + " plugin without a table");
  // Both tables start with struct_size.
  const uint32_t table_size = *static_cast<const uint32_t*>(descriptor->table);
  const std::size_t needed =
      descriptor->kind == STRATA_PLUGIN_KIND_QUANT ? kQuantTableAbi1_0Bytes : kBackendTableAbi1_0Bytes;
  if (table_size < needed) {
    throw Error("its " + std::string(kind_name(descriptor->kind)) + " table is " + std::to_string(table_size) +
                " bytes, too small for the ABI 1.0 fields (" + std::to_string(needed) + " bytes)");
  }
}

}  // namespace

void request_cpu_isa(const std::string& flag) {
  if (const char* environment = std::getenv("STRATA_CPU_ISA"); environment != nullptr && *environment != '\0') {
    const std::string problem = sdk::cpu_isa_request_problem("STRATA_CPU_ISA", environment);
    if (!problem.empty()) throw Error(problem);
  }
  if (!flag.empty()) {
    const std::string problem = sdk::cpu_isa_request_problem("--cpu-isa", flag);
    if (!problem.empty()) throw Error(problem);
  }
  sdk::host_cpu_isa_request() = flag;
}

std::string abi_version_text(uint16_t major, uint16_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

struct PluginHost::OpenLibrary {
  boost::dll::shared_library library;
  const strata_plugin_descriptor* descriptor = nullptr;
  std::string name;     // the host services' context, so that the plugin's log lines carry its name
  std::string cpu_isa;  // what the services' cpu_isa points at: the request when the plugin was started
  strata_host_services services{};
  bool initialized = false;  // init succeeded, so shutdown is owed before unloading

  ~OpenLibrary() {
    if (initialized && descriptor->shutdown != nullptr) descriptor->shutdown();
  }
};

std::unique_ptr<PluginHost> PluginHost::open(const Manifest& manifest) {
  std::unique_ptr<PluginHost> host(new PluginHost());
  host->manifest_path_ = manifest.path;
  host->quants_.offer(kCoreProvider, base_quant_table());
  for (const auto& entry : manifest.plugins) host->load(entry);
  host->problems_ = host->quants_.resolve(manifest.prefer);
  if (const auto preference = manifest.prefer.find("backend"); preference != manifest.prefer.end()) {
    host->backend_preference_ = preference->second;
  }
  for (const auto& problem : host->problems_) log().warn("{}: {}", manifest.path.string(), problem);
  return host;
}

PluginHost::~PluginHost() {
  // Last loaded first: a plugin may rely on one loaded before it.
  while (!libraries_.empty()) libraries_.pop_back();
}

void PluginHost::load(const ManifestPlugin& entry) {
  if (!entry.enabled) {
    skipped_.push_back({entry.path, "disabled in the manifest"});
    log().info("plugin {}: disabled in the manifest", entry.path.string());
    return;
  }
  try {
    auto library = open_library(entry);
    const int32_t score = start(*library, entry);
    const strata_plugin_descriptor& descriptor = *library->descriptor;
    loaded_.push_back({library->name, kind_name(descriptor.kind), descriptor.version ? descriptor.version : "",
                       descriptor.abi_major, descriptor.abi_minor, entry.path, score});
    libraries_.push_back(std::move(library));
    log().debug("plugin {}: loaded {} {} (ABI {})", entry.path.string(), descriptor.name, loaded_.back().version,
                abi_version_text(descriptor.abi_major, descriptor.abi_minor));
  } catch (const Error& error) {
    skipped_.push_back({entry.path, error.what()});
    log().warn("plugin {}: {}; skipped", entry.path.string(), error.what());
  }
}

std::unique_ptr<PluginHost::OpenLibrary> PluginHost::open_library(const ManifestPlugin& entry) const {
  std::error_code ignored;
  const fs::file_status status = fs::status(entry.path, ignored);
  if (!fs::exists(status)) throw Error("no such file");
  // The loader would open a FIFO and wait for a writer.
  if (!fs::is_regular_file(status)) throw Error("not a regular file");
  auto opened = std::make_unique<OpenLibrary>();
  boost::dll::fs::error_code error;
  // rtld_now: an unresolved symbol fails here, with a reason, instead of crashing at the first call.
  opened->library.load(boost::dll::fs::path(entry.path.string()),
                       boost::dll::load_mode::rtld_now | boost::dll::load_mode::rtld_local, error);
  if (error) throw Error("not a loadable shared library: " + load_failure_reason(entry.path));
  if (!opened->library.has(STRATA_PLUGIN_QUERY_SYMBOL)) {
    throw Error(std::string("no ") + STRATA_PLUGIN_QUERY_SYMBOL + " symbol: not a Strata plugin");
  }
  const auto query = opened->library.get<const strata_plugin_descriptor*()>(STRATA_PLUGIN_QUERY_SYMBOL);
  const strata_plugin_descriptor* descriptor = query();
  check_descriptor(descriptor);
  opened->descriptor = descriptor;
  opened->name = descriptor->name;
  const auto same_name = std::find_if(loaded_.begin(), loaded_.end(),
                                      [&](const LoadedPlugin& loaded) { return loaded.name == opened->name; });
  if (same_name != loaded_.end()) {
    throw Error("a plugin named '" + opened->name + "' is already loaded from " + same_name->file.string());
  }
  return opened;
}

int32_t PluginHost::start(OpenLibrary& library, const ManifestPlugin& entry) {
  const strata_plugin_descriptor& descriptor = *library.descriptor;
  int32_t score = kScoreWithoutProbe;
  if (descriptor.probe != nullptr) {
    call_plugin("probe", [&](strata_error* error) { return descriptor.probe(&score, error); });
    if (score <= 0)
      throw Error("probe gave score " + std::to_string(score) + "; a plugin that can run must score above 0");
  }
  library.cpu_isa = sdk::host_cpu_isa_request();  // the core's own request is the one every plugin gets
  library.services = {.struct_size = sizeof(strata_host_services),
                      .context = &library.name,
                      .log = &log_from_plugin,
                      .cpu_isa = library.cpu_isa.c_str()};
  if (descriptor.init != nullptr) {
    call_plugin("init", [&](strata_error* error) {
      return descriptor.init(&library.services, entry.options_json.c_str(), error);
    });
  }
  library.initialized = true;
  if (descriptor.kind == STRATA_PLUGIN_KIND_QUANT) {
    quants_.offer(library.name, *static_cast<const strata_quant_table*>(descriptor.table));
  } else {
    backends_.push_back({library.name, score, static_cast<const strata_backend_table*>(descriptor.table)});
  }
  return score;
}

const BackendPlugin& PluginHost::choose_backend(const std::string& wanted) const {
  if (backends_.empty()) {
    throw Error(manifest_path_.string() + ": no backend plugin loaded (see `strata plugins` for skipped ones)");
  }
  auto named = [&](const std::string& name) {
    return std::find_if(backends_.begin(), backends_.end(), [&](const BackendPlugin& backend) {
      return backend.name == name || backend.name == "backend-" + name;
    });
  };
  if (!wanted.empty()) {
    const auto hit = named(wanted);
    if (hit == backends_.end()) {
      std::string names;
      for (const auto& backend : backends_) names += (names.empty() ? "" : ", ") + backend.name;
      throw Error("backend '" + wanted + "' is not loaded (loaded: " + names + ")");
    }
    return *hit;
  }
  for (const auto& preferred : backend_preference_) {
    if (const auto hit = named(preferred); hit != backends_.end()) return *hit;
  }
  return *std::max_element(backends_.begin(), backends_.end(),
                           [](const BackendPlugin& a, const BackendPlugin& b) { return a.score < b.score; });
}

}  // namespace strata
