#include "core/experts/expert_profile.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/experts/expert_plan.hpp"
#include "core/util/error.hpp"
#include "core/util/output_file.hpp"
#include "core/util/user_file.hpp"

namespace strata {
namespace {

using nlohmann::json;

// The shortest text that reads back as the same double ("3" for 3.0).
std::string number_text(double value) {
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, value);
  return std::string(text, result.ptr);
}

// nlohmann reports a byte offset (1-based, of the last character read); an editor wants line and column.
std::string line_and_column(std::string_view text, size_t byte) {
  const size_t offset = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return std::to_string(line) + ":" + std::to_string(column);
}

// Drops nlohmann's "[json.exception.parse_error.101] " and "parse error at ...: " prefixes.
std::string json_error_detail(const json::exception& error) {
  std::string what = error.what();
  if (const auto tag = what.find("] "); what.starts_with("[json.exception.") && tag != std::string::npos) {
    what.erase(0, tag + 2);
  }
  if (const auto separator = what.find(": "); what.starts_with("parse error") && separator != std::string::npos) {
    what.erase(0, separator + 2);
  }
  return what;
}

// A value as a message quotes it: short, on one line.
std::string shown(const json& value) {
  std::string text = value.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  return text;
}

// Walks the parsed document; every complaint names the profile and the field at fault.
class ProfileReader {
 public:
  ProfileReader(std::filesystem::path path, int32_t n_layer, int32_t n_expert)
      : path_(std::move(path)), n_layer_(n_layer), n_expert_(n_expert) {}

  ExpertProfile read(const json& root) const {
    if (!root.is_object()) {
      fail("the top level", std::string("expected an object (a strata expert profile), found ") + root.type_name());
    }
    const json& format = field(root, "format");
    if (!format.is_string() || format.get<std::string>() != kExpertProfileFormat) {
      fail("format", "expected \"" + std::string(kExpertProfileFormat) + "\", found " + shown(format) +
                         ": not a strata expert profile");
    }
    const int64_t version = integer(field(root, "version"), "version", 1, std::numeric_limits<int32_t>::max());
    if (version != kExpertProfileVersion) {
      fail("version", std::to_string(version) + " is not a version this strata reads (it reads " +
                          std::to_string(kExpertProfileVersion) + ")");
    }

    ExpertProfile profile;
    ExpertProfileInfo& info = profile.info;
    const json& model = field(root, "model");
    if (!model.is_object()) fail("model", std::string("expected an object, found ") + model.type_name());
    info.model_file = text(model, "model.file", "file");
    info.architecture = text(model, "model.architecture", "architecture");
    const int64_t most = std::numeric_limits<int32_t>::max();
    info.n_layer = static_cast<int32_t>(integer(field(model, "n_layer", "model.n_layer"), "model.n_layer", 1, most));
    info.n_expert =
        static_cast<int32_t>(integer(field(model, "n_expert", "model.n_expert"), "model.n_expert", 1, most));
    info.n_expert_used = static_cast<int32_t>(
        integer(field(model, "n_expert_used", "model.n_expert_used"), "model.n_expert_used", 1, info.n_expert));
    if (n_layer_ > 0 && info.n_layer != n_layer_) {
      fail("model.n_layer", "the profile is of a model of " + std::to_string(info.n_layer) +
                                " layers, this model has " + std::to_string(n_layer_) +
                                " (a profile of another model?)");
    }
    if (n_expert_ > 0 && info.n_expert != n_expert_) {
      fail("model.n_expert", "the profile is of a model of " + std::to_string(info.n_expert) +
                                 " experts a layer, this model has " + std::to_string(n_expert_) +
                                 " (a profile of another model?)");
    }
    info.prompts = integer(field(root, "prompts"), "prompts", 0, std::numeric_limits<int64_t>::max());
    info.tokens = integer(field(root, "tokens"), "tokens", 0, std::numeric_limits<int64_t>::max());

    const json& counts = field(root, "counts");
    if (!counts.is_array()) fail("counts", std::string("expected an array of layers, found ") + counts.type_name());
    if (counts.size() != static_cast<size_t>(info.n_layer)) {
      fail("counts",
           "holds " + std::to_string(counts.size()) + " layers, model.n_layer says " + std::to_string(info.n_layer));
    }
    // Every row's shape before anything is allocated for it.
    for (int32_t layer = 0; layer < info.n_layer; ++layer) {
      const json& row = counts[static_cast<size_t>(layer)];
      const std::string where = "counts[" + std::to_string(layer) + "]";
      if (!row.is_array()) fail(where, std::string("expected an array of counts, found ") + row.type_name());
      if (row.size() != static_cast<size_t>(info.n_expert)) {
        fail(where,
             "holds " + std::to_string(row.size()) + " counts, model.n_expert says " + std::to_string(info.n_expert));
      }
    }
    profile.counts = RoutingCounts(info.n_layer, info.n_expert);
    for (int32_t layer = 0; layer < info.n_layer; ++layer) {
      const json& row = counts[static_cast<size_t>(layer)];
      for (int32_t expert = 0; expert < info.n_expert; ++expert) {
        const json& value = row[static_cast<size_t>(expert)];
        const std::string where = "counts[" + std::to_string(layer) + "][" + std::to_string(expert) + "]";
        if (!value.is_number()) fail(where, std::string("expected a number, found ") + value.type_name());
        const double count = value.get<double>();
        if (!std::isfinite(count) || count < 0.0) {
          fail(where, "expected a finite count >= 0, found " + shown(value));
        }
        profile.counts.set(layer, expert, count);
      }
    }
    return profile;
  }

