// `strata plugins [--manifest F] [--json]`: what loaded, what was skipped and why, which backend runs by
// default, what the quant registry could not decide, and which provider serves each quant type. The --json shape is
// documented in docs/manifest.md ("strata plugins --json"); keep the two in step.
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/gguf/ggml_types.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/plugin_options.hpp"

namespace strata::host {
namespace {

using nlohmann::json;

std::string type_name(uint32_t type_id, const QuantRegistry::Offer& any_offer) {
  const auto* known = gguf::find_type(type_id);
  return known ? std::string(known->name) : std::string(any_offer.type->name);
}

// The backend that runs without --backend (the manifest's preference, else the best score), or none.
std::string default_backend(const PluginHost& host) {
  return host.backends().empty() ? std::string() : host.choose_backend().name;
}

std::vector<std::string> providers_of(const std::vector<QuantRegistry::Offer>& offers) {
  std::vector<std::string> names;
  for (const auto& offer : offers) names.push_back(offer.provider);
  return names;
}

json report_json(const PluginHost& host) {
  json report = {{"manifest", host.manifest_path().string()},
                 {"host_abi", abi_version_text(STRATA_ABI_MAJOR, STRATA_ABI_MINOR)},
                 {"loaded", json::array()},
                 {"skipped", json::array()},
                 {"problems", host.problems()},
                 {"default_backend", default_backend(host).empty() ? json(nullptr) : json(default_backend(host))},
                 {"quant_types", json::array()}};
  for (const auto& plugin : host.loaded()) {
    report["loaded"].push_back({{"name", plugin.name},
                                {"kind", plugin.kind},
                                {"version", plugin.version},
                                {"abi", abi_version_text(plugin.abi_major, plugin.abi_minor)},
                                {"file", plugin.file.string()},
                                {"score", plugin.score}});
  }
  for (const auto& skipped : host.skipped()) {
    report["skipped"].push_back({{"file", skipped.file.string()}, {"reason", skipped.reason}});
  }
  for (const auto& [type_id, offers] : host.quants().offers()) {
    const std::string provider = host.quants().provider_of(type_id);
    report["quant_types"].push_back({{"id", type_id},
                                     {"name", type_name(type_id, offers.front())},
                                     {"provider", provider.empty() ? json(nullptr) : json(provider)},
                                     {"offered_by", providers_of(offers)}});
  }
  return report;
}

void print_heading(const std::string& title, std::size_t count) {
  std::cout << "\n" << title << " (" << count << "):\n";
  if (count == 0) std::cout << "  none\n";
}

void print_text(const PluginHost& host) {
  std::cout << "manifest: " << host.manifest_path().string() << "\n";
  print_heading("loaded plugins", host.loaded().size());
  for (const auto& plugin : host.loaded()) {
    std::cout << "  " << std::left << std::setw(20) << plugin.name << " " << std::setw(6) << plugin.kind << " "
              << std::setw(10) << plugin.version << " ABI " << abi_version_text(plugin.abi_major, plugin.abi_minor)
              << "  score " << std::setw(4) << plugin.score << " " << plugin.file.string() << "\n";
  }
  print_heading("skipped plugins", host.skipped().size());
  for (const auto& skipped : host.skipped())
    std::cout << "  " << skipped.file.string() << ": " << skipped.reason << "\n";
  const std::string backend = default_backend(host);
  std::cout << "\ndefault backend: "
            << (backend.empty() ? "none loaded"
                                : backend + " (--backend on logits, generate, chat, bench overrides it)")
            << "\n";
  print_heading("unresolved", host.problems().size());
  for (const auto& problem : host.problems()) std::cout << "  " << problem << "\n";
  print_heading("quant types", host.quants().offers().size());
  for (const auto& [type_id, offers] : host.quants().offers()) {
    const std::string provider = host.quants().provider_of(type_id);
    std::string offered_by;
    for (const auto& name : providers_of(offers)) offered_by += (offered_by.empty() ? "" : ", ") + name;
    std::cout << "  " << std::left << std::setw(8) << type_name(type_id, offers.front()) << " "
              << (provider.empty() ? "unresolved (offered by " + offered_by + ")" : provider) << "\n";
  }
}

}  // namespace

void register_plugins_command(CLI::App& app) {
  auto* command = app.add_subcommand("plugins",
                                     "List the plugins that loaded, those skipped and why, and who "
                                     "serves each quant type");
  struct Flags {
    std::string manifest_path;
    bool json = false;
  };
  auto flags = std::make_shared<Flags>();
  add_manifest_option(command, flags->manifest_path);
  command->add_flag("--json", flags->json, "print one JSON object (schema in docs/manifest.md)");
  command->callback([flags] {
    const auto host = open_plugins(flags->manifest_path);
    if (flags->json) {
      std::cout << report_json(*host).dump(2) << "\n";
    } else {
      print_text(*host);
    }
  });
}

}  // namespace strata::host
