// strata template --template T.jinja --input CASE.json [--now "YYYY-MM-DD HH:MM"]
// Prints exactly the rendered chat template (no newline added). CASE.json holds one conversation:
// {"messages": [...], "add_generation_prompt": bool, "bos_token": "...", "eos_token": "...", "extra": {...}}.
#include <iostream>

#include "core/template/chat_template.hpp"
#include "core/template/globals.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"

namespace strata::host {
namespace {

struct TemplateOptions {
  std::string template_path;
  std::string input_path;
  std::string now;
};

}  // namespace

void register_template_command(CLI::App& app) {
  auto options = std::make_shared<TemplateOptions>();
  auto* command = app.add_subcommand(
      "template", "Render a Jinja chat template for one conversation, as Hugging Face's apply_chat_template does");
  command->add_option("--template", options->template_path, "Jinja chat template file")->required();
  command
      ->add_option("--input", options->input_path,
                   "JSON file: {\"messages\", \"add_generation_prompt\", \"bos_token\", \"eos_token\", \"extra\"}, "
                   "nested at most " +
                       std::to_string(jinja::kMaxNesting) + " levels")
      ->required();
  command->add_option("--now", options->now,
                      "Pin strftime_now to this local time, \"YYYY-MM-DD HH:MM[:SS]\" (default: the clock)");
  command->footer("A render fails with an error naming the template line past its limits: nesting deeper than " +
                  std::to_string(jinja::kMaxNesting) + " levels, a string or the rendering past " +
                  std::to_string(jinja::kMaxResultSize >> 20) + " MiB, a list or dict past " +
                  std::to_string(jinja::kMaxResultSize >> 20) + " Mi items, " +
                  std::to_string(jinja::kDefaultMaxEvaluations) + " expressions evaluated, or " +
                  std::to_string(jinja::kDefaultMaxWork >> 20) +
                  " MiB of data built, copied or compared (docs/templates.md).");

  command->callback([options] {
    const std::string template_text = read_user_file(options->template_path, "the template (--template)");
    const std::string input_text = read_user_file(options->input_path, "the input (--input)");
    jinja::ChatRequest request;
    try {
      request = jinja::parse_chat_request(input_text);
    } catch (const Error& e) {
      throw Error(options->input_path + ": " + e.what());
    }
    jinja::RenderOptions render_options;
    if (!options->now.empty()) render_options.now = jinja::parse_time_pin(options->now);
    try {
      const jinja::Template chat_template(template_text);
      std::cout << jinja::render_chat(chat_template, request, render_options) << std::flush;
    } catch (const Error& e) {
      throw Error(options->template_path + ": " + e.what());
    }
  });
}

}  // namespace strata::host
