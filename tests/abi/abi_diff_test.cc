// The ABI guard's judgement: what is breaking, what is an append, and when a
// version bump is missing.
#include "sdk/abi/abi_diff.h"

#include <string>

#include "gtest/gtest.h"

namespace dist::abi {
namespace {

const char kBase[] = R"(# comment
plugin version DIST_BACKEND_ABI 1.1
plugin struct dist_op_args_t size 16 align 8
plugin field dist_op_args_t.struct_size offset 0 size 8
plugin field dist_op_args_t.op offset 8 size 4
plugin enum DIST_SUM 0
plugin enum DIST_REDUCE_OP_COUNT 1
host version DIST_VERSION 1.0
host symbol dist_init exported
)";

std::vector<Item> Parse(const std::string& text) {
  absl::StatusOr<std::vector<Item>> items = ParseDescription(text);
  EXPECT_TRUE(items.ok()) << items.status();
  return items.ok() ? *items : std::vector<Item>{};
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return text.replace(at, from.size(), to);
}

TEST(AbiDiffTest, IdenticalIsClean) {
  EXPECT_TRUE(Compare(Parse(kBase), Parse(kBase)).empty());
  EXPECT_EQ(ExplainDrift(Compare(Parse(kBase), Parse(kBase)), "abi_v1.txt"), "");
}

TEST(AbiDiffTest, MovedFieldIsBreaking) {
  const std::string moved = Replace(kBase, "op offset 8", "op offset 12");
  const Diff diff = Compare(Parse(kBase), Parse(moved));
  ASSERT_EQ(diff.breaking.size(), 1u);
  const std::string message = ExplainDrift(diff, "sdk/abi/abi_v1.txt");
  EXPECT_NE(message.find("changed: field dist_op_args_t.op: offset 8 size 4 -> offset 12 size 4"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("Restore the old definitions"), std::string::npos) << message;
  EXPECT_NE(ExplainIncompatibility(diff, "ABI 1.0"), "");
}

TEST(AbiDiffTest, RemovedSymbolIsBreaking) {
  const std::string removed = Replace(kBase, "host symbol dist_init exported\n", "");
  const Diff diff = Compare(Parse(kBase), Parse(removed));
  ASSERT_EQ(diff.breaking.size(), 1u);
  EXPECT_NE(diff.breaking[0].find("removed: symbol dist_init"), std::string::npos);
}

TEST(AbiDiffTest, AppendWithoutBumpAsksForTheBump) {
  std::string grown = Replace(kBase, "size 16 align 8", "size 24 align 8");
  grown = Replace(grown, "plugin enum DIST_SUM 0\n",
                  "plugin field dist_op_args_t.flags offset 16 size 8\nplugin enum DIST_SUM 0\n");
  const Diff diff = Compare(Parse(kBase), Parse(grown));
  EXPECT_TRUE(diff.breaking.empty());
  ASSERT_EQ(diff.needs_bump.size(), 1u);
  const std::string message = ExplainDrift(diff, "sdk/abi/abi_v1.txt");
  EXPECT_NE(message.find("added: field dist_op_args_t.flags"), std::string::npos) << message;
  EXPECT_NE(message.find("bump DIST_BACKEND_ABI_MINOR"), std::string::npos) << message;
  EXPECT_NE(message.find("bazel run //sdk/abi:generate"), std::string::npos) << message;
  // Against a frozen release an append is fine.
  EXPECT_EQ(ExplainIncompatibility(diff, "ABI 1.0"), "");

  // With the bump it only needs regenerating.
  const std::string bumped = Replace(grown, "DIST_BACKEND_ABI 1.1", "DIST_BACKEND_ABI 1.2");
  const Diff bumped_diff = Compare(Parse(kBase), Parse(bumped));
  EXPECT_TRUE(bumped_diff.needs_bump.empty());
  EXPECT_NE(ExplainDrift(bumped_diff, "x").find("The version was bumped: regenerate"),
            std::string::npos);
}

// A struct filed under another ABI's version in the new description (as
// store.h moved to the rendezvous ABI) grows: the version that covers it now
// is the one to bump.
TEST(AbiDiffTest, AGrownStructAsksForTheVersionThatCoversItNow) {
  const std::string base = std::string(kBase) + "rendezvous version DIST_RENDEZVOUS_ABI 1.0\n";
  std::string grown = Replace(base, "plugin struct dist_op_args_t size 16 align 8",
                              "rendezvous struct dist_op_args_t size 24 align 8");
  grown += "rendezvous field dist_op_args_t.flags offset 16 size 8\n";
  const Diff diff = Compare(Parse(base), Parse(grown));
  EXPECT_TRUE(diff.breaking.empty());
  ASSERT_EQ(diff.needs_bump.size(), 1u);
  EXPECT_EQ(diff.needs_bump[0], "rendezvous");
  const std::string bumped = Replace(grown, "DIST_RENDEZVOUS_ABI 1.0", "DIST_RENDEZVOUS_ABI 1.1");
  EXPECT_TRUE(Compare(Parse(base), Parse(bumped)).needs_bump.empty());
}

TEST(AbiDiffTest, FieldInsertedInTheMiddleIsBreaking) {
  std::string inserted = Replace(kBase, "size 16 align 8", "size 24 align 8");
  inserted = Replace(inserted, "plugin field dist_op_args_t.op offset 8 size 4",
                     "plugin field dist_op_args_t.x offset 8 size 4\n"
                     "plugin field dist_op_args_t.op offset 16 size 4");
  const Diff diff = Compare(Parse(kBase), Parse(inserted));
  EXPECT_FALSE(diff.breaking.empty());
}

TEST(AbiDiffTest, NewCoreFunctionNeedsAHostMinorBump) {
  const std::string added = std::string(kBase) + "host symbol dist_new_thing exported\n";
  const Diff diff = Compare(Parse(kBase), Parse(added));
  EXPECT_TRUE(diff.breaking.empty());
  ASSERT_EQ(diff.needs_bump.size(), 1u);
  EXPECT_EQ(diff.needs_bump[0], "host");
  EXPECT_NE(ExplainDrift(diff, "x").find("DIST_VERSION_MINOR"), std::string::npos);
}

TEST(AbiDiffTest, MalformedLineIsAnError) {
  EXPECT_FALSE(ParseDescription("plugin struct\n").ok());
}

}  // namespace
}  // namespace dist::abi
