// pmds-crashlab-process — the real process crashes of the crash lab, run by pmds-crashlab for
// each structure (pmds/crashlab/process_lab.hpp), on the counting backend (the hardware one plus
// counters: it shares `pmds`'s compiled table of every structure). With --json-line it prints
// one JSON result line on standard output for its caller.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <vector>

#include "commands.hpp"
#include "crashtest_options.hpp"
#include "crashtest_select.hpp"
#include "pmds/crashlab/process_lab.hpp"
#include "pmds/crashlab/report.hpp"

int main(int argc, char** argv) {
  using namespace pmds::crashlab;
  try {
    CLI::App app{pmds::crashtest::description, "pmds-crashlab-process"};
    pmds::crashtest::Options o;
    pmds::crashtest::add_options(app, o);
    if (const auto done = pmds::cli::parse_command_line(app, argc, argv)) return *done;
    const auto entries = pmds::crashtest::select(o);
    if (!entries) return 2;
    std::vector<LabResult> results;
    for (const auto* e : *entries) {
      ProcessOptions po;
      po.workload = pmds::crashtest::workload_options(o, o.process_ops);
      po.seed = o.seed;
      po.crashes = o.process_crashes;
      po.grow = o.process_grow;
      po.stop_at_first_violation = o.stop_at_first;
      po.keep_histories = o.keep_histories;
      if (!o.quiet)
        po.progress = [&](const LabResult& r) {
          std::fprintf(stderr, "%-44s process crashes %llu  violations %llu\n", e->name.data(),
                       static_cast<unsigned long long>(r.process_crashes),
                       static_cast<unsigned long long>(r.violations));
        };
      results.push_back(run_process_crashes(*e, po));
    }
    if (o.json_line) {
      for (const auto& r : results) std::cout << json_line(result_json(r)) << "\n";
    } else {
      for (const auto& r : results)
        for (const auto& v : r.details) std::cout << describe(r.structure, v);
      std::cout << summary_table(results);
    }
    for (const auto& r : results)
      if (!r.passed()) return 1;
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "pmds-crashlab-process: " << e.what() << "\n";
    return 1;
  }
}
