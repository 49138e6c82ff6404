#include "ceilings_cache.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>

#include <string>

#include "../support/scoped_env.hpp"
#include "../support/scratch_dir.hpp"

namespace roofbench {
namespace {

using ::testing::HasSubstr;

CachedCeilings sample_ceilings() {
  CachedCeilings c;
  c.ceilings.bandwidth = 4.123456789012345e12;
  c.ceilings.read_bandwidth = 4.567890123456789e12;
  c.ceilings.cache_bandwidth = 1.0 / 7.0 * 1e14;
  c.ceilings.flops_of(Precision::fp64) = 6.1e13;
  c.ceilings.flops_of(Precision::fp32) = 1.0 / 3.0 * 1e14;
  c.ceilings.flops_of(Precision::bf16) = 7.5e14;
  c.measured_at = "2026-11-29T12:00:00+00:00";
  c.how = {"bandwidth: memcpy of 256 MiB on 2 threads", "fp32: cblas sgemm 2048^3, best of 3"};
  return c;
}

void expect_same(const CachedCeilings& a, const CachedCeilings& b) {
  EXPECT_EQ(a.ceilings.bandwidth, b.ceilings.bandwidth);
  EXPECT_EQ(a.ceilings.read_bandwidth, b.ceilings.read_bandwidth);
  EXPECT_EQ(a.ceilings.cache_bandwidth, b.ceilings.cache_bandwidth);
  for (Precision p : kAllPrecisions) EXPECT_EQ(a.ceilings.flops_of(p), b.ceilings.flops_of(p)) << to_string(p);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_EQ(a.how, b.how);
}

TEST(CeilingsCache, SerializeParseRoundTripIsExact) {
  const CachedCeilings original = sample_ceilings();
  const auto parsed = parse_ceilings(serialize_ceilings(original), DeviceKind::cuda);
  ASSERT_TRUE(parsed.has_value());
  expect_same(*parsed, original);
}

TEST(CeilingsCache, WriteReadRoundTripCreatesTheFolder) {
  test_support::ScratchDir dir;
  const std::string path = (dir / "nested/folder/cpu.ceilings").string();
  write_ceilings(path, sample_ceilings());
  const auto read = read_ceilings(path, DeviceKind::cuda);
  ASSERT_TRUE(read.has_value());
  expect_same(*read, sample_ceilings());
  EXPECT_FALSE(read_ceilings((dir / "missing.ceilings").string(), DeviceKind::cuda).has_value());
}

// The text of sample_ceilings() with the line starting `key ` replaced by `replacement` (dropped when empty).
std::string with_line(const std::string& key, const std::string& replacement) {
  std::istringstream in(serialize_ceilings(sample_ceilings()));
  std::string out;
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + " ", 0) != 0) out += line + "\n";
    else if (!replacement.empty()) out += replacement + "\n";
  return out;
}

// Why the text is refused ("" when it is read).
std::string refusal(const std::string& text, DeviceKind kind = DeviceKind::cuda) {
  std::string why;
  if (parse_ceilings(text, kind, &why)) return "";
  return why.empty() ? "(refused without a reason)" : why;
}

TEST(CeilingsCache, GarbageIsRejected) {
  const std::string valid = serialize_ceilings(sample_ceilings());
  for (const std::string& text : {
           std::string(""),
           std::string("hello world\n"),
           with_line("format", "format " + std::to_string(kCeilingsFormat + 1)),  // a format this host does not know
           with_line("format", ""),                             // no format line
           with_line("bandwidth", ""),                          // no bandwidth
           with_line("bandwidth", "bandwidth 0"),               // a bandwidth that cannot be right
           with_line("bandwidth", "bandwidth fast"),            // not a number
           with_line("fp32", "fp32 many"),                      // not a number
           with_line("read_bandwidth", ""),                     // no read bandwidth
           with_line("read_bandwidth", "read_bandwidth 0"),     // a read roof that cannot be right
           with_line("cache_bandwidth", ""),                    // no cache roof
           valid.substr(0, valid.find("bandwidth")),             // cut off before the bandwidth
       })
    EXPECT_NE(refusal(text), "") << text;
}

TEST(CeilingsCache, AbsurdFiguresAreRefusedWithTheFigureNamed) {
  EXPECT_THAT(refusal(with_line("bandwidth", "bandwidth 14")), HasSubstr("bandwidth 14 B/s is outside"));
  EXPECT_THAT(refusal(with_line("bandwidth", "bandwidth 1e-300")), HasSubstr("bandwidth 1e-300 B/s is outside"));
  EXPECT_THAT(refusal(with_line("bandwidth", "bandwidth inf")), HasSubstr("bandwidth is not a finite number"));
  EXPECT_THAT(refusal(with_line("bandwidth", "bandwidth 14e9xyz")), HasSubstr("bandwidth '14e9xyz' is not a number"));
  EXPECT_THAT(refusal(with_line("fp32", "")), HasSubstr("fp32 is missing"));
  EXPECT_THAT(refusal(with_line("fp32", "fp32 -5e12")), HasSubstr("fp32 is negative"));
  EXPECT_THAT(refusal(with_line("bf16", "bf16 nan")), HasSubstr("bf16 is not a finite number"));
  // A GPU's figures are out of a CPU's bounds: a cache of one kind is not read as the other's.
  EXPECT_THAT(refusal(serialize_ceilings(sample_ceilings()), DeviceKind::cpu), HasSubstr("for a CPU"));
  EXPECT_EQ(refusal(serialize_ceilings(sample_ceilings()), DeviceKind::cuda), "");
}

