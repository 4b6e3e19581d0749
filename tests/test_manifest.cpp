#include "core/plugin/manifest.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "plugins/plugin_test_support.hpp"

namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const fs::path kManifestPath = "/opt/models/strata.json";

// The message parse_manifest throws for text, or "" when it accepts the text.
std::string error_of(std::string_view text) {
  try {
    strata::parse_manifest(text, kManifestPath);
  } catch (const strata::Error& error) {
    return error.what();
  }
  return "";
}

TEST(Manifest, SyntaxErrorNamesLineAndColumn) {
  // The trailing comma on line 3 makes the '}' at column 21 the error.
  const std::string text = "{\n  \"plugins\": [\n    {\"file\": \"a.so\",}\n  ]\n}\n";
  const std::string error = error_of(text);
  EXPECT_THAT(error, StartsWith("/opt/models/strata.json:3:21: JSON syntax error: "));
  EXPECT_THAT(error, HasSubstr("expected string literal"));
}

TEST(Manifest, TruncatedTextPointsPastTheEnd) {
  EXPECT_THAT(error_of("{\"plugins\": ["), StartsWith("/opt/models/strata.json:1:14: JSON syntax error: "));
  EXPECT_THAT(error_of("{\n\"plugins\"\n  : [\n"), StartsWith("/opt/models/strata.json:4:1: JSON syntax error: "));
}

// A number too large for a double is well-formed JSON the parser still refuses (found by fuzzing: it
// escaped as another exception type and ended the process).
TEST(Manifest, NumberPastTheRangeOfDoublesIsAnError) {
  EXPECT_THAT(error_of("{\"plugins\": [], \"x\": 1e99999}"),
              AllOf(StartsWith("/opt/models/strata.json: JSON error: "), HasSubstr("number overflow")));
}

TEST(Manifest, UnknownKeyIsNamedByItsJsonPathWithASuggestion) {
  const std::string text = R"({"plugins": [{"file": "a.so"}, {"file": "b.so", "optoins": {}}]})";
  EXPECT_EQ(error_of(text), "/opt/models/strata.json: plugins[1].optoins: unknown key (did you mean \"options\"?)");
  EXPECT_EQ(error_of(R"({"plugin": []})"), "/opt/models/strata.json: plugin: unknown key (did you mean \"plugins\"?)");
}

TEST(Manifest, UnknownKeyFarFromAnyListsTheKnownKeys) {
  EXPECT_EQ(error_of(R"({"plugins": [{"file": "a.so", "threads": 4}]})"),
            "/opt/models/strata.json: plugins[0].threads: unknown key; known keys: file, options, enabled");
}

TEST(Manifest, PreferenceKeyMustBeAGgufTypeName) {
  EXPECT_EQ(error_of(R"({"prefer": {"IQ3_SS": ["quant-iq3"]}})"),
            "/opt/models/strata.json: prefer.IQ3_SS: not a GGUF type name nor \"backend\" (did you mean \"IQ3_S\"?)");
}

TEST(Manifest, WrongValueTypesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([])", "the top level: expected an object, found array"},
      {R"({"plugins": {}})", "plugins: expected an array, found object"},
      {R"({"plugins": ["a.so"]})", "plugins[0]: expected an object, found string"},
      {R"({"plugins": [{"file": 3}]})", "plugins[0].file: expected a string, found number"},
      {R"({"plugins": [{"options": {}}]})", "plugins[0]: missing \"file\""},
      {R"({"plugins": [{"file": ""}]})", "plugins[0].file: is empty"},
      {R"({"plugins": [{"file": "a.so", "options": []}]})", "plugins[0].options: expected an object, found array"},
      {R"({"plugins": [{"file": "a.so", "enabled": "no"}]})",
       "plugins[0].enabled: expected true or false, found string"},
      {R"({"prefer": []})", "prefer: expected an object, found array"},
      {R"({"prefer": {"Q8_0": "core"}})", "prefer.Q8_0: expected an array of plugin names, found string"},
      {R"({"prefer": {"Q8_0": ["core", 1]}})", "prefer.Q8_0[1]: expected a string, found number"},
  };
  for (const auto& [text, expected] : cases) {
    EXPECT_THAT(error_of(text), StartsWith("/opt/models/strata.json: " + std::string(expected))) << text;
  }
}

