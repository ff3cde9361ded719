// Tests of `pmds bench` option parsing (pmds/bench/options.hpp, on a CLI11 app as `pmds` declares
// it): every documented option is accepted with the value it names, and bad input is rejected with
// a message naming the option and the bad value.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <string>
#include <vector>

#include "pmds/bench/options.hpp"

namespace {

using pmds::bench::Distribution;
using pmds::bench::ParsedBench;
using pmds::bench::Workload;
using ::testing::HasSubstr;

// Parses the arguments after "bench" into `out`; throws CLI::ParseError on bad usage.
void parse_into(ParsedBench& out, std::vector<std::string> args) {
  CLI::App app{"bench", "pmds bench"};
  pmds::bench::add_bench_options(app, out);
  std::reverse(args.begin(), args.end());  // CLI11 takes them last first
  app.parse(args);
}

ParsedBench parse(std::vector<std::string> args) {
  ParsedBench out;
  parse_into(out, std::move(args));
  return out;
}

// The message of the CLI::ParseError that parsing throws (fails the test if none is thrown).
std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no CLI::ParseError";
  return {};
}

TEST(BenchOptions, Defaults) {
  const auto p = parse({});
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
  ParsedBench p;
  EXPECT_THROW(parse_into(p, {"--workload=ycsb-b", "--threads=2", "--help"}), CLI::CallForHelp);
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
  EXPECT_THAT(error_of({"--distribution", "normal"}), HasSubstr("--distribution: normal not in"));
  EXPECT_THAT(error_of({"--workload", "ycsb-d"}), HasSubstr("--workload: ycsb-d not in"));
  EXPECT_THAT(error_of({"--seed", "x"}), HasSubstr("--seed"));
  EXPECT_THAT(error_of({"--fence-latency", "-1"}), HasSubstr("--fence-latency"));
  EXPECT_THAT(error_of({"--pool-size", "12Q"}), HasSubstr("--pool-size"));
  EXPECT_THAT(error_of({"--zipf-theta", "1"}), HasSubstr("--zipf-theta"));
  EXPECT_THAT(error_of({"--structure", ""}), HasSubstr("--structure"));
  EXPECT_THAT(error_of({"--json", ""}), HasSubstr("--json"));
}

TEST(BenchOptions, RejectsUnknownOrMalformedArguments) {
  EXPECT_THAT(error_of({"--frobnicate"}), HasSubstr("not expected: --frobnicate"));
  EXPECT_THAT(error_of({"hash/transient"}), HasSubstr("not expected: hash/transient"));
  EXPECT_THAT(error_of({"--threads"}), HasSubstr("--threads: 1 required"));
  EXPECT_THAT(error_of({"--no-table=yes"}), HasSubstr("no-table was given a disallowed flag"));
  // Each option takes one value (--threads: a comma-separated list), and empty list items are
  // skipped (CLI11's delimiter).
  EXPECT_THAT(error_of({"--threads", "1", "2"}), HasSubstr("not expected: 2"));
  EXPECT_EQ(parse({"--threads", "1,,2"}).config.threads, (std::vector<unsigned>{1, 2}));
}

TEST(BenchOptions, NumbersAreDecimal) {
  // CLI11's own conversion would read 010 as octal and 0x10 as hex.
  EXPECT_EQ(parse({"--seed", "010"}).config.seed, 10u);
  EXPECT_THAT(error_of({"--key-range", "0x10"}), HasSubstr("--key-range"));
  EXPECT_THAT(error_of({"--seed", "-1"}), HasSubstr("\"-1\""));
  // The last of an option given twice counts.
  EXPECT_EQ(parse({"--reps", "2", "--reps", "5"}).config.reps, 5u);
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
