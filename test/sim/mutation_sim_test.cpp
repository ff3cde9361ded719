// labels: memory
// The simulator's persistence sites and mutants (pm/site.hpp, pm/sim/sites.hpp, and their text
// form, crashlab/mutant_text.hpp): each flush,
// fence, persist and non-temporal store is counted at its caller's line, and a mutant turns
// exactly one site into a no-op (skip) or makes its fence drop the flushes pending at it
// (drop_flushes). `pmds crashtest --mutate` rests on both.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <source_location>
#include <string>
#include <vector>

#include "pmds/crashlab/mutant_text.hpp"
#include "sim/sim_fixture.hpp"

namespace {

using simtest::Words;
namespace pm = pmds::pm;
namespace sim = pmds::pm::sim;

class Mutation : public simtest::SimTest {
 protected:
  void SetUp() override {
    SimTest::SetUp();
    sim::reset_site_counts();
  }
  void TearDown() override {
    sim::set_mutants({});
    SimTest::TearDown();
  }
  // The count of the site at `line` of this file (nullopt: not executed).
  static std::optional<sim::SiteCount> site_at(std::uint32_t line) {
    for (const sim::SiteCount& c : sim::site_counts())
      if (c.line == line && std::string(c.file).ends_with("mutation_sim_test.cpp")) return c;
    return std::nullopt;
  }
  static sim::Mutant mutant_at(sim::MutationMode mode, std::uint32_t line) {
    return {mode, "test/sim/mutation_sim_test.cpp", line, 0};
  }
};

// A helper that persists on behalf of its caller passes the caller's site on.
void persist_for_caller(const void* p, pm::Site site = pm::Site::current()) {
  pm::persist(p, 8, site);
}

TEST_F(Mutation, EachSiteIsCountedAtItsCallersLineWithItsKind) {
  const std::uint32_t first = std::source_location::current().line() + 1;
  pm::persist(&w(0), 8);                                   // first
  pm::flush(&w(8));                                        // first + 1
  pm::fence();                                             // first + 2
  pm::write_nontemporal(&w(16), "12345678", 8);            // first + 3
  for (int i = 0; i < 3; ++i) persist_for_caller(&w(24));  // first + 4
  const struct {
    std::uint32_t line;
    pm::SiteKind kind;
    std::uint64_t executions;
  } expected[] = {{first, pm::SiteKind::persist, 1},
                  {first + 1, pm::SiteKind::flush, 1},
                  {first + 2, pm::SiteKind::fence, 1},
                  {first + 3, pm::SiteKind::nontemporal, 1},
                  {first + 4, pm::SiteKind::persist, 3}};
  for (const auto& e : expected) {
    const auto c = site_at(e.line);
    ASSERT_TRUE(c.has_value()) << "no site at line " << e.line;
    EXPECT_EQ(c->kind, e.kind) << "line " << e.line;
    EXPECT_EQ(c->executions, e.executions) << "line " << e.line;
  }
  // The helper's own line is not a site: its caller is.
  for (const sim::SiteCount& c : sim::site_counts())
    EXPECT_TRUE(c.line >= first && c.line <= first + 4) << c.file << ":" << c.line;
  sim::reset_site_counts();
  EXPECT_TRUE(sim::site_counts().empty());
}

TEST_F(Mutation, SkippingAPersistLeavesTheStoreUndeterminedAndIssuesNoEvent) {
  const std::uint32_t line = std::source_location::current().line() + 4;
  sim::set_mutants({mutant_at(sim::MutationMode::skip, line)});
  w(0).store(1);
  const std::uint64_t events = sim::event_count();
  pm::persist(&w(0), 8);  // the mutant
  EXPECT_EQ(sim::event_count(), events);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  EXPECT_EQ(site_at(line)->executions, 1u);  // counted all the same
  // Unmutated, the same instruction on another line persists.
  pm::persist(&w(0), 8);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{1}}));
}

TEST_F(Mutation, TwoMutantsAtOnceEachTakeTheirSite) {
  const std::uint32_t line = std::source_location::current().line() + 5;
  sim::set_mutants(
      {mutant_at(sim::MutationMode::skip, line), mutant_at(sim::MutationMode::skip, line + 1)});
  w(0).store(1);
  w(8).store(1);
  pm::persist(&w(0), 8);  // a mutant
  pm::persist(&w(8), 8);  // the other
  pm::persist(&w(16), 8);
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{0, 0}, {0, 1}, {1, 0}, {1, 1}}));
}

