// strata inspect MODEL [--json] [--dequant TENSOR --output F] [--check]
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/engine/weight_check.hpp"
#include "core/gguf/ggml_types.hpp"
#include "core/gguf/gguf_file.hpp"
#include "core/gguf/gguf_json.hpp"
#include "core/quant/quant_registry.hpp"
#include "core/util/error.hpp"
#include "core/util/finite_values.hpp"
#include "core/util/output_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/plugin_options.hpp"

namespace strata::host {
namespace {

struct InspectOptions {
  std::string model;
  bool json = false;
  std::string dequant_tensor;
  std::string output;
  std::string manifest;
  bool check = false;
};

std::string type_name(uint32_t type) {
  const auto* info = gguf::find_type(type);
  return info ? std::string(info->name) : "type " + std::to_string(type);
}

std::string shape_text(const std::vector<uint64_t>& shape) {
  std::string text;
  for (const auto dim : shape) text += (text.empty() ? "" : " x ") + std::to_string(dim);
  return text;
}

void print_json(const gguf::Model& model) {
  nlohmann::ordered_json out;
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  for (const auto& [key, value] : model.metadata()) metadata[key] = gguf::to_json(value);
  out["metadata"] = std::move(metadata);
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const auto& tensor : model.tensors()) {
    nlohmann::ordered_json entry = {{"name", tensor.name},
                                    {"type", type_name(tensor.type)},
                                    {"shape", tensor.shape},
                                    {"offset", tensor.offset},
                                    {"bytes", tensor.bytes}};
    if (model.files().size() > 1) entry["file"] = tensor.file_index;  // offsets are per part
    tensors.push_back(std::move(entry));
  }
  out["tensors"] = std::move(tensors);
  std::cout << out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void print_text(const gguf::Model& model) {
  for (const auto& file : model.files()) {
    std::printf("file: %s (GGUF v%u, %llu bytes, alignment %llu)\n", file->path().c_str(), file->version(),
                static_cast<unsigned long long>(file->size()), static_cast<unsigned long long>(file->alignment()));
  }
  std::printf("\nmetadata (%zu keys):\n", model.metadata().size());
  for (const auto& [key, value] : model.metadata())
    std::printf("  %-40s %s\n", key.c_str(), gguf::to_display(value).c_str());

  std::printf("\ntensors (%zu):\n", model.tensors().size());
  struct Total {
    uint64_t count = 0, elements = 0, bytes = 0;
  };
  std::map<std::string, Total> totals;
  for (const auto& tensor : model.tensors()) {
    std::printf("  %-48s %-8s %-24s %12llu bytes\n", tensor.name.c_str(), type_name(tensor.type).c_str(),
                shape_text(tensor.shape).c_str(), static_cast<unsigned long long>(tensor.bytes));
    auto& total = totals[type_name(tensor.type)];
    ++total.count;
    total.elements += tensor.n_elements;
    total.bytes += tensor.bytes;
  }
  std::printf("\ntotals by type:\n");
  Total all;
  for (const auto& [name, total] : totals) {
    std::printf("  %-8s %6llu tensors %14llu values %14llu bytes (%.3f bits/value)\n", name.c_str(),
                static_cast<unsigned long long>(total.count), static_cast<unsigned long long>(total.elements),
                static_cast<unsigned long long>(total.bytes), 8.0 * total.bytes / total.elements);
    all.count += total.count;
    all.elements += total.elements;
    all.bytes += total.bytes;
  }
  std::printf("  %-8s %6llu tensors %14llu values %14llu bytes\n", "all", static_cast<unsigned long long>(all.count),
              static_cast<unsigned long long>(all.elements), static_cast<unsigned long long>(all.bytes));
}

// Writes the tensor as float32 little-endian, a slab of rows at a time so that huge tensors stream.
void write_dequantized(const gguf::Model& model, const std::string& tensor_name, OutputFile& out,
                       const QuantRegistry& quants) {
  const auto& tensor = model.tensor(tensor_name);
  const auto* info = gguf::find_type(tensor.type);
  const uint64_t row_elements = tensor.shape[0];
  const uint64_t row_bytes = row_elements / info->block_elements * info->block_bytes;
  const uint64_t rows = tensor.n_elements / row_elements;
  const uint64_t rows_per_slab = std::max<uint64_t>(1, (uint64_t{1} << 20) / row_elements);

  std::vector<float> values(rows_per_slab * row_elements);
  for (uint64_t row = 0; row < rows; row += rows_per_slab) {
    const uint64_t slab_rows = std::min(rows_per_slab, rows - row);
    quants.dequantize(tensor.type, tensor.data + row * row_bytes, values.data(),
                      static_cast<int64_t>(slab_rows * row_elements));
    out.write(values.data(), slab_rows * row_elements * sizeof(float));
  }
  out.finish();
}

// Prints each tensor holding NaN or infinity, and those no plugin decodes; throws when there is either.
void print_weight_check(const gguf::Model& model, const QuantRegistry& quants) {
  const WeightCheck check = check_weights(model, quants);
  for (const auto& tensor : check.non_finite) {
    std::printf("%s: %llu NaN or infinite value%s, the first at index %llu (%s)\n", tensor.name.c_str(),
                static_cast<unsigned long long>(tensor.count), tensor.count == 1 ? "" : "s",
                static_cast<unsigned long long>(tensor.first_index), non_finite_name(tensor.first_value));
  }
  for (const auto& tensor : check.unchecked) {
    std::printf("%s: not checked, no loaded plugin decodes its type\n", tensor.c_str());
  }
  std::printf("checked %llu tensors (%llu values): %zu %s NaN or infinity\n",
              static_cast<unsigned long long>(check.tensors_checked),
              static_cast<unsigned long long>(check.values_checked), check.non_finite.size(),
              check.non_finite.size() == 1 ? "holds" : "hold");
  const std::string name = model.first().path().string();
  if (!check.non_finite.empty()) {
    throw Error(name + ": " + std::to_string(check.non_finite.size()) + " tensor" +
                (check.non_finite.size() == 1 ? " holds" : "s hold") + " NaN or infinity (listed above)");
  }
  if (!check.unchecked.empty()) {
    throw Error(name + ": " + std::to_string(check.unchecked.size()) + " tensor" +
                (check.unchecked.size() == 1 ? " was" : "s were") +
                " not checked: no loaded plugin decodes their type");
  }
}

}  // namespace

void register_inspect_command(CLI::App& app) {
  auto options = std::make_shared<InspectOptions>();
  auto* command = app.add_subcommand(
      "inspect",
      "Show a GGUF model's metadata and tensors, dequantize a tensor, or check the weights for NaN/infinity");
  command->add_option("model", options->model, "GGUF file (any part of a split model opens all parts)")->required();
  command->add_flag("--json", options->json, "Print {\"metadata\": {...}, \"tensors\": [...]} as JSON");
  auto* dequant = command->add_option("--dequant", options->dequant_tensor,
                                      "Write this tensor as float32 little-endian to --output");
  auto* output = command->add_option("--output", options->output, "File for --dequant");
  dequant->needs(output);
  output->needs(dequant);
  auto* check = command->add_flag("--check", options->check,
                                  "Decode every tensor and list those holding NaN or infinity (name, count, first "
                                  "index); exit 1 when any does, or when a tensor's type cannot be decoded");
  check->excludes(dequant);
  add_manifest_option(command, options->manifest);

  command->callback([options] {
    // The output is opened first: a path that cannot be written fails before any work.
    std::unique_ptr<OutputFile> out;
    if (!options->dequant_tensor.empty()) out = std::make_unique<OutputFile>(options->output, "the tensor");
    const gguf::Model model(options->model);
    if (out) {
      const auto plugins = open_plugins(options->manifest);
      write_dequantized(model, options->dequant_tensor, *out, plugins->quants());
    } else if (options->check) {
      print_weight_check(model, open_plugins(options->manifest)->quants());
    } else if (options->json) {
      print_json(model);
    } else {
      print_text(model);
    }
  });
}

}  // namespace strata::host
