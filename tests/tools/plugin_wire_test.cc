// Every PluginEntry field survives the trip from distinfo's loading child.
#include "tools/distinfo/plugin_wire.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dist::distinfo {
namespace {

TEST(PluginWireTest, EveryFieldSurvivesTheTrip) {
  PluginEntry entry;
  entry.kind = DIST_PLUGIN_BACKEND;
  entry.name = "gloo";
  entry.path = "/opt/dist/plugins/libdist-backend-gloo.so";
  entry.status = DIST_PLUGIN_UNAVAILABLE;
  entry.reason = "no \"device\"\there";
  entry.abi_major = 1;
  entry.abi_minor = 7;
  entry.version = "1.2.3";
  entry.library_version = "Gloo 0.5.0";
  entry.has_capabilities = true;
  entry.capabilities.device_types = 0x3;
  entry.capabilities.dtypes = 0xff;
  entry.capabilities.collectives = 0x7ff;
  entry.capabilities.all_reduce_ops = 0x1f;
  entry.capabilities.reduce_ops = 0x0f;
  entry.capabilities.reduce_scatter_ops = 0x07;
  entry.capabilities.flags = 0x80000011u;  // a bit from a newer ABI too
  entry.notes = "";                        // present but empty is not absent

  // Through text, as over the pipe.
  absl::StatusOr<PluginEntry> back =
      EntryFromWire(nlohmann::json::parse(EntryToWire(entry).dump()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, entry.kind);
  EXPECT_EQ(back->name, entry.name);
  EXPECT_EQ(back->path, entry.path);
  EXPECT_EQ(back->status, entry.status);
  EXPECT_EQ(back->fault, LoadFault::kNone);
  EXPECT_EQ(back->reason, entry.reason);
  EXPECT_EQ(back->abi_major, 1u);
  EXPECT_EQ(back->abi_minor, 7u);
  EXPECT_EQ(back->version, entry.version);
  EXPECT_EQ(back->library_version, entry.library_version);
  EXPECT_TRUE(back->has_capabilities);
  EXPECT_EQ(back->capabilities.struct_size, sizeof(dist_backend_capabilities_t));
  EXPECT_EQ(back->capabilities.device_types, 0x3u);
  EXPECT_EQ(back->capabilities.dtypes, 0xffu);
  EXPECT_EQ(back->capabilities.collectives, 0x7ffu);
  EXPECT_EQ(back->capabilities.all_reduce_ops, 0x1fu);
  EXPECT_EQ(back->capabilities.reduce_ops, 0x0fu);
  EXPECT_EQ(back->capabilities.reduce_scatter_ops, 0x07u);
  EXPECT_EQ(back->capabilities.flags, 0x80000011u);
  EXPECT_EQ(back->capabilities.notes, nullptr);
  ASSERT_TRUE(back->notes.has_value());
  EXPECT_EQ(*back->notes, "");
}

TEST(PluginWireTest, RendezvousSchemesAndNoCapabilities) {
  PluginEntry entry;
  entry.kind = DIST_PLUGIN_RENDEZVOUS;
  entry.name = "tcp";
  entry.status = DIST_PLUGIN_OK;
  entry.schemes = {"tcp", "tcp6"};
  absl::StatusOr<PluginEntry> back = EntryFromWire(EntryToWire(entry));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->kind, DIST_PLUGIN_RENDEZVOUS);
  EXPECT_EQ(back->schemes, (std::vector<std::string>{"tcp", "tcp6"}));
  EXPECT_FALSE(back->has_capabilities);
  EXPECT_EQ(back->capabilities.struct_size, 0u);
  EXPECT_FALSE(back->notes.has_value());
}

TEST(PluginWireTest, AnythingElseIsAnError) {
  EXPECT_FALSE(EntryFromWire(nlohmann::json::object()).ok());
  nlohmann::json wire = EntryToWire(PluginEntry());
  wire["capabilities"] = {1, 2};
  EXPECT_FALSE(EntryFromWire(wire).ok());
  wire = EntryToWire(PluginEntry());
  wire["name"] = 5;
  absl::StatusOr<PluginEntry> bad = EntryFromWire(wire);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), ::testing::HasSubstr("bad plugin entry"));
}

}  // namespace
}  // namespace dist::distinfo
