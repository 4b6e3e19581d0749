// strata tokenize --model M --text-file F [--parse-special] [--add-special]
// strata detokenize --model M --ids "1 2 3"
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <memory>

#include "core/gguf/gguf_file.hpp"
#include "core/tokenizer/tokenizer.hpp"
#include "core/util/error.hpp"
#include "core/util/user_file.hpp"
#include "host/commands/commands.hpp"
#include "host/commands/engine_options.hpp"

namespace strata::host {
namespace {

struct TokenizeOptions {
  std::string model;
  std::string text_file;
  bool parse_special = false;
  bool add_special = false;
};

struct DetokenizeOptions {
  std::string model;
  std::string ids;
};

}  // namespace

void register_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  auto* command = app.add_subcommand("tokenize", "Print the token ids of a text file, space-separated, on one line");
  command->add_option("--model", options->model, "GGUF file whose vocabulary to use")->required();
  command
      ->add_option("--text-file", options->text_file,
                   "The text, read as bytes (a regular file of at most " + byte_size_text(kMaxUserTextBytes) + ")")
      ->required();
  command->add_flag("--parse-special", options->parse_special, "Turn special-token text (<|im_end|>) into its id");
  command->add_flag("--add-special", options->add_special, "Add BOS/EOS as the vocabulary asks");
  command->callback([options] {
    const std::string text = read_user_file(options->text_file, "the text (--text-file)");
    const tokenizer::Tokenizer tokenizer(gguf::Model(options->model));
    const auto ids = tokenizer.encode(text, {options->add_special, options->parse_special});
    std::string line;
    for (const auto id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
    std::cout << line << "\n";
  });
}

void register_detokenize_command(CLI::App& app) {
  auto options = std::make_shared<DetokenizeOptions>();
  auto* command = app.add_subcommand("detokenize", "Print the text of token ids, exactly (no newline added)");
  command->add_option("--model", options->model, "GGUF file whose vocabulary to use")->required();
  command->add_option("--ids", options->ids, "Token ids separated by spaces or commas")->required();
  command->callback([options] {
    const tokenizer::Tokenizer tokenizer(gguf::Model(options->model));
    std::cout << tokenizer.decode(parse_token_list(options->ids, "--ids")) << std::flush;
  });
}

}  // namespace strata::host
