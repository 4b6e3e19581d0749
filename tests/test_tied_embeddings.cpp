// A model without output.weight uses its token embeddings as the output matrix ("tied"): its logits equal
// those of the same model with output.weight set to a copy of token_embd.weight.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/engine/engine.hpp"
#include "core/gguf/gguf_writer.hpp"
#include "support/reference.hpp"

namespace strata {
namespace {

// Copies model to path, dropping output.weight, or replacing it with the embeddings when keep_copy.
void write_variant(const gguf::Model& model, const std::filesystem::path& path, bool keep_copy) {
  gguf::Writer writer(model.first().alignment());
  for (const auto& [key, value] : model.metadata()) {
    if (key != "general.alignment") writer.set(key, value);
  }
  const gguf::TensorInfo& embeddings = model.tensor("token_embd.weight");
  std::vector<const gguf::TensorInfo*> sources;
  for (const auto& tensor : model.tensors()) {
    if (tensor.name == "output.weight") {
      if (!keep_copy) continue;
      writer.add_tensor("output.weight", embeddings.type, embeddings.shape);
      sources.push_back(&embeddings);
    } else {
      writer.add_tensor(tensor.name, tensor.type, tensor.shape);
      sources.push_back(&tensor);
    }
  }
  writer.open(path);
  for (const auto* source : sources) writer.write_tensor(source->data, source->bytes);
  writer.finish();
}

std::vector<float> logits_of(const std::filesystem::path& path, const std::vector<int32_t>& tokens) {
  EngineOptions options;
  options.model = path;
  options.manifest = test::default_manifest_path();
  options.backend = "cpu";
  const Engine engine(options);
  Session session(engine.model(), {.n_ctx = 16, .execution = {}});
  return session.forward(tokens, true);
}

TEST(TiedEmbeddings, OutputFallsBackToTheTokenEmbeddings) {
  const auto source = test::reference_dir() / "models" / "qwen3moe-tiny-iq3_s.gguf";
  ASSERT_REFERENCE(source);
  const gguf::Model model(source);
  const auto folder = std::filesystem::temp_directory_path() / "strata-tied";
  std::filesystem::create_directories(folder);
  write_variant(model, folder / "tied.gguf", false);
  write_variant(model, folder / "copied.gguf", true);
  const std::vector<int32_t> tokens = {3, 14, 15, 92, 65};
  const auto tied = logits_of(folder / "tied.gguf", tokens);
  const auto copied = logits_of(folder / "copied.gguf", tokens);
  const auto original = logits_of(source, tokens);
  std::filesystem::remove_all(folder);
  EXPECT_EQ(tied, copied);
  EXPECT_NE(tied, original) << "the original's own output matrix differs from its embeddings";
}

}  // namespace
}  // namespace strata
