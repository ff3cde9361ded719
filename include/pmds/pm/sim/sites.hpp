// pmds — the Px86 simulator's persistence sites and mutants (pm/simulator.hpp runs them; the
// crash lab's `pmds crashtest --mutate` writes and parses them: crashlab/mutant_text.hpp).
//
// Every flush, fence and non-temporal store names its site (pm/site.hpp: the source location of
// the access-layer call, or of the algorithm line a helper passed on). The simulator counts each
// site's executions, and can run with one MUTANT: a site turned into a no-op (skip: a flush or
// fence not issued, a persist issuing neither, a non-temporal store made a plain store), or a
// fence site whose fence still happens but drops, rather than completes, the flushes pending at
// it (drop_flushes: they never become durable through this fence). The crash lab then checks
// whether it sees the difference.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "pmds/pm/site.hpp"

namespace pmds::pm::sim {

// One site executed since the last reset_site_counts(), in this process.
struct SiteCount {
  std::string file;  // as the compiler spelled it (often an absolute path)
  std::uint32_t line = 0, column = 0;
  SiteKind kind = SiteKind::flush;
  std::uint64_t executions = 0;  // flush calls; fences (one per persist); non-temporal stores
  // A fence of this site once completed flushes issued at ANOTHER site: then dropping its
  // flushes (drop_flushes) is a different mutant from skipping this site or that one.
  bool drains_other_sites = false;
};

enum class MutationMode : std::uint8_t { skip, drop_flushes };

struct Mutant {
  MutationMode mode = MutationMode::skip;
  std::string file;  // matches a site whose file ends with it at a '/' (or equals it)
  std::uint32_t line = 0;
  std::uint32_t column = 0;  // 0: every site on the line

  // Whether it names the site at (site_file, site_line, site_column).
  bool matches(const char* site_file, std::uint32_t site_line, std::uint32_t site_column) const {
    if (file.empty() || site_line != line || (column != 0 && site_column != column)) return false;
    const std::string_view f(site_file);
    if (f.size() < file.size() || f.substr(f.size() - file.size()) != file) return false;
    return f.size() == file.size() || file.front() == '/' || f[f.size() - file.size() - 1] == '/';
  }
};

}  // namespace pmds::pm::sim
