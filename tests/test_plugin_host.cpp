#include "core/plugin/plugin_host.hpp"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <spdlog/sinks/ringbuffer_sink.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "core/engine/engine.hpp"
#include "core/gguf/ggml_types.hpp"
#include "core/util/error.hpp"
#include "core/util/log.hpp"
#include "plugins/plugin_test_support.hpp"
#include "strata/cpu_isa.hpp"
#include "support/model_copy.hpp"
#include "support/reference.hpp"
#include "support/scoped_environment.hpp"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using strata::PluginHost;
using strata::testing::test_plugin_path;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
namespace type_id = strata::gguf::type_id;

const std::string kHostAbi = std::to_string(STRATA_ABI_MAJOR) + "." + std::to_string(STRATA_ABI_MINOR);

json entry(const fs::path& file) { return {{"file", file.string()}}; }

// Loads a manifest written into a scratch folder and captures what the host logs meanwhile.
class PluginHostTest : public ::testing::Test {
 protected:
  void SetUp() override { strata::log().sinks().push_back(log_sink_); }
  void TearDown() override {
    auto& sinks = strata::log().sinks();
    sinks.erase(std::remove(sinks.begin(), sinks.end(), log_sink_), sinks.end());
  }

  std::unique_ptr<PluginHost> open_manifest(const json& manifest) {
    return PluginHost::open(strata::load_manifest(folder_.write("manifest.json", manifest.dump())));
  }
  std::unique_ptr<PluginHost> open(const std::vector<fs::path>& files, json prefer = json::object()) {
    json plugins = json::array();
    for (const auto& file : files) plugins.push_back(entry(file));
    return open_manifest(json{{"plugins", plugins}, {"prefer", prefer}});
  }

  std::string logged() const {
    std::string text;
    for (const auto& line : log_sink_->last_formatted()) text += line;
    return text;
  }

  strata::testing::ScratchFolder folder_;
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> log_sink_ =
      std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(256);
};

std::vector<std::string> loaded_names(const PluginHost& host) {
  std::vector<std::string> names;
  for (const auto& plugin : host.loaded()) names.push_back(plugin.name);
  return names;
}

std::string reason_for(const PluginHost& host, const fs::path& file) {
  for (const auto& skipped : host.skipped()) {
    if (skipped.file == file) return skipped.reason;
  }
  return "(not skipped)";
}

struct SkipCase {
  const char* label;
  std::string plugin;    // a test plugin name (test_plugin_path)
  std::string expected;  // part of the reason
};

class PluginSkipReason : public PluginHostTest, public ::testing::WithParamInterface<SkipCase> {};

// Each bad plugin sits between two good ones: it is skipped with its reason and the good ones still load.
TEST_P(PluginSkipReason, BadPluginIsSkippedWhileGoodOnesLoad) {
  const auto bad = test_plugin_path(GetParam().plugin);
  const auto host = open({test_plugin_path("quant-q4_0"), bad, test_plugin_path("test-logs-options")});
  EXPECT_THAT(loaded_names(*host), ElementsAre("quant-q4_0", "test-logs-options"));
  ASSERT_EQ(host->skipped().size(), 1u);
  EXPECT_THAT(reason_for(*host, bad), HasSubstr(GetParam().expected));
  EXPECT_THAT(logged(), HasSubstr(bad.string() + ": " + host->skipped().front().reason + "; skipped"));
}

