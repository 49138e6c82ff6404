#include "ceilings_cache.hpp"

#include <gtest/gtest.h>

#include <string>

#include "../support/scoped_env.hpp"
#include "../support/scratch_dir.hpp"

namespace roofbench {
namespace {

CachedCeilings sample_ceilings() {
  CachedCeilings c;
  c.ceilings.bandwidth = 4.123456789012345e12;
  c.ceilings.read_bandwidth = 4.567890123456789e12;
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
  for (Precision p : kAllPrecisions) EXPECT_EQ(a.ceilings.flops_of(p), b.ceilings.flops_of(p)) << to_string(p);
  EXPECT_EQ(a.measured_at, b.measured_at);
  EXPECT_EQ(a.how, b.how);
}

TEST(CeilingsCache, SerializeParseRoundTripIsExact) {
  const CachedCeilings original = sample_ceilings();
  const auto parsed = parse_ceilings(serialize_ceilings(original));
  ASSERT_TRUE(parsed.has_value());
  expect_same(*parsed, original);
}

TEST(CeilingsCache, WriteReadRoundTripCreatesTheFolder) {
  test_support::ScratchDir dir;
  const std::string path = (dir / "nested/folder/cpu.ceilings").string();
  write_ceilings(path, sample_ceilings());
  const auto read = read_ceilings(path);
  ASSERT_TRUE(read.has_value());
  expect_same(*read, sample_ceilings());
  EXPECT_FALSE(read_ceilings((dir / "missing.ceilings").string()).has_value());
}

TEST(CeilingsCache, GarbageIsRejected) {
  const std::string valid = serialize_ceilings(sample_ceilings());
  for (const std::string& text : {
           std::string(""),
           std::string("hello world\n"),
           std::string("format 3\nbandwidth 1e12\nread_bandwidth 1e12\n"),  // a format this host does not know
           std::string("bandwidth 1e12\nread_bandwidth 1e12\nfp32 1e12\n"),  // no format line
           std::string("format 2\nread_bandwidth 1e12\nfp32 1e12\n"),        // no bandwidth
           std::string("format 2\nbandwidth 0\nread_bandwidth 1e12\n"),      // a bandwidth that cannot be right
           std::string("format 2\nbandwidth fast\nread_bandwidth 1e12\n"),   // not a number
           std::string("format 2\nbandwidth 1e12\nread_bandwidth 1e12\nfp32 many\n"),  // not a number
           std::string("format 2\nbandwidth 1e12\n"),                       // no read bandwidth
           std::string("format 2\nbandwidth 1e12\nread_bandwidth 0\n"),    // a read roof that cannot be right
           valid.substr(0, valid.find("bandwidth")),                         // cut off before the bandwidth
       })
    EXPECT_FALSE(parse_ceilings(text).has_value()) << text;
}

// A cache written before the read roof existed is measured again, not read as a device without one.
TEST(CeilingsCache, FormatOneFromBeforeTheReadRoofIsRejected) {
  EXPECT_FALSE(parse_ceilings("format 1\nmeasured_at x\nbandwidth 4e12\nbf16 8e14\n").has_value());
}

TEST(CeilingsCache, PathIsInTheCacheFolderWithASafeFileName) {
  const test_support::ScopedEnv env("ROOFBENCH_CACHE_DIR", "/cache/here");
  EXPECT_EQ(ceilings_cache_path("cpu-Intel(R) Xeon(R) 8480+-2threads"), "/cache/here/cpu-Intel_R__Xeon_R__8480_-2threads.ceilings");
  EXPECT_EQ(ceilings_cache_path("../../etc/passwd"), "/cache/here/.._.._etc_passwd.ceilings");
}

}  // namespace
}  // namespace roofbench
