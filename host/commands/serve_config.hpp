// strata serve --config serve.json (docs/serving.md): a file of the server's settings, expanded into the flags they
// stand for before the command line is parsed, so that a config and flags mean the same thing.
#pragma once

#include <string>
#include <vector>

namespace strata::host {

// args (the command line without the program's name): where they run `serve` with `--config FILE`, that option
// replaced by the flags FILE's keys stand for (model -> --model, args -> as given, parallel -> --parallel, gpu ->
// --gpu), and FILE's env entries set in this process's environment (the engine worker inherits them). Otherwise
// args unchanged. Throws strata::Error "FILE: KEY: ..." naming the file and the key for a bad file, an unknown key,
// a value of the wrong kind, or a key also given as a flag.
std::vector<std::string> expand_serve_config(std::vector<std::string> args);

}  // namespace strata::host
