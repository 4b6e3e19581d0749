// strata serve --config serve.json (docs/serving.md): a file of the server's settings, expanded into the flags they
// stand for before the command line is parsed, so that a config and flags mean the same thing.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace strata::server {

struct ServeConfig {
  std::vector<std::string> flags;                        // model -> --model, args as given, parallel, gpu
  std::vector<std::pair<std::string, std::string>> env;  // to set in the environment the worker inherits
};

// The settings of text, the content of the file at path. command_line: the other arguments, where a key's own flag
// must not appear too. Throws strata::Error "PATH: KEY: ..." for text that is not a JSON object, an unknown key, a
// value of the wrong kind, a key also given as a flag, or a setting not built yet.
ServeConfig parse_serve_config(const std::string& path, const std::string& text,
                               const std::vector<std::string>& command_line);

// args (the command line without the program's name): where they run `serve` with `--config FILE`, that option
// replaced by the flags FILE's keys stand for, and FILE's env entries set in this process's environment (the
// engine worker inherits them); otherwise args unchanged. Throws strata::Error for a file that cannot be read and
// as parse_serve_config.
std::vector<std::string> expand_serve_config(std::vector<std::string> args);

}  // namespace strata::server