TEST(Manifest, PluginFilesResolveAgainstTheManifestFolder) {
  const auto manifest = strata::parse_manifest(
      R"({"plugins": [{"file": "plugins/libx.so"}, {"file": "../lib/liby.so"}, {"file": "/usr/lib/libz.so"}]})",
      kManifestPath);
  ASSERT_EQ(manifest.plugins.size(), 3u);
  EXPECT_EQ(manifest.plugins[0].file, "plugins/libx.so");
  EXPECT_EQ(manifest.plugins[0].path, fs::path("/opt/models/plugins/libx.so"));
  EXPECT_EQ(manifest.plugins[1].path, fs::path("/opt/lib/liby.so"));
  EXPECT_EQ(manifest.plugins[2].path, fs::path("/usr/lib/libz.so"));
  EXPECT_EQ(manifest.path, kManifestPath);
}

TEST(Manifest, AbsentFieldsTakeTheirDefaults) {
  const auto empty = strata::parse_manifest("{}", kManifestPath);
  EXPECT_TRUE(empty.plugins.empty());
  EXPECT_TRUE(empty.prefer.empty());

  const auto manifest = strata::parse_manifest(R"({"plugins": [{"file": "a.so"}]})", kManifestPath);
  ASSERT_EQ(manifest.plugins.size(), 1u);
  EXPECT_EQ(manifest.plugins[0].options_json, "{}");
  EXPECT_TRUE(manifest.plugins[0].enabled);
}

TEST(Manifest, OptionsEnabledAndPreferencesAreRead) {
  const auto manifest = strata::parse_manifest(
      R"({"plugins": [{"file": "a.so", "enabled": false, "options": {"threads": 4, "mode": "fast"}}],
          "prefer": {"IQ3_S": ["quant-iq3-alt", "quant-iq3"], "backend": ["cuda", "cpu"]}})",
      kManifestPath);
  ASSERT_EQ(manifest.plugins.size(), 1u);
  EXPECT_FALSE(manifest.plugins[0].enabled);
  EXPECT_EQ(nlohmann::json::parse(manifest.plugins[0].options_json),
            (nlohmann::json{{"threads", 4}, {"mode", "fast"}}));
  const std::map<std::string, std::vector<std::string>> expected{{"IQ3_S", {"quant-iq3-alt", "quant-iq3"}},
                                                                 {"backend", {"cuda", "cpu"}}};
  EXPECT_EQ(manifest.prefer, expected);
}

TEST(Manifest, LoadReadsTheFileAndResolvesAgainstItsFolder) {
  strata::testing::ScratchFolder folder;
  const auto path = folder.write("m.json", R"({"plugins": [{"file": "plugins/libx.so"}]})");
  const auto manifest = strata::load_manifest(path);
  EXPECT_EQ(manifest.path, path);
  ASSERT_EQ(manifest.plugins.size(), 1u);
  EXPECT_EQ(manifest.plugins[0].path, folder.path() / "plugins" / "libx.so");
}

TEST(Manifest, LoadReportsAnUnreadableFile) {
  strata::testing::ScratchFolder folder;
  const auto missing = folder.path() / "absent.json";
  try {
    strata::load_manifest(missing);
    FAIL() << "loading a missing manifest succeeded";
  } catch (const strata::Error& error) {
    EXPECT_THAT(error.what(), StartsWith(missing.string() + ": cannot read the manifest: "));
    EXPECT_THAT(error.what(), HasSubstr("No such file"));
  }
  EXPECT_THROW(strata::load_manifest(folder.path()), strata::Error);
}

// What load_manifest throws for path, or "" when it reads it.
std::string load_error(const fs::path& path) {
  try {
    strata::load_manifest(path);
  } catch (const strata::Error& error) {
    return error.what();
  }
  return "";
}

TEST(Manifest, LoadRefusesDevicesAndFilesPastTheSizeLimit) {
  EXPECT_EQ(load_error("/dev/null"),
            "/dev/null: cannot read the manifest: it is a character device, not a regular file");
  strata::testing::ScratchFolder folder;
  const auto at_limit = folder.write("at-limit.json", "{}" + std::string(strata::kMaxManifestBytes - 2, '\n'));
  EXPECT_EQ(load_error(at_limit), "");
  const auto past_limit = folder.write("past-limit.json", "{}" + std::string(strata::kMaxManifestBytes - 1, '\n'));
  EXPECT_EQ(load_error(past_limit), past_limit.string() + ": cannot read the manifest: it holds " +
                                        std::to_string(strata::kMaxManifestBytes + 1) +
                                        " bytes, more than the 1 MiB allowed");
}

TEST(Manifest, DefaultManifestIsBesideTheExecutable) {
  // strata_tests is built into the same folder as strata, where the build installs the default manifest.
  const auto path = strata::default_manifest_path();
  EXPECT_EQ(path.filename(), "strata-manifest.json");
  EXPECT_TRUE(fs::equivalent(path.parent_path(), STRATA_BIN_DIR));
  EXPECT_NO_THROW(strata::load_manifest(path));
}

}  // namespace