INSTANTIATE_TEST_SUITE_P(
    PluginHost, PluginSkipReason,
    ::testing::Values(
        SkipCase{"AbiMajorNewer", "test-abi-major-newer",
                 "built for plugin ABI " + std::to_string(STRATA_ABI_MAJOR + 1) + ".0, this host speaks " + kHostAbi},
        SkipCase{"AbiMinorNewer", "test-abi-minor-newer",
                 "built for plugin ABI " + std::to_string(STRATA_ABI_MAJOR) + "." +
                     std::to_string(STRATA_ABI_MINOR + 1) + ", this host speaks " + kHostAbi},
        SkipCase{"NoQuerySymbol", "test-no-query-symbol", "no strata_plugin_query symbol: not a Strata plugin"},
        SkipCase{"NullDescriptor", "test-null-descriptor", "strata_plugin_query returned no descriptor (NULL)"},
        SkipCase{"ShortDescriptor", "test-short-descriptor", "too small for the ABI 1.0 fields"},
        SkipCase{"UnknownKind", "test-unknown-kind", "unknown plugin kind 99"},
        SkipCase{"UnsupportedProbe", "test-unsupported-probe",
                 "probe: unsupported: needs the frobnicator instruction set"},
        SkipCase{"FailingInit", "test-failing-init", "init: invalid argument: option 'threads' must be a number"},
        SkipCase{"BadQuantTable", "test-bad-quant-table", "Q8_0 declared as 32 values in 30 bytes"},
        SkipCase{"BadRepackedLayout", "test-bad-repacked-layout",
                 "Q5_0's repacked layout for the GPU holds 64 values in 44 bytes a block; the type's blocks hold 32"},
        SkipCase{"Int8OffsetsWithoutLevels", "test-offsets-without-levels",
                 "Q4_K offers cpu_rows_int8_offsets without cpu_rows_to_int8"},
        SkipCase{"MissingFile", "test-never-built", "no such file"}),
    [](const ::testing::TestParamInfo<SkipCase>& info) { return std::string(info.param.label); });

TEST_F(PluginHostTest, AbiMismatchLogLineNamesTheFileAndBothVersions) {
  const auto newer = test_plugin_path("test-abi-major-newer");
  open({newer});
  EXPECT_THAT(logged(), HasSubstr(newer.string() + ": built for plugin ABI " + std::to_string(STRATA_ABI_MAJOR + 1) +
                                  ".0, this host speaks " + kHostAbi));
}

// A newer host keeps loading plugins of every older minor of its major.
TEST_F(PluginHostTest, PluginOfAnOlderMinorLoads) {
  const auto host = open({test_plugin_path("test-abi-minor-older")});
  EXPECT_THAT(loaded_names(*host), ElementsAre("test-abi-minor-older"));
  ASSERT_EQ(host->loaded().size(), 1u);
  EXPECT_EQ(strata::abi_version_text(host->loaded().front().abi_major, host->loaded().front().abi_minor),
            std::to_string(STRATA_ABI_MAJOR) + ".0");
}

TEST_F(PluginHostTest, RejectedQuantTableLeavesNoTypeBehind) {
  const auto host = open({test_plugin_path("test-bad-quant-table")});
  ASSERT_EQ(host->skipped().size(), 1u);
  EXPECT_FALSE(host->quants().offers().contains(type_id::Q5_0));
  EXPECT_EQ(host->quants().offers().at(type_id::Q8_0).size(), 1u);
  EXPECT_EQ(host->quants().provider_of(type_id::Q8_0), "core");
}

TEST_F(PluginHostTest, FileThatIsNotALibraryIsSkipped) {
  const auto text_file = folder_.write("libnot-a-library.so", "this is a text file, not an ELF shared library\n");
  const auto host = open({text_file, test_plugin_path("quant-q4_0")});
  EXPECT_THAT(loaded_names(*host), ElementsAre("quant-q4_0"));
  EXPECT_THAT(reason_for(*host, text_file), HasSubstr("not a loadable shared library"));
}

TEST_F(PluginHostTest, SecondPluginWithTheSameNameIsSkipped) {
  const auto example = test_plugin_path("quant-q4_0");
  const auto host = open({example, example});
  EXPECT_THAT(loaded_names(*host), ElementsAre("quant-q4_0"));
  EXPECT_EQ(reason_for(*host, example), "a plugin named 'quant-q4_0' is already loaded from " + example.string());
}

TEST_F(PluginHostTest, DisabledPluginIsListedAsSkippedAndNotLoaded) {
  const auto example = test_plugin_path("quant-q4_0");
  const auto host = open_manifest(json{{"plugins", {{{"file", example.string()}, {"enabled", false}}}}});
  EXPECT_TRUE(host->loaded().empty());
  EXPECT_EQ(reason_for(*host, example), "disabled in the manifest");
  EXPECT_EQ(host->quants().find(type_id::Q4_0), nullptr);
}

