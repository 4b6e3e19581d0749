// strata template --template T.jinja --input CASE.json [--now "YYYY-MM-DD HH:MM"]
// Prints exactly the rendered chat template (no newline added). CASE.json holds one conversation:
// {"messages": [...], "add_generation_prompt": bool, "bos_token": "...", "eos_token": "...", "extra": {...}}.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/template/chat_template.hpp"
#include "core/template/globals.hpp"
#include "core/util/error.hpp"
#include "host/commands/commands.hpp"

namespace strata::host {
namespace {

struct TemplateOptions {
  std::string template_path;
  std::string input_path;
  std::string now;
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

void register_template_command(CLI::App& app) {
  auto options = std::make_shared<TemplateOptions>();
  auto* command = app.add_subcommand("template", "Render a Jinja chat template for one conversation, as Hugging Face's apply_chat_template does");
  command->add_option("--template", options->template_path, "Jinja chat template file")->required();
  command->add_option("--input", options->input_path,
                      "JSON file: {\"messages\", \"add_generation_prompt\", \"bos_token\", \"eos_token\", \"extra\"}")
      ->required();
  command->add_option("--now", options->now, "Pin strftime_now to this local time, \"YYYY-MM-DD HH:MM[:SS]\" (default: the clock)");

  command->callback([options] {
    const std::string template_text = read_text(options->template_path);
    nlohmann::ordered_json input;
    try {
      input = nlohmann::ordered_json::parse(read_text(options->input_path));
    } catch (const nlohmann::json::exception& e) {  // syntax errors, and numbers out of range
      throw Error(options->input_path + ": " + e.what());
    }
    jinja::RenderOptions render_options;
    if (!options->now.empty()) render_options.now = jinja::parse_time_pin(options->now);
    const jinja::Template chat_template(template_text);
    std::cout << jinja::render_chat(chat_template, jinja::chat_request_from_json(input), render_options) << std::flush;
  });
}

}  // namespace strata::host