 private:
  const json& field(const json& object, const char* key, const std::string& where = "") const {
    const auto found = object.find(key);
    if (found == object.end()) fail(where.empty() ? key : where, "missing");
    return *found;
  }

  std::string text(const json& object, const std::string& where, const char* key) const {
    const json& value = field(object, key, where);
    if (!value.is_string()) fail(where, std::string("expected a string, found ") + value.type_name());
    return value.get<std::string>();
  }

  int64_t integer(const json& value, const std::string& where, int64_t low, int64_t high) const {
    const std::string range = "an integer from " + std::to_string(low) + " to " + std::to_string(high);
    if (value.is_number_unsigned()) {
      const auto number = value.get<uint64_t>();
      if (number > static_cast<uint64_t>(high) || static_cast<int64_t>(number) < low) {
        fail(where, "expected " + range + ", found " + shown(value));
      }
      return static_cast<int64_t>(number);
    }
    if (value.is_number_integer()) {
      const auto number = value.get<int64_t>();
      if (number < low || number > high) fail(where, "expected " + range + ", found " + shown(value));
      return number;
    }
    fail(where, "expected " + range + ", found " + shown(value));
  }

  [[noreturn]] void fail(const std::string& where, const std::string& message) const {
    throw Error(path_.string() + ": " + where + ": " + message);
  }

  std::filesystem::path path_;
  int32_t n_layer_, n_expert_;
};

}  // namespace

std::string format_expert_profile(const RoutingCounts& counts, const ExpertProfileInfo& info) {
  if (counts.empty() || counts.n_layer() != info.n_layer || counts.n_expert() != info.n_expert) {
    throw Error("expert profile: the counts are for " + std::to_string(counts.n_layer()) + " layers of " +
                std::to_string(counts.n_expert()) + " experts, the model has " + std::to_string(info.n_layer) + " of " +
                std::to_string(info.n_expert));
  }
  const json model = json::object({{"file", info.model_file},
                                   {"architecture", info.architecture},
                                   {"n_layer", info.n_layer},
                                   {"n_expert", info.n_expert},
                                   {"n_expert_used", info.n_expert_used}});
  std::string text = "{\n  \"format\": " + json(std::string(kExpertProfileFormat)).dump() +
                     ",\n  \"version\": " + std::to_string(kExpertProfileVersion) +
                     ",\n  \"model\": " + model.dump(-1, ' ', false, json::error_handler_t::replace) +
                     ",\n  \"prompts\": " + std::to_string(info.prompts) +
                     ",\n  \"tokens\": " + std::to_string(info.tokens) + ",\n  \"counts\": [";
  for (int32_t layer = 0; layer < counts.n_layer(); ++layer) {
    text += layer == 0 ? "\n    [" : ",\n    [";
    for (int32_t expert = 0; expert < counts.n_expert(); ++expert) {
      const double count = counts.at(layer, expert);
      if (!std::isfinite(count) || count < 0.0) {
        throw Error("expert profile: the count of expert " + std::to_string(expert) + " in layer " +
                    std::to_string(layer) + " is " + number_text(count) + ", not a finite count >= 0");
      }
      if (expert > 0) text += ", ";
      text += number_text(count);
    }
    text += "]";
  }
  text += "\n  ]\n}\n";
  return text;
}

void write_expert_profile(OutputFile& out, const RoutingCounts& counts, const ExpertProfileInfo& info) {
  const std::string text = format_expert_profile(counts, info);
  out.write(text.data(), text.size());
  out.finish();
}

void write_expert_profile(const std::filesystem::path& path, const RoutingCounts& counts,
                          const ExpertProfileInfo& info) {
  const std::string text = format_expert_profile(counts, info);  // checked before the file is touched
  OutputFile out(path, "the expert profile");
  out.write(text.data(), text.size());
  out.finish();
}

ExpertProfile parse_expert_profile(std::string_view text, const std::filesystem::path& path, int32_t n_layer,
                                   int32_t n_expert) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& error) {
    throw Error(path.string() + ":" + line_and_column(text, error.byte) +
                ": not JSON (a strata expert profile is): " + json_error_detail(error));
  } catch (const json::exception& error) {  // a well-formed number past the range of doubles
    throw Error(path.string() + ": " + json_error_detail(error) + " (past the range of a double)");
  }
  return ProfileReader(path, n_layer, n_expert).read(root);
}

ExpertProfile read_expert_profile(const std::filesystem::path& path, int32_t n_layer, int32_t n_expert) {
  return parse_expert_profile(read_user_file(path, "the expert profile", kMaxExpertProfileBytes), path, n_layer,
                              n_expert);
}

double top_pairs_share(const RoutingCounts& counts, double fraction) {
  if (counts.empty()) return 0.0;
  const int64_t all = int64_t{counts.n_layer()} * counts.n_expert();
  const auto taken = static_cast<int64_t>(std::llround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(all)));
  return ExpertPlan::rank(counts.n_layer(), counts.n_expert(), taken, counts).hit_rate(counts);
}

}  // namespace strata
