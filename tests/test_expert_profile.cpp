// The expert profile file: what is written reads back the same, and every kind of bad file is refused with one
// line naming the file and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "core/experts/expert_profile.hpp"
#include "core/util/error.hpp"
#include "core/util/output_file.hpp"
#include "plugins/plugin_test_support.hpp"
#include "support/error_message.hpp"
#include "support/expert_counts.hpp"

namespace strata {
namespace {

using test::error_of;

ExpertProfileInfo info_of(int32_t n_layer, int32_t n_expert) {
  ExpertProfileInfo info;
  info.model_file = "tiny \"model\".gguf";  // quoted in the JSON
  info.architecture = "qwen3moe";
  info.n_layer = n_layer;
  info.n_expert = n_expert;
  info.n_expert_used = 2;
  info.prompts = 3;
  info.tokens = 17;
  return info;
}

TEST(ExpertProfile, WhatIsWrittenReadsBackTheSame) {
  RoutingCounts counts(2, 3);
  const double values[2][3] = {{0, 1, 2.5}, {1e15, 0.1, 1e-300}};  // decayed counts need not be whole
  for (int32_t layer = 0; layer < 2; ++layer) {
    for (int32_t expert = 0; expert < 3; ++expert) counts.set(layer, expert, values[layer][expert]);
  }
  const testing::ScratchFolder folder;
  const auto path = folder.path() / "profile.json";
  write_expert_profile(path, counts, info_of(2, 3));
  for (const auto& [n_layer, n_expert] : {std::pair{2, 3}, std::pair{0, 0}}) {
    const ExpertProfile profile = read_expert_profile(path, n_layer, n_expert);
    EXPECT_EQ(profile.info.model_file, "tiny \"model\".gguf");
    EXPECT_EQ(profile.info.architecture, "qwen3moe");
    EXPECT_EQ(profile.info.n_layer, 2);
    EXPECT_EQ(profile.info.n_expert, 3);
    EXPECT_EQ(profile.info.n_expert_used, 2);
    EXPECT_EQ(profile.info.prompts, 3);
    EXPECT_EQ(profile.info.tokens, 17);
    for (int32_t layer = 0; layer < 2; ++layer) {
      for (int32_t expert = 0; expert < 3; ++expert) EXPECT_EQ(profile.counts.at(layer, expert), values[layer][expert]);
    }
  }
  // One layer a line, whole counts without a fraction.
  const std::string text = format_expert_profile(counts, info_of(2, 3));
  EXPECT_NE(text.find("\n    [0, 1, 2.5],\n    [1e+15, 0.1, 1e-300]\n"), std::string::npos) << text;
  EXPECT_EQ(text.rfind("{\n  \"format\": \"strata-expert-profile\",\n  \"version\": 1,\n", 0), 0u) << text;

  // Through an OutputFile opened before the work.
  const auto early = folder.path() / "early.json";
  OutputFile out(early, "the expert profile");
  write_expert_profile(out, counts, info_of(2, 3));
  EXPECT_EQ(read_expert_profile(early, 2, 3).counts.at(0, 2), 2.5);
}

TEST(ExpertProfile, CountsThatAreNoCountsAreNotWritten) {
  RoutingCounts counts(2, 3);
  EXPECT_NE(error_of([&] {
              format_expert_profile(counts, info_of(3, 3));
            }).find("the counts are for 2 layers of 3 experts, the model has 3 of 3"),
            std::string::npos);
  counts.set(1, 2, -1.0);
  EXPECT_NE(error_of([&] {
              format_expert_profile(counts, info_of(2, 3));
            }).find("the count of expert 2 in layer 1 is -1, not a finite count >= 0"),
            std::string::npos);
  counts.set(1, 2, std::numeric_limits<double>::quiet_NaN());
  EXPECT_NE(error_of([&] { format_expert_profile(counts, info_of(2, 3)); }).find("is nan"), std::string::npos);
  // Nothing is left behind by a refused write.
  const testing::ScratchFolder folder;
  EXPECT_NE(error_of([&] { write_expert_profile(folder.path() / "p.json", counts, info_of(2, 3)); }), "");
  EXPECT_FALSE(std::filesystem::exists(folder.path() / "p.json"));
}

// A good profile of 2 layers x 3 experts, as text, with one part replaced.
std::string good_profile() {
  return R"({"format": "strata-expert-profile", "version": 1,
  "model": {"file": "m.gguf", "architecture": "qwen3moe", "n_layer": 2, "n_expert": 3, "n_expert_used": 2},
  "prompts": 1, "tokens": 4,
  "counts": [[1, 2, 5], [0, 4, 4]]})";
}