TEST_F(Mutation, SkippingAFlushLeavesItsFenceNothingToComplete) {
  const std::uint32_t line = std::source_location::current().line() + 4;
  sim::set_mutants({mutant_at(sim::MutationMode::skip, line)});
  w(0).store(1);
  w(8).store(1);
  pm::flush(&w(0));  // the mutant
  pm::flush(&w(8));
  pm::fence();
  EXPECT_EQ(reachable({0, 8}), (std::set<Words>{{0, 1}, {1, 1}}));
}

TEST_F(Mutation, DropFlushesKeepsTheFenceButNotWhatItWouldComplete) {
  const std::uint32_t line = std::source_location::current().line() + 5;
  sim::set_mutants({mutant_at(sim::MutationMode::drop_flushes, line)});
  w(0).store(1);
  pm::flush(&w(0));
  const std::uint64_t events = sim::event_count();
  pm::fence();                                // the mutant
  EXPECT_EQ(sim::event_count(), events + 1);  // still a fence (a crash-point event)
  EXPECT_EQ(sim::stats().pending_flushes, 0u);
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
  EXPECT_TRUE(site_at(line)->drains_other_sites == false);  // it completed nothing
}

TEST_F(Mutation, AFenceThatCompletesAnotherSitesFlushesSaysSo) {
  const std::uint32_t line = std::source_location::current().line() + 1;
  pm::persist(&w(0), 8);  // its fence completes only its own flush
  w(8).store(1);
  pm::flush(&w(8));
  pm::fence();  // line + 3: completes the flush of line + 2
  EXPECT_FALSE(site_at(line)->drains_other_sites);
  EXPECT_TRUE(site_at(line + 3)->drains_other_sites);
}

TEST_F(Mutation, ASkippedNonTemporalStoreIsAPlainStore) {
  const std::uint32_t line = std::source_location::current().line() + 2;
  sim::set_mutants({mutant_at(sim::MutationMode::skip, line)});
  pm::write_nontemporal(&w(0), "\x01\0\0\0\0\0\0\0", 8);  // the mutant
  pm::fence();
  EXPECT_EQ(w(0).load(), 1u);  // the store happened
  EXPECT_EQ(reachable({0}), (std::set<Words>{{0}, {1}}));
}

TEST_F(Mutation, MutantsReadBackAndMatchOnlyTheirSite) {
  const auto m = pmds::crashlab::parse_mutant("drop-flushes@include/pmds/x/list.hpp:12:7");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->mode, sim::MutationMode::drop_flushes);
  EXPECT_EQ(m->file, "include/pmds/x/list.hpp");
  EXPECT_EQ(m->line, 12u);
  EXPECT_EQ(m->column, 7u);
  EXPECT_EQ(pmds::crashlab::mutant_text(*m), "drop-flushes@include/pmds/x/list.hpp:12:7");
  EXPECT_TRUE(m->matches("/src/pmds/include/pmds/x/list.hpp", 12, 7));
  EXPECT_TRUE(m->matches("include/pmds/x/list.hpp", 12, 7));
  EXPECT_FALSE(m->matches("/src/pmds/include/pmds/x/list.hpp", 12, 8));
  EXPECT_FALSE(m->matches("/src/pmds/include/pmds/x/list.hpp", 13, 7));
  const auto any_column = pmds::crashlab::parse_mutant("skip@list.hpp:12");
  ASSERT_TRUE(any_column.has_value());
  EXPECT_EQ(any_column->column, 0u);
  EXPECT_TRUE(any_column->matches("/a/list.hpp", 12, 99));
  EXPECT_FALSE(any_column->matches("/a/skiplist.hpp", 12, 99));  // a suffix, but not at a '/'
  const auto pair = pmds::crashlab::parse_mutants("skip@a/list.hpp:12,drop-flushes@b/hash.hpp:3:4");
  ASSERT_TRUE(pair.has_value());
  ASSERT_EQ(pair->size(), 2u);
  EXPECT_EQ(pmds::crashlab::mutants_text(*pair), "skip@a/list.hpp:12,drop-flushes@b/hash.hpp:3:4");
  EXPECT_FALSE(pmds::crashlab::parse_mutants("skip@a/list.hpp:12,").has_value());
  for (const char* bad : {"", "skip", "skip@", "skip@list.hpp", "skip@list.hpp:x", "skip@:12",
                          "remove@list.hpp:12", "skip@list.hpp:0", "skip@list.hpp:1234567890"})
    EXPECT_FALSE(pmds::crashlab::parse_mutant(bad).has_value()) << bad;
}

}  // namespace
