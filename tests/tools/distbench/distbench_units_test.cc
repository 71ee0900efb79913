// Unit tests of distbench's pure parts: size parsing, the sweep, buffer
// shapes and bus-bandwidth factors, the --check reference, the choice of the
// fastest raw variant, and the CSV, JSON and PNG outputs. Expected values
// are written out by hand here.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tools/distbench/byte_size.h"
#include "tools/distbench/collectives.h"
#include "tools/distbench/fastest.h"
#include "tools/distbench/pattern.h"
#include "tools/distbench/plot.h"
#include "tools/distbench/report.h"

namespace distbench {
namespace {

TEST(ByteSizeTest, ParsesNcclTestsSpellings) {
  EXPECT_EQ(*ParseByteSize("8"), 8u);
  EXPECT_EQ(*ParseByteSize("1K"), 1024u);
  EXPECT_EQ(*ParseByteSize("1k"), 1024u);
  EXPECT_EQ(*ParseByteSize("1M"), 1048576u);
  EXPECT_EQ(*ParseByteSize("64M"), 67108864u);
  EXPECT_EQ(*ParseByteSize("2G"), 2147483648u);
  EXPECT_EQ(*ParseByteSize("4KB"), 4096u);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
}

TEST(ByteSizeTest, RejectsGarbageWithOneLine) {
  for (const char* bad : {"", "K", "1X", "-8", "1.5M", "abc", "99999999999999999999G"}) {
    absl::StatusOr<uint64_t> size = ParseByteSize(bad);
    ASSERT_FALSE(size.ok()) << bad;
    EXPECT_EQ(std::string(size.status().message()).find('\n'), std::string::npos);
  }
}

TEST(ByteSizeTest, FormatsShortest) {
  EXPECT_EQ(FormatByteSize(8), "8");
  EXPECT_EQ(FormatByteSize(1000), "1000");
  EXPECT_EQ(FormatByteSize(1024), "1K");
  EXPECT_EQ(FormatByteSize(64u << 20), "64M");
  EXPECT_EQ(FormatByteSize(1536), "1536");
}

TEST(SweepTest, MultipliesByFactor) {
  EXPECT_EQ(SweepSizes(8, 64, 2), (std::vector<uint64_t>{8, 16, 32, 64}));
  EXPECT_EQ(SweepSizes(8, 100, 4), (std::vector<uint64_t>{8, 32}));
  EXPECT_EQ(SweepSizes(1024, 1024, 2), (std::vector<uint64_t>{1024}));
  EXPECT_EQ(SweepSizes(8, 64u << 20, 2).size(), 24u);  // 2^3 .. 2^26
}

TEST(CollectivesTest, ParsesOps) {
  EXPECT_EQ(ParseOps("all")->size(), 10u);
  absl::StatusOr<std::vector<const OpInfo*>> two = ParseOps("broadcast, all_to_all");
  ASSERT_TRUE(two.ok());
  EXPECT_STREQ((*two)[0]->name, "broadcast");
  EXPECT_STREQ((*two)[1]->name, "all_to_all");
  EXPECT_FALSE(ParseOps("allreduce").ok());
  EXPECT_FALSE(ParseOps("").ok());
  EXPECT_EQ(*ParseDtype("half"), DIST_FLOAT16);
  EXPECT_EQ(*ParseRedop("max"), DIST_MAX);
  EXPECT_FALSE(ParseDtype("float128").ok());
}

TEST(CollectivesTest, BusBandwidthFactorsAreNcclTests) {
  auto factor = [](const char* name, int w) { return BusBandwidthFactor(**FindOp(name), w); };
  EXPECT_DOUBLE_EQ(factor("all_reduce", 4), 1.5);
  EXPECT_DOUBLE_EQ(factor("all_reduce", 2), 1.0);
  EXPECT_DOUBLE_EQ(factor("all_gather", 4), 0.75);
  EXPECT_DOUBLE_EQ(factor("reduce_scatter", 8), 0.875);
  EXPECT_DOUBLE_EQ(factor("all_to_all", 2), 0.5);
  EXPECT_DOUBLE_EQ(factor("broadcast", 8), 1.0);
  EXPECT_DOUBLE_EQ(factor("reduce", 8), 1.0);
  EXPECT_DOUBLE_EQ(factor("sendrecv", 8), 1.0);
  EXPECT_DOUBLE_EQ(factor("barrier", 8), 0.0);
}

// The loopback ceiling moves busbw's bytes: a ring's per-link traffic.
TEST(CollectivesTest, RingShiftBytesAreBusBandwidthBytes) {
  auto shift = [](const char* name, int w, uint64_t block) {
    Case c;
    c.op = *FindOp(name);
    c.world_size = w;
    c.block = block;  // float32 elements
    return RingShiftBytes(c);
  };
  EXPECT_EQ(shift("all_reduce", 2, 16u << 20), 64u << 20);  // 64 MiB, factor 1
  EXPECT_EQ(shift("all_reduce", 4, 1024), 6144u);           // 4 KiB x 1.5
  EXPECT_EQ(shift("all_reduce", 3, 3), 16u);                // 12 B x 4/3
  EXPECT_EQ(shift("all_gather", 4, 256), 3072u);            // 4 KiB gathered x 3/4
  EXPECT_EQ(shift("broadcast", 8, 256), 1024u);
  EXPECT_EQ(shift("barrier", 8, 0), 0u);
}

TEST(CollectivesTest, SizesMapToShapes) {
  // all_gather of 4 ranks at 1 KiB of float32: 256 elements in recv, 64 sent.
  const OpInfo* gather = *FindOp("all_gather");
  Case c;
  c.op = gather;
  c.dtype = DIST_FLOAT32;
  c.world_size = 4;
  c.block = BlockForBytes(*gather, DIST_FLOAT32, 4, 1024);
  EXPECT_EQ(c.block, 64u);
  EXPECT_EQ(c.send_count(), 64u);
  EXPECT_EQ(c.recv_count(), 256u);
  EXPECT_EQ(c.bytes(), 1024u);
  EXPECT_EQ(c.count(), 256u);
  // all_reduce: the whole size on every rank.
  EXPECT_EQ(BlockForBytes(**FindOp("all_reduce"), DIST_FLOAT64, 4, 1024), 128u);
  // Too small for one element per rank.
  EXPECT_EQ(BlockForBytes(*gather, DIST_FLOAT32, 4, 8), 0u);
}

Case TwoRankCase(const char* op, int rank, uint64_t block, dist_dtype_t dtype = DIST_INT32,
                 dist_reduce_op_t redop = DIST_SUM) {
  Case c;
  c.op = *FindOp(op);
  c.dtype = dtype;
  c.redop = redop;
  c.root = 0;
  c.rank = rank;
  c.world_size = 2;
  c.block = block;
  return c;
}

std::vector<char> Int32s(const std::vector<int32_t>& values) {
  std::vector<char> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

TEST(PatternTest, SendDataIsTheDocumentedPattern) {
  // v(r, k) = (3k + 7r) mod 5 + 1.
  const Case c = TwoRankCase("all_reduce", 1, 4);
  EXPECT_EQ(MakeSendData(c), Int32s({3, 1, 4, 2}));
}

TEST(PatternTest, AllReduceReferenceCountsWrongElements) {
  // rank 0 sends 1 4 2 5, rank 1 sends 3 1 4 2: the sum is 4 5 6 7.
  const Case c = TwoRankCase("all_reduce", 0, 4);
  EXPECT_EQ(CountWrong(c, Int32s({4, 5, 6, 7})), 0);
  EXPECT_EQ(CountWrong(c, Int32s({4, 5, 6, 8})), 1);
  EXPECT_EQ(CountWrong(c, MakePoisonedRecv(c)), 4);
  const Case max = TwoRankCase("all_reduce", 1, 4, DIST_INT32, DIST_MAX);
  EXPECT_EQ(CountWrong(max, Int32s({3, 4, 4, 5})), 0);
}

TEST(PatternTest, AllToAllAndReduceScatterBlocks) {
  // n = 2. Rank 0 sends 1 4 | 2 5, rank 1 sends 3 1 | 4 2.
  // all_to_all on rank 1: block 0 from rank 0's block 1 (2 5), block 1 its own block 1 (4 2).
  EXPECT_EQ(CountWrong(TwoRankCase("all_to_all", 1, 2), Int32s({2, 5, 4, 2})), 0);
  // reduce_scatter on rank 1: block 1 of the sum: 2+4, 5+2.
  EXPECT_EQ(CountWrong(TwoRankCase("reduce_scatter", 1, 2), Int32s({6, 7})), 0);
  // scatter from root 0 to rank 1: root's block 1.
  EXPECT_EQ(CountWrong(TwoRankCase("scatter", 1, 2), Int32s({2, 5})), 0);
  // sendrecv on rank 0 receives rank 1's data.
  EXPECT_EQ(CountWrong(TwoRankCase("sendrecv", 0, 2), Int32s({3, 1})), 0);
  // gather off the root: nothing to check.
  EXPECT_EQ(CountWrong(TwoRankCase("gather", 1, 2), Int32s({0, 0, 0, 0})), 0);
}

TEST(PatternTest, FloatAverageAndHalfPrecision) {
  // avg of (1, 3) is 2 and of (4, 1) is 2.5.
  const Case c = TwoRankCase("all_reduce", 0, 2, DIST_FLOAT32, DIST_AVG);
  std::vector<char> bytes(8);
  const float values[2] = {2.0f, 2.5f};
  std::memcpy(bytes.data(), values, 8);
  EXPECT_EQ(CountWrong(c, bytes), 0);
  // float16: 4 and 5 are exact; 0x4400 = 4.0, 0x4500 = 5.0.
  const Case half = TwoRankCase("all_reduce", 0, 2, DIST_FLOAT16);
  const uint16_t sums[2] = {0x4400, 0x4500};
  std::vector<char> half_bytes(4);
  std::memcpy(half_bytes.data(), sums, 4);
  EXPECT_EQ(CountWrong(half, half_bytes), 0);
  // Integer average truncates: (1+3)/2 = 2, (4+1)/2 = 2.
  EXPECT_EQ(CountWrong(TwoRankCase("all_reduce", 0, 2, DIST_INT32, DIST_AVG), Int32s({2, 2})), 0);
}

std::vector<Row> SampleRows(bool with_raw) {
  std::vector<Row> rows;
  for (uint64_t block : {2u, 256u}) {
    Row row;
    row.c = TwoRankCase("all_reduce", 0, block, DIST_FLOAT32);
    row.plugin = {10.0, 0.8, 0.8, 0};
    if (with_raw) {
      row.raw = Measurement{8.0, 1.0, 1.0, 0};
      row.time_ratio = 1.25;
      row.busbw_ratio = 0.8;
    }
    rows.push_back(row);
  }
  return rows;
}

RunInfo SampleInfo() {
  RunInfo info;
  info.backend = "gloo";
  info.world_size = 2;
  info.baseline = "gloo";
  info.baseline_requested = true;
  return info;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

// Two variants of the same speed whose rounds alternate between fast and
// slow: each is fastest over all rounds as often as the other, and taking
// the faster one in each round would give 1 us every round. A round is
// compared with the variant fastest in the other rounds, which is the one
// that is slow in it: 3 us every round, each variant's true median.
TEST(FastestTest, ARoundsOwnNoiseNeverPicksItsBaseline) {
  const std::vector<std::vector<double>> rounds = {{1, 3, 1, 3}, {3, 1, 3, 1}};
  const FastestVariant fastest = ChooseFastest(rounds);
  EXPECT_EQ(fastest.overall, 0u);  // a tie: the first
  EXPECT_EQ(fastest.round_times, (std::vector<double>{3, 3, 3, 3}));
}

TEST(FastestTest, AVariantFastestEverywhereIsTheBaselineOfEveryRound) {
  const std::vector<std::vector<double>> rounds = {
      {5, 6, 5, 7, 6}, {2, 3, 9, 2, 3}, {4, 4, 4, 4, 4}};
  const FastestVariant fastest = ChooseFastest(rounds);
  EXPECT_EQ(fastest.overall, 1u);
  // Round 2 (9 us) is variant 1's slow one: it still counts against it.
  EXPECT_EQ(fastest.round_times, (std::vector<double>{2, 3, 9, 2, 3}));
}

TEST(FastestTest, OneRoundOrOneVariant) {
  EXPECT_EQ(ChooseFastest({{7}, {4}, {6}}).round_times, std::vector<double>{4});
  EXPECT_EQ(ChooseFastest({{7}, {4}, {6}}).overall, 1u);
  EXPECT_EQ(ChooseFastest({{3, 1, 2}}).round_times, (std::vector<double>{3, 1, 2}));
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(Median({}), 0);
}

TEST(ReportTest, JsonHasRowsAndRatios) {
  const nlohmann::json doc = ToJson(SampleInfo(), SampleRows(true));
  ASSERT_EQ(doc["results"].size(), 2u);
  EXPECT_EQ(doc["results"][0]["size"], 8);
  EXPECT_EQ(doc["results"][1]["size"], 1024);
  EXPECT_EQ(doc["results"][1]["wrong"], 0);
  EXPECT_DOUBLE_EQ(doc["results"][1]["raw"]["time_ratio"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(doc["results"][1]["raw"]["busbw_ratio"].get<double>(), 0.8);
  const std::string path = TempPath("r.json");
  ASSERT_TRUE(WriteJson(path, SampleInfo(), SampleRows(true)).ok());
  absl::StatusOr<nlohmann::json> back = ReadJson(path);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ((*back)["results"].size(), 2u);
}

TEST(ReportTest, CeilingInJsonAndTable) {
  RunInfo info = SampleInfo();
  info.ceiling_requested = true;
  info.ceiling = "plain TCP over 127.0.0.1";
  std::vector<Row> rows = SampleRows(true);
  rows[0].ceiling_skipped = "moves no bytes";
  rows[1].ceiling = Measurement{4.0, 2.0, 2.0, -1};
  rows[1].ceiling_fraction = 0.4;
  const nlohmann::json doc = ToJson(info, rows);
  EXPECT_EQ(doc["ceiling"]["name"], "loopback_tcp");
  EXPECT_EQ(doc["ceiling"]["description"], "plain TCP over 127.0.0.1");
  EXPECT_EQ(doc["results"][0]["ceiling_skipped"], "moves no bytes");
  EXPECT_FALSE(doc["results"][0].contains("ceiling"));
  EXPECT_EQ(doc["results"][1]["ceiling"]["name"], "loopback_tcp");
  EXPECT_DOUBLE_EQ(doc["results"][1]["ceiling"]["busbw_gbps"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(doc["results"][1]["ceiling"]["time_us"].get<double>(), 4.0);
  EXPECT_DOUBLE_EQ(doc["results"][1]["ceiling"]["fraction"].get<double>(), 0.4);
  // The table: the ceiling's two columns after #wrong, before the raw ones.
  const std::string path = TempPath("table.txt");
  FILE* out = std::fopen(path.c_str(), "w");
  ASSERT_NE(out, nullptr);
  TablePrinter table(out, info);
  table.PrintHeader();
  table.BeginOp(*rows[1].c.op);
  for (const Row& row : rows) table.PrintRow(row);
  std::fclose(out);
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# ceiling: loopback_tcp (plain TCP over 127.0.0.1)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("#wrong   tcp_busbw  of_tcp      raw_us"), std::string::npos) << text;
  EXPECT_NE(text.find("       0           -       -        8.00"), std::string::npos) << text;
  EXPECT_NE(text.find("       0       2.000   0.400        8.00"), std::string::npos) << text;
  // Asked for and not run: the header says why, the JSON too.
  info.ceiling.clear();
  info.ceiling_skipped = "the loopback ceiling needs 2 or more ranks";
  EXPECT_EQ(ToJson(info, {})["ceiling"]["skipped"], info.ceiling_skipped);
}

TEST(ReportTest, ReadJsonRejectsOtherFiles) {
  const std::string path = TempPath("bad.json");
  std::ofstream(path) << "{\"x\": 1}";
  EXPECT_FALSE(ReadJson(path).ok());
  std::ofstream(path) << "not json";
  EXPECT_FALSE(ReadJson(path).ok());
  EXPECT_FALSE(ReadJson(TempPath("missing.json")).ok());
}

TEST(ReportTest, CsvHasHeaderAndOneLinePerRow) {
  const std::string path = TempPath("r.csv");
  ASSERT_TRUE(WriteCsv(path, SampleInfo(), SampleRows(true)).ok());
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0].rfind("backend,world_size,op,size_bytes,", 0), 0u);
  EXPECT_EQ(lines[2].rfind("gloo,2,all_reduce,1024,256,float32,sum,-1,10.000,", 0), 0u) << lines[2];
  EXPECT_NE(lines[2].find(",1.2500,0.8000"), std::string::npos) << lines[2];
}

TEST(PlotTest, WritesAPng) {
  const std::string png = TempPath("busbw.png");
  nlohmann::json mpi = ToJson(SampleInfo(), SampleRows(false));
  mpi["backend"] = "mpi";
  ASSERT_TRUE(PlotBusBandwidth(png, {ToJson(SampleInfo(), SampleRows(true)), mpi}).ok());
  std::ifstream in(png, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 2000u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
}

TEST(PlotTest, NothingToPlotIsAnError) {
  RunInfo info = SampleInfo();
  EXPECT_FALSE(PlotBusBandwidth(TempPath("empty.png"), {ToJson(info, {})}).ok());
}

}  // namespace
}  // namespace distbench
