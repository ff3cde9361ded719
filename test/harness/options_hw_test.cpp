// Tests of `pmds bench` option parsing (pmds/bench/options.hpp): every documented option is
// accepted with the value it names, and bad input is rejected with a message naming the option.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <string_view>
#include <vector>

#include "pmds/bench/options.hpp"

namespace {

using pmds::bench::Distribution;
using pmds::bench::OptionError;
using pmds::bench::parse_bench_options;
using pmds::bench::ParsedBench;
using pmds::bench::Workload;
using ::testing::HasSubstr;

ParsedBench parse(std::vector<std::string_view> args) {
  return parse_bench_options(args);
}

// The message of the OptionError that parsing throws (fails the test if none is thrown).
std::string error_of(std::vector<std::string_view> args) {
  try {
    parse(args);
  } catch (const OptionError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no OptionError";
  return {};
}

TEST(BenchOptions, Defaults) {
  const auto p = parse({});
  EXPECT_FALSE(p.help);
  EXPECT_FALSE(p.workload_given);
  EXPECT_TRUE(p.structure_spec.empty());
  const auto& c = p.config;
  EXPECT_EQ(c.workload, Workload::set);
  EXPECT_EQ(c.threads, std::vector<unsigned>{1});
  EXPECT_EQ(c.reps, 3u);
  EXPECT_EQ(c.key_range, 1024u);
  EXPECT_EQ(c.effective_prefill(), 512u);  // half the range
  EXPECT_EQ(c.effective_reads(), 90u);
  EXPECT_EQ(c.distribution, Distribution::uniform);
  EXPECT_DOUBLE_EQ(c.zipf_theta, 0.99);
  EXPECT_TRUE(c.isolate);  // a fresh child process per repetition
}

TEST(BenchOptions, EveryDocumentedOption) {
  const auto p = parse({"--structure",
                        "hash/transient,list/*",
                        "--workload",
                        "set",
                        "--threads",
                        "1,2,4",
                        "--duration",
                        "0.5",
                        "--warmup",
                        "0",
                        "--reps",
                        "5",
                        "--key-range",
                        "1048576",
                        "--prefill",
                        "1000",
                        "--reads",
                        "80",
                        "--distribution",
                        "zipfian",
                        "--seed",
                        "99",
                        "--fence-latency",
                        "300",
                        "--pool",
                        "/tmp/x.pool",
                        "--json",
                        "r.json",
                        "--csv",
                        "r.csv",
                        "--buckets",
                        "4096",
                        "--pool-size",
                        "64M",
                        "--zipf-theta=0.5",
                        "--local-work",
                        "0",
                        "--no-recovery",
                        "--no-isolate",
                        "--no-table",
                        "--progress"});
  const auto& c = p.config;
  EXPECT_EQ(p.structure_spec, "hash/transient,list/*");
  EXPECT_TRUE(p.workload_given);
  EXPECT_EQ(c.threads, (std::vector<unsigned>{1, 2, 4}));
  EXPECT_DOUBLE_EQ(c.duration_s, 0.5);
  EXPECT_DOUBLE_EQ(c.warmup_s, 0);
  EXPECT_EQ(c.reps, 5u);
  EXPECT_EQ(c.key_range, 1048576u);
  EXPECT_EQ(c.effective_prefill(), 1000u);
  EXPECT_EQ(c.effective_reads(), 80u);
  EXPECT_EQ(c.distribution, Distribution::zipfian);
  EXPECT_EQ(c.seed, 99u);
  EXPECT_EQ(c.fence_latency_ns, 300u);
  EXPECT_EQ(c.pool_path, "/tmp/x.pool");
  EXPECT_EQ(c.json_path, "r.json");
  EXPECT_EQ(c.csv_path, "r.csv");
  EXPECT_EQ(c.buckets, 4096u);
  EXPECT_EQ(c.pool_size, 64u << 20);
  EXPECT_DOUBLE_EQ(c.zipf_theta, 0.5);
  EXPECT_EQ(c.local_work, 0u);
  EXPECT_FALSE(c.measure_recovery);
  EXPECT_FALSE(c.isolate);
  EXPECT_FALSE(c.table);
  EXPECT_TRUE(c.progress);
}

TEST(BenchOptions, EqualsFormAndHelp) {
  const auto p = parse({"--workload=ycsb-b", "--threads=2", "--help"});
  EXPECT_TRUE(p.help);
  EXPECT_EQ(p.config.workload, Workload::ycsb_b);
  EXPECT_EQ(p.config.effective_reads(), 95u);
  EXPECT_EQ(p.config.effective_prefill(), 1024u);  // YCSB loads the whole range
}

TEST(BenchOptions, EveryWorkloadName) {
  for (const auto w : pmds::bench::all_workloads) {
    const auto p = parse({"--workload", pmds::bench::to_string(w)});
    EXPECT_EQ(p.config.workload, w);
  }
  EXPECT_EQ(parse({"--workload", "ycsb-a"}).config.effective_reads(), 50u);
  EXPECT_EQ(parse({"--workload", "ycsb-c"}).config.effective_reads(), 100u);
}

TEST(BenchOptions, RejectsBadValuesWithTheOptionNamed) {
  EXPECT_THAT(error_of({"--threads", "0"}), HasSubstr("--threads"));
  EXPECT_THAT(error_of({"--threads", "1,,2"}), HasSubstr("--threads"));
  EXPECT_THAT(error_of({"--threads", "1,2,1"}), HasSubstr("twice"));
  EXPECT_THAT(error_of({"--threads", "two"}), HasSubstr("\"two\""));
  EXPECT_THAT(error_of({"--threads", "1000"}), HasSubstr("--threads"));
  EXPECT_THAT(error_of({"--duration", "0"}), HasSubstr("--duration"));
  EXPECT_THAT(error_of({"--duration", "-1"}), HasSubstr("--duration"));
  EXPECT_THAT(error_of({"--duration", "1s"}), HasSubstr("--duration"));
  EXPECT_THAT(error_of({"--duration", "nan"}), HasSubstr("--duration"));
  EXPECT_THAT(error_of({"--warmup", "-0.5"}), HasSubstr("--warmup"));
  EXPECT_THAT(error_of({"--reps", "0"}), HasSubstr("--reps"));
  EXPECT_THAT(error_of({"--key-range", "1"}), HasSubstr("--key-range"));
  EXPECT_THAT(error_of({"--key-range", "-5"}), HasSubstr("--key-range"));
  EXPECT_THAT(error_of({"--key-range", "12abc"}), HasSubstr("--key-range"));
  EXPECT_THAT(error_of({"--reads", "101"}), HasSubstr("--reads"));
  EXPECT_THAT(error_of({"--distribution", "normal"}), HasSubstr("uniform or zipfian"));
  EXPECT_THAT(error_of({"--workload", "ycsb-d"}), HasSubstr("unknown workload \"ycsb-d\""));
  EXPECT_THAT(error_of({"--seed", "x"}), HasSubstr("--seed"));
  EXPECT_THAT(error_of({"--fence-latency", "-1"}), HasSubstr("--fence-latency"));
  EXPECT_THAT(error_of({"--pool-size", "12Q"}), HasSubstr("--pool-size"));
  EXPECT_THAT(error_of({"--zipf-theta", "1"}), HasSubstr("--zipf-theta"));
  EXPECT_THAT(error_of({"--structure", ""}), HasSubstr("--structure"));
  EXPECT_THAT(error_of({"--json", ""}), HasSubstr("--json"));
}

TEST(BenchOptions, RejectsUnknownOrMalformedArguments) {
  EXPECT_THAT(error_of({"--frobnicate"}), HasSubstr("unknown option --frobnicate"));
  EXPECT_THAT(error_of({"hash/transient"}), HasSubstr("unexpected argument"));
  EXPECT_THAT(error_of({"--threads"}), HasSubstr("--threads needs a value"));
  EXPECT_THAT(error_of({"--no-table=yes"}), HasSubstr("takes no value"));
}

TEST(BenchOptions, RejectsContradictions) {
  EXPECT_THAT(error_of({"--workload", "ycsb-a", "--reads", "50"}),
              HasSubstr("--reads applies to --workload set only"));
  EXPECT_THAT(error_of({"--key-range", "100", "--prefill", "101"}), HasSubstr("exceeds"));
  EXPECT_THAT(error_of({"--workload", "pairs", "--prefill", "10"}), HasSubstr("from empty"));
  // A heap may hold more elements than distinct keys.
  EXPECT_EQ(parse({"--workload", "heap", "--key-range", "100", "--prefill", "500"})
                .config.effective_prefill(),
            500u);
}

}  // namespace