TEST_F(PluginHostTest, LoadedPluginIsDescribed) {
  const auto example = test_plugin_path("quant-q4_0");
  const auto host = open({example});
  ASSERT_EQ(host->loaded().size(), 1u);
  const auto& plugin = host->loaded().front();
  EXPECT_EQ(plugin.name, "quant-q4_0");
  EXPECT_EQ(plugin.kind, "quant");
  EXPECT_EQ(plugin.version, "1.0.0");
  EXPECT_EQ(strata::abi_version_text(plugin.abi_major, plugin.abi_minor), kHostAbi);
  EXPECT_EQ(plugin.file, example);
  EXPECT_EQ(plugin.score, 1);
  EXPECT_TRUE(host->problems().empty());
}

TEST_F(PluginHostTest, CoreBaseTypesAreAlwaysServed) {
  const auto host = open(std::vector<fs::path>{});
  for (const uint32_t id : {type_id::F32, type_id::F16, type_id::BF16, type_id::Q8_0}) {
    EXPECT_EQ(host->quants().provider_of(id), "core") << id;
  }
}

// A block's f16 scale as bytes (little-endian).
void put_half(std::vector<uint8_t>& block, uint16_t bits) {
  block.push_back(bits & 0xff);
  block.push_back(bits >> 8);
}

TEST_F(PluginHostTest, ExamplePluginDecodesQ4_0) {
  const auto host = open({test_plugin_path("quant-q4_0")});
  ASSERT_EQ(host->quants().provider_of(type_id::Q4_0), "quant-q4_0");
  // d = 0.5; byte j holds code j (value j) low and code 15 - j (value j + 16) high.
  std::vector<uint8_t> block;
  put_half(block, 0x3800);
  for (int j = 0; j < 16; ++j) block.push_back(static_cast<uint8_t>(j | ((15 - j) << 4)));
  ASSERT_EQ(block.size(), 18u);
  std::vector<float> values(32);
  host->quants().dequantize(type_id::Q4_0, block.data(), values.data(), 32);
  EXPECT_EQ(values[0], -4.0f);
  EXPECT_EQ(values[15], 3.5f);
  EXPECT_EQ(values[16], 3.5f);
  EXPECT_EQ(values[31], -4.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(values[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(values[j + 16], (15 - j - 8) * 0.5f) << j;
  }
}

TEST_F(PluginHostTest, ExamplePluginDecodesQ4_1) {
  const auto host = open({test_plugin_path("quant-q4_0")});
  ASSERT_EQ(host->quants().provider_of(type_id::Q4_1), "quant-q4_0");
  // Two blocks, to check the 20-byte stride: (d, m) = (0.25, -1) then (2, 0.5).
  const std::pair<uint16_t, uint16_t> scales[] = {{0x3400, 0xbc00}, {0x4000, 0x3800}};
  const float d_values[] = {0.25f, 2.0f}, m_values[] = {-1.0f, 0.5f};
  std::vector<uint8_t> blocks;
  for (const auto& [d, m] : scales) {
    put_half(blocks, d);
    put_half(blocks, m);
    for (int j = 0; j < 16; ++j) blocks.push_back(static_cast<uint8_t>(j | ((j ^ 5) << 4)));
  }
  ASSERT_EQ(blocks.size(), 40u);
  std::vector<float> values(64);
  host->quants().dequantize(type_id::Q4_1, blocks.data(), values.data(), 64);
  EXPECT_EQ(values[0], -1.0f);
  EXPECT_EQ(values[16], 5 * 0.25f - 1.0f);
  EXPECT_EQ(values[32 + 15], 15 * 2.0f + 0.5f);
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(values[b * 32 + j], j * d_values[b] + m_values[b]) << b << " " << j;
      EXPECT_EQ(values[b * 32 + j + 16], (j ^ 5) * d_values[b] + m_values[b]) << b << " " << j;
    }
  }
}