std::string replaced(const std::string& from, const std::string& to) {
  std::string text = good_profile();
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

// Every bad file: one line, starting with the file's path, naming the field and what is wrong.
TEST(ExpertProfile, BadFilesAreRefusedNamingTheFileAndTheField) {
  const std::filesystem::path path = "/profiles/p.json";
  ASSERT_EQ(parse_expert_profile(good_profile(), path, 2, 3).counts.total(), 16.0);
  const struct {
    std::string text;
    std::string error;
  } cases[] = {
      {"", "/profiles/p.json:1:1: not JSON (a strata expert profile is): syntax error"},
      {"{\"format\": \n 3", "/profiles/p.json:2:3: not JSON"},
      {"[1, 2]", "/profiles/p.json: the top level: expected an object (a strata expert profile), found array"},
      {"{}", "/profiles/p.json: format: missing"},
      {replaced("\"strata-expert-profile\"", "\"gguf\""),
       "/profiles/p.json: format: expected \"strata-expert-profile\", found \"gguf\": not a strata expert profile"},
      {replaced("\"version\": 1", "\"version\": 2"),
       "/profiles/p.json: version: 2 is not a version this strata reads (it reads 1)"},
      {replaced("\"version\": 1", "\"version\": \"1\""),
       "/profiles/p.json: version: expected an integer from 1 to 2147483647, found \"1\""},
      {replaced("\"version\": 1", "\"version\": 1.5"), "/profiles/p.json: version: expected an integer"},
      {replaced("\"model\": {", "\"modell\": {"), "/profiles/p.json: model: missing"},
      {replaced("\"file\": \"m.gguf\"", "\"file\": 7"),
       "/profiles/p.json: model.file: expected a string, found number"},
      {replaced("\"n_layer\": 2", "\"n_layer\": 3"),
       "/profiles/p.json: model.n_layer: the profile is of a model of 3 layers, this model has 2 (a profile of another "
       "model?)"},
      {replaced("\"n_layer\": 2", "\"n_layer\": -2"),
       "/profiles/p.json: model.n_layer: expected an integer from 1 to 2147483647, found -2"},
      {replaced("\"n_expert\": 3", "\"n_expert\": 4"),
       "/profiles/p.json: model.n_expert: the profile is of a model of 4 experts a layer, this model has 3"},
      {replaced("\"n_expert_used\": 2", "\"n_expert_used\": 4"),
       "/profiles/p.json: model.n_expert_used: expected an integer from 1 to 3, found 4"},
      {replaced("\"tokens\": 4", "\"tokens\": -4"), "/profiles/p.json: tokens: expected an integer from 0 to"},
      {replaced("\"prompts\": 1,", ""), "/profiles/p.json: prompts: missing"},
      {replaced("[[1, 2, 5], [0, 4, 4]]", "{}"), "/profiles/p.json: counts: expected an array of layers, found object"},
      {replaced("[[1, 2, 5], [0, 4, 4]]", "[[1, 2, 5]]"),
       "/profiles/p.json: counts: holds 1 layers, model.n_layer says 2"},
      {replaced("[0, 4, 4]", "[0, 4]"), "/profiles/p.json: counts[1]: holds 2 counts, model.n_expert says 3"},
      {replaced("[0, 4, 4]", "7"), "/profiles/p.json: counts[1]: expected an array of counts, found number"},
      {replaced("[0, 4, 4]", "[0, -1, 4]"), "/profiles/p.json: counts[1][1]: expected a finite count >= 0, found -1"},
      {replaced("[0, 4, 4]", "[0, -0.5, 4]"),
       "/profiles/p.json: counts[1][1]: expected a finite count >= 0, found -0.5"},
      {replaced("[0, 4, 4]", "[0, \"4\", 4]"), "/profiles/p.json: counts[1][1]: expected a number, found string"},
      {replaced("[0, 4, 4]", "[0, null, 4]"), "/profiles/p.json: counts[1][1]: expected a number, found null"},
      {replaced("[0, 4, 4]", "[0, 1e400, 4]"), "/profiles/p.json: number overflow parsing '1e400'"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const std::string error = error_of([&] { parse_expert_profile(c.text, path, 2, 3); });
    EXPECT_EQ(error.rfind(c.error, 0), 0u) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  // Unknown keys are ignored (a later version may add some that an older reader can skip).
  EXPECT_EQ(parse_expert_profile(replaced("\"prompts\"", "\"note\": [1], \"prompts\""), path, 2, 3).counts.total(),
            16.0);
}

TEST(ExpertProfile, FilesThatCannotBeReadAreRefusedNamingThem) {
  const testing::ScratchFolder folder;
  const std::string missing = error_of([&] { read_expert_profile(folder.path() / "none.json", 2, 3); });
  EXPECT_EQ(missing.rfind((folder.path() / "none.json").string() + ": cannot read the expert profile", 0), 0u)
      << missing;
  const std::string directory = error_of([&] { read_expert_profile(folder.path(), 2, 3); });
  EXPECT_NE(directory.find("a folder"), std::string::npos) << directory;
  const auto large = folder.write("large.json", std::string(kMaxExpertProfileBytes + 1, ' '));
  EXPECT_NE(error_of([&] { read_expert_profile(large, 2, 3); }).find("more than the 16 MiB allowed"),
            std::string::npos);
}

TEST(ExpertProfile, TopPairsShareRanksOverAllLayers) {
  RoutingCounts uniform(4, 8);
  for (int32_t layer = 0; layer < 4; ++layer) {
    for (int32_t expert = 0; expert < 8; ++expert) uniform.set(layer, expert, 3.0);
  }
  EXPECT_DOUBLE_EQ(top_pairs_share(uniform, 0.25), 0.25);
  RoutingCounts skewed(2, 4);
  skewed.set(0, 1, 6.0);
  skewed.set(1, 3, 3.0);
  skewed.set(1, 0, 1.0);
  EXPECT_DOUBLE_EQ(top_pairs_share(skewed, 0.25), 0.9);  // 2 of 8 pairs
  EXPECT_DOUBLE_EQ(top_pairs_share(skewed, 1.0), 1.0);
  EXPECT_EQ(top_pairs_share(RoutingCounts(), 0.25), 0.0);
}

}  // namespace
}  // namespace strata
