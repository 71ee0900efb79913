// HostLayout (core/host_hierarchy.h): which ranks share hosts, from the
// digests of their host identities, and whether the hierarchy applies.
#include <cstdint>
#include <vector>

#include "core/host_hierarchy.h"
#include "dist/cpp/host_identity.hpp"
#include "gtest/gtest.h"

namespace dist {
namespace {

using Ranks = std::vector<int32_t>;

TEST(HostLayoutTest, RanksInBlocksAreContiguous) {
  const HostLayout layout = HostLayout::FromDigests({7, 7, 9, 9});
  ASSERT_EQ(layout.hosts.size(), 2u);
  EXPECT_EQ(layout.hosts[0], (Ranks{0, 1}));
  EXPECT_EQ(layout.hosts[1], (Ranks{2, 3}));
  EXPECT_TRUE(layout.equal_hosts);
  EXPECT_TRUE(layout.contiguous);
  EXPECT_TRUE(layout.WorthIt());
  EXPECT_EQ(layout.Rail(0), (Ranks{0, 2}));
  EXPECT_EQ(layout.Rail(1), (Ranks{1, 3}));
  EXPECT_EQ(layout.Describe(), "2 hosts x 2 ranks");
}

TEST(HostLayoutTest, AlternatingRanksAreEqualButNotContiguous) {
  // Hosts are numbered by their lowest rank, whatever the digests are.
  const HostLayout layout = HostLayout::FromDigests({9, 7, 9, 7, 9, 7});
  ASSERT_EQ(layout.hosts.size(), 2u);
  EXPECT_EQ(layout.hosts[0], (Ranks{0, 2, 4}));
  EXPECT_EQ(layout.hosts[1], (Ranks{1, 3, 5}));
  EXPECT_EQ(layout.host_of, (Ranks{0, 1, 0, 1, 0, 1}));
  EXPECT_EQ(layout.local_index_of, (Ranks{0, 0, 1, 1, 2, 2}));
  EXPECT_TRUE(layout.equal_hosts);
  EXPECT_FALSE(layout.contiguous);
  EXPECT_EQ(layout.Rail(2), (Ranks{4, 5}));
}

TEST(HostLayoutTest, UnequalHostsHaveShortRails) {
  const HostLayout layout = HostLayout::FromDigests({1, 1, 2, 2, 1});
  EXPECT_FALSE(layout.equal_hosts);
  EXPECT_FALSE(layout.contiguous);
  EXPECT_TRUE(layout.WorthIt());
  EXPECT_EQ(layout.Rail(0), (Ranks{0, 2}));
  EXPECT_EQ(layout.Rail(2), (Ranks{4}));
  EXPECT_EQ(layout.Describe(), "2 hosts (3+2 ranks)");
}

TEST(HostLayoutTest, NotWorthItOnOneHostOrWithALoneRank) {
  EXPECT_FALSE(HostLayout::FromDigests({5, 5, 5, 5}).WorthIt());
  EXPECT_FALSE(HostLayout::FromDigests({5, 5, 6}).WorthIt());
  EXPECT_FALSE(HostLayout::FromDigests({5, 6, 7, 8}).WorthIt());
}

TEST(HostIdentityTest, DigestIsStableAndTellsHostsApart) {
  // FNV-1a 64 of "a": the same in every process and build.
  EXPECT_EQ(HostIdentityDigest("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_NE(HostIdentityDigest("host=h1 boot=x pidns=1 shm=43"),
            HostIdentityDigest("host=h1 boot=x pidns=1 shm=44"));
  const std::string mine = HostIdentity();
  EXPECT_NE(mine.find(" shm="), std::string::npos) << mine;
  EXPECT_EQ(HostIdentity(), mine);
}

}  // namespace
}  // namespace dist