// Quantizing through the registry and decoding back stays within one step of each block's scale.
TEST_F(PluginHostTest, ExamplePluginRoundTripsWithinOneStep) {
  const auto host = open({test_plugin_path("quant-q4_0")});
  std::mt19937 random(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> source(4 * 64);
  for (auto& value : source) value = normal(random);
  for (const uint32_t id : {type_id::Q4_0, type_id::Q4_1}) {
    const auto* info = strata::gguf::find_type(id);
    std::vector<uint8_t> blocks(source.size() / 32 * info->block_bytes);
    std::vector<float> decoded(source.size());
    host->quants().quantize(id, source.data(), blocks.data(), 4, 64);
    host->quants().dequantize(id, blocks.data(), decoded.data(), static_cast<int64_t>(decoded.size()));
    for (std::size_t b = 0; b < source.size() / 32; ++b) {
      const auto first = source.begin() + b * 32;
      const auto [low, high] = std::minmax_element(first, first + 32);
      const float step = id == type_id::Q4_0 ? std::max(-*low, *high) / 8 : (*high - *low) / 15;
      for (std::size_t i = b * 32; i < b * 32 + 32; ++i) {
        EXPECT_LE(std::fabs(decoded[i] - source[i]), step * 1.01f) << info->name << " value " << i;
      }
    }
  }
}

TEST_F(PluginHostTest, TwoProvidersWithoutPreferenceAreReportedAndTheHostKeepsRunning) {
  const auto host = open({test_plugin_path("test-q8_0-alt"), test_plugin_path("quant-q4_0")});
  ASSERT_EQ(host->problems().size(), 1u);
  EXPECT_THAT(host->problems().front(), HasSubstr("Q8_0 is offered by core, test-q8_0-alt"));
  EXPECT_THAT(logged(), HasSubstr(host->problems().front()));
  EXPECT_EQ(host->quants().find(type_id::Q8_0), nullptr);
  EXPECT_EQ(host->quants().provider_of(type_id::Q4_0), "quant-q4_0");
  EXPECT_EQ(host->quants().provider_of(type_id::F16), "core");
}

// The default manifest's plugins (the CPU backend among them) plus extra ones, for loading a model.
fs::path manifest_with(const strata::testing::ScratchFolder& folder, const std::vector<fs::path>& extra) {
  const fs::path defaults = strata::test::default_manifest_path();
  json manifest = json::parse(std::ifstream(defaults));
  for (auto& plugin : manifest["plugins"]) {
    plugin["file"] = (defaults.parent_path() / plugin["file"].get<std::string>()).string();
  }
  for (const auto& file : extra) manifest["plugins"].push_back(entry(file));
  return folder.write("model-manifest.json", manifest.dump());
}

// What opening an engine on model throws, or "" when it opens.
std::string engine_error(const fs::path& model, const fs::path& manifest) {
  try {
    strata::EngineOptions options;
    options.model = model;
    options.manifest = manifest;
    options.backend = "cpu";
    const strata::Engine engine(options);
  } catch (const strata::Error& error) {
    return error.what();
  }
  return "";
}

TEST_F(PluginHostTest, ModelLoadReportsTheProvidersConflictOverItsTensorType) {
  const fs::path model = strata::test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(model);
  const std::string error = engine_error(model, manifest_with(folder_, {test_plugin_path("test-q8_0-alt")}));
  EXPECT_THAT(error, HasSubstr(model.string() + ": tensor 'token_embd.weight': Q8_0 is offered by core, test-q8_0-alt "
                                                "and the manifest prefers none of them; add \"Q8_0\": [\"core\"] (or "
                                                "another of them) to its \"prefer\""));
}

TEST_F(PluginHostTest, ModelLoadNamesATensorTypeNoPluginDecodes) {
  const fs::path source = strata::test::reference_dir() / "models" / "qwen3moe-tiny-q8_0.gguf";
  ASSERT_REFERENCE(source);
  const fs::path model = folder_.path() / "iq2_xxs.gguf";
  strata::test::ModelChanges changes;
  changes.types["blk.0.attn_q.weight"] = type_id::IQ2_XXS;
  strata::test::write_model_copy(strata::gguf::Model(source), model, changes);
  EXPECT_EQ(engine_error(model, manifest_with(folder_, {})),
            model.string() +
                ": tensor 'blk.0.attn_q.weight': no plugin decodes tensor type IQ2_XXS (is its quant plugin loaded?)");
}

TEST_F(PluginHostTest, PreferenceDecidesBetweenProviders) {
  const auto alt = test_plugin_path("test-q8_0-alt");
  const auto prefers_alt = open({alt}, {{"Q8_0", {"test-q8_0-alt", "core"}}});
  EXPECT_TRUE(prefers_alt->problems().empty());
  EXPECT_EQ(prefers_alt->quants().provider_of(type_id::Q8_0), "test-q8_0-alt");

  // A preferred provider that is not loaded is passed over for the next one named.
  const auto prefers_core = open({alt}, {{"Q8_0", {"quant-q8-missing", "core"}}});
  EXPECT_TRUE(prefers_core->problems().empty());
  EXPECT_EQ(prefers_core->quants().provider_of(type_id::Q8_0), "core");
}

TEST_F(PluginHostTest, OptionsReachInitAndPluginLogLinesReachTheHostLog) {
  const auto file = test_plugin_path("test-logs-options");
  open_manifest(json{{"plugins", {{{"file", file.string()}, {"options", {{"threads", 4}}}}}}});
  EXPECT_THAT(logged(), HasSubstr("[test-logs-options] options {\"threads\":4}"));
}

// The host's CPU instruction set request (--cpu-isa) reaches a quant plugin's kernels through the host services,
// over STRATA_CPU_ISA: each level asked for is the one the kernels run (or this CPU's best, below it).
TEST_F(PluginHostTest, CpuIsaRequestReachesAPluginsKernels) {
  using strata::sdk::CpuIsa;
  const strata::test::ScopedEnvironment environment("STRATA_CPU_ISA", "avx2");
  struct ClearRequest {
    ~ClearRequest() { strata::request_cpu_isa(""); }
  } clear_request;
  for (const CpuIsa isa : strata::sdk::kAllCpuIsas) {
    strata::request_cpu_isa(strata::sdk::cpu_isa_name(isa));
    const auto host = open({test_plugin_path("test-reports-cpu-isa")});  // loaded afresh: it decides anew
    const strata_quant_type* type = host->quants().find(type_id::Q5_1);
    ASSERT_NE(type, nullptr) << logged();
    float level = -1.0f;
    type->cpu_dot_rows(32, 1, nullptr, 24, nullptr, &level);
    EXPECT_EQ(level, static_cast<float>(std::min(isa, strata::sdk::detect_cpu_isa())))
        << strata::sdk::cpu_isa_name(isa);
  }
}

TEST(CpuIsaRequest, UnknownNamesAreRefusedNamingTheFlagOrTheVariable) {
  strata::test::ScopedEnvironment environment("STRATA_CPU_ISA", nullptr);
  const auto refusal = [](const std::string& flag) {
    try {
      strata::request_cpu_isa(flag);
    } catch (const strata::Error& error) {
      return std::string(error.what());
    }
    return std::string();
  };
  EXPECT_EQ(refusal("neon"), "--cpu-isa is \"neon\", not one of auto, avx512, avx2, scalar");
  environment.set("sse9");
  EXPECT_EQ(refusal(""), "STRATA_CPU_ISA is \"sse9\", not one of auto, avx512, avx2, scalar");
  environment.set("scalar");
  EXPECT_EQ(refusal("avx2"), "");
  EXPECT_EQ(refusal(""), "");
}

TEST_F(PluginHostTest, DestructionShutsPluginsDownAndUnloadsThem) {
  const auto file = test_plugin_path("test-logs-options");
  auto host = open({file});
  ASSERT_THAT(loaded_names(*host), ElementsAre("test-logs-options"));
  EXPECT_THAT(logged(), Not(HasSubstr("shutting down")));
  host.reset();
  EXPECT_THAT(logged(), HasSubstr("[test-logs-options] shutting down"));
  EXPECT_EQ(::dlopen(file.c_str(), RTLD_NOW | RTLD_NOLOAD), nullptr) << "the library is still loaded";
}

}  // namespace