// A file of an earlier format holds roofs measured another way (3: a GPU's memory roofs from one kernel each,
// lower than the best of the variants; 4: GEMM roofs the best of 10 after 3 warm-ups, which a cuBLAS GEMM of
// the same shape beat; 5: the NN layout's GEMMs and 2 GiB memory roofs, which a TN GEMM and a 4 GiB copy beat; 6: each launch
// timed with the host's time to launch it inside the events; 7: no roof of micro's copy kernel's shape):
// it is measured again, and says why.
TEST(CeilingsCache, AFileOfAnEarlierFormatIsMeasuredAgain) {
  EXPECT_EQ(kCeilingsFormat, 8);
  EXPECT_THAT(serialize_ceilings(sample_ceilings()), ::testing::StartsWith("format 8\n"));
  for (const char* old : {"3", "4", "5", "6", "7"}) {
    EXPECT_EQ(refusal(with_line("format", std::string("format ") + old)), std::string("format ") + old + ", this host writes 8");
    test_support::ScratchDir dir;
    const std::string path = (dir / "gpu.ceilings").string();
    dir.write("gpu.ceilings", with_line("format", std::string("format ") + old));
    std::string why;
    EXPECT_FALSE(read_ceilings(path, DeviceKind::cuda, &why).has_value());
    EXPECT_EQ(why, std::string("format ") + old + ", this host writes 8");
  }
}

TEST(CeilingsCache, AStaleCacheIsMeasuredAgain) {
  test_support::ScratchDir dir;
  const std::string path = (dir / "cpu.ceilings").string();
  write_ceilings(path, sample_ceilings());
  ASSERT_TRUE(read_ceilings(path, DeviceKind::cuda).has_value());
  mark_ceilings_stale(path, "cpu/x: implausible: FLOP/s 1e18");
  std::string why;
  EXPECT_FALSE(read_ceilings(path, DeviceKind::cuda, &why).has_value());
  EXPECT_THAT(why, HasSubstr("marked stale: cpu/x: implausible"));
}

TEST(CeilingsCache, AFolderThatCannotBeWrittenThrows) {
  test_support::ScratchDir dir;
  dir.write("a-file", "x");
  EXPECT_THROW(write_ceilings((dir / "a-file/cpu.ceilings").string(), sample_ceilings()), std::runtime_error);
  EXPECT_THROW(mark_ceilings_stale((dir / "a-file/cpu.ceilings").string(), "x"), std::runtime_error);
}

// Each figure of a round, times `scale`.
Ceilings round_of(double scale, double fp32_scale = -1) {
  Ceilings c = sample_ceilings().ceilings;
  c.bandwidth *= scale, c.read_bandwidth *= scale, c.cache_bandwidth *= scale;
  for (auto& f : c.flops) f *= fp32_scale < 0 ? scale : 1;
  c.flops_of(Precision::fp32) = sample_ceilings().ceilings.flops_of(Precision::fp32) * (fp32_scale < 0 ? scale : fp32_scale);
  return c;
}

TEST(SettledCeilings, OneRoundIsNotEnough) { EXPECT_FALSE(settled_ceilings({round_of(1)}).has_value()); }

TEST(SettledCeilings, TheBestRoundMatchedByAnotherSettlesAtTheBest) {
  const auto settled = settled_ceilings({round_of(0.3), round_of(1.0), round_of(0.95)});
  ASSERT_TRUE(settled.has_value());
  EXPECT_DOUBLE_EQ(settled->bandwidth, round_of(1.0).bandwidth);
  EXPECT_DOUBLE_EQ(settled->flops_of(Precision::fp32), round_of(1.0).flops_of(Precision::fp32));
}

TEST(SettledCeilings, ABestRoundNoOtherComesNearDoesNotSettleAndSaysWhich) {
  // fp32 at 57.5 and 201 GFLOP/s-like spread, the rest steady: as on a machine busy for one round.
  std::string why;
  EXPECT_FALSE(settled_ceilings({round_of(1, 0.286), round_of(1, 1.0)}, kCeilingsSettle, &why).has_value());
  EXPECT_THAT(why, HasSubstr("fp32:"));
  EXPECT_FALSE(settled_ceilings({round_of(1, 0.286), round_of(1, 1.0)}, kCeilingsUsable).has_value());
  EXPECT_TRUE(settled_ceilings({round_of(1, 0.6), round_of(1, 1.0)}, kCeilingsUsable).has_value())
      << "within 50%: usable for one run";
}

TEST(CeilingsCache, PathIsInTheCacheFolderWithASafeFileName) {
  const test_support::ScopedEnv env("ROOFBENCH_CACHE_DIR", "/cache/here");
  EXPECT_EQ(ceilings_cache_path("cpu-Intel(R) Xeon(R) 8480+-2threads"), "/cache/here/cpu-Intel_R__Xeon_R__8480_-2threads.ceilings");
  EXPECT_EQ(ceilings_cache_path("../../etc/passwd"), "/cache/here/.._.._etc_passwd.ceilings");
}

}  // namespace
}  // namespace roofbench
