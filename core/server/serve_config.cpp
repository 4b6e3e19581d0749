#include "core/server/serve_config.hpp"

#include <stdlib.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "core/util/user_file.hpp"

namespace strata::server {
namespace {

constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;
constexpr const char* kKnownKeys = "model, args, parallel, gpu, layer_split, env";

// Whether args holds flag (or one of its spellings) as an option of its own or with "=value".
bool has_flag(const std::vector<std::string>& args, const std::vector<std::string>& spellings) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& arg) {
    return std::any_of(spellings.begin(), spellings.end(),
                       [&](const std::string& flag) { return arg == flag || arg.rfind(flag + "=", 0) == 0; });
  });
}

}  // namespace

ServeConfig parse_serve_config(const std::string& path, const std::string& text,
                               const std::vector<std::string>& command_line) {
  nlohmann::json config;
  try {
    config = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // a syntax error, or a number past a double's range
    throw Error(path + ": not JSON (" + e.what() + ")");
  }
  if (!config.is_object()) throw Error(path + ": expected a JSON object of settings (keys: " + kKnownKeys + ")");
  const auto fail = [&path](const std::string& key, const std::string& problem) -> Error {
    return Error(path + ": " + key + ": " + problem);
  };
  const auto only_here = [&](const std::string& key, const std::vector<std::string>& spellings) {
    if (has_flag(command_line, spellings))
      throw fail(key, "also given as " + spellings.back() + " on the command line");
  };
  ServeConfig result;
  std::vector<std::string>& flags = result.flags;
  for (const auto& [key, value] : config.items()) {
    if (key == "model") {
      if (!value.is_string() || value.get<std::string>().empty()) throw fail(key, "expected the model's path");
      only_here(key, {"-m", "--model"});
      flags.insert(flags.end(), {"--model", value.get<std::string>()});
    } else if (key == "args") {
      if (!value.is_array()) throw fail(key, "expected an array of command-line arguments (strings)");
      for (size_t i = 0; i < value.size(); ++i) {
        if (!value[i].is_string()) throw fail(key + "[" + std::to_string(i) + "]", "expected a string");
        flags.push_back(value[i].get<std::string>());
      }
    } else if (key == "parallel" || key == "gpu") {
      const int64_t least = key == "parallel" ? 1 : 0;
      if (!value.is_number_integer() || value.get<int64_t>() < least || value.get<int64_t>() > 1 << 20) {
        throw fail(key, "expected an integer of at least " + std::to_string(least));
      }
      only_here(key, {"--" + key});
      flags.insert(flags.end(), {"--" + key, std::to_string(value.get<int64_t>())});
    } else if (key == "layer_split") {
      if (!value.is_null() && !(value.is_array() && value.empty())) {
        throw fail(key, "splitting layers over several GPUs is not built yet: leave it out (or null)");
      }
    } else if (key == "env") {
      if (!value.is_object()) throw fail(key, "expected an object of environment variables and their values");
      for (const auto& [name, setting] : value.items()) {
        if (name.empty() || name.find('=') != std::string::npos) throw fail(key, "'" + name + "' is no variable name");
        if (!setting.is_string()) throw fail(key + "." + name, "expected a string");
        result.env.emplace_back(name, setting.get<std::string>());
      }
    } else {
      throw fail(key, std::string("unknown key (known: ") + kKnownKeys + ")");
    }
  }
  return result;
}

std::vector<std::string> expand_serve_config(std::vector<std::string> args) {
  const auto serve = std::find(args.begin(), args.end(), "serve");
  if (serve == args.end()) return args;
  // --config FILE or --config=FILE after the subcommand.
  std::string path;
  auto at = args.end();
  size_t taken = 0;
  for (auto it = serve + 1; it != args.end(); ++it) {
    const bool separate = *it == "--config", joined = it->rfind("--config=", 0) == 0;
    if (!separate && !joined) continue;
    if (at != args.end()) throw Error("serve: --config is given more than once");
    if (separate && it + 1 == args.end()) throw Error("serve: --config needs a file");
    path = separate ? *(it + 1) : it->substr(9);
    at = it;
    taken = separate ? 2 : 1;
  }
  if (at == args.end()) return args;
  const size_t position = static_cast<size_t>(at - args.begin());
  args.erase(at, at + static_cast<std::ptrdiff_t>(taken));

  const std::string text = read_user_file(path, "the server config (--config)", kMaxConfigBytes);
  const ServeConfig config = parse_serve_config(path, text, args);
  for (const auto& [name, value] : config.env) ::setenv(name.c_str(), value.c_str(), 1);
  args.insert(args.begin() + static_cast<std::ptrdiff_t>(position), config.flags.begin(), config.flags.end());
  return args;
}

}  // namespace strata::server
