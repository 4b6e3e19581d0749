// The global functions Hugging Face's chat templates may call: Jinja2's range, dict, namespace and
// joiner, and Hugging Face's raise_exception and strftime_now.
#pragma once

#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/template/value.hpp"

namespace strata::jinja {

// `now` pins strftime_now's clock (local time); without it the current local time is used.
std::vector<std::pair<std::string, Value>> make_globals(const std::optional<std::tm>& now);

// "YYYY-MM-DD HH:MM[:SS]" as a local time; throws strata::Error when malformed.
std::tm parse_time_pin(std::string_view text);

}  // namespace strata::jinja
