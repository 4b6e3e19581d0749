// Reading a file named on the command line, with errors that name it.
#pragma once

#include <string>

namespace strata::host {

// The whole file as bytes. Throws strata::Error naming the path when it is missing, a directory, or unreadable.
std::string read_input_file(const std::string& path);

}  // namespace strata::host
