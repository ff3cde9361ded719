# The crash lab's programs (included by tools/CMakeLists.txt; they land in <build>/bin beside
# `pmds`, which execs pmds-crashlab for `pmds crashtest`):
#   pmds-crashlab          simulated backend: the simulated power failures, and the driver
#   pmds-crashlab-process  counting backend (the hardware one plus counters): the real process
#                          crashes (kill -9 of a process using a real pool file), started by
#                          pmds-crashlab
# Both find the history checker through PMDS_LINCHECK_PROGRAM (tools/lincheck).
# Each links the tables of every structure compiled once for its backend (tools/registry_table).
add_executable(pmds-crashlab ${CMAKE_CURRENT_LIST_DIR}/crashtest.cpp)
target_link_libraries(pmds-crashlab PRIVATE pmds_registry_table_simulated)
add_executable(pmds-crashlab-process ${CMAKE_CURRENT_LIST_DIR}/crashtest_process.cpp)
target_link_libraries(pmds-crashlab-process PRIVATE pmds_registry_table_counting)
# The programs they run at run time are link dependencies (LINK_DEPENDS), not target
# dependencies: with Ninja, add_dependencies also holds back the compilation of every object of
# the dependent target until the other is linked, which chained lincheck, pmds-crashlab-process
# and pmds-crashlab at the end of the build (45 s with one core idle, 2-core AMD EPYC).
# pmds-crashlab reads the reasons survivors' sites give from the source tree it was built from
# (crashlab/mutation.hpp, redundancy_reason).
target_compile_definitions(pmds-crashlab PRIVATE PMDS_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
foreach(program pmds-crashlab pmds-crashlab-process)
  target_include_directories(${program} PRIVATE ${CMAKE_CURRENT_LIST_DIR})
  if(PMDS_LINCHECK_PROGRAM)
    target_compile_definitions(${program} PRIVATE PMDS_LINCHECK_PROGRAM="${PMDS_LINCHECK_PROGRAM}")
    set_property(TARGET ${program} APPEND PROPERTY LINK_DEPENDS ${PMDS_LINCHECK_PROGRAM})
  endif()
endforeach()
set_property(TARGET pmds-crashlab APPEND PROPERTY LINK_DEPENDS
             $<TARGET_FILE:pmds-crashlab-process>)
install(TARGETS pmds-crashlab pmds-crashlab-process RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# `pmds crashtest` end to end (the CLI, pmds-crashlab, pmds-crashlab-process, lincheck): a
# correct structure passes; a planted bug is reported with its replay command.
if(PMDS_BUILD_TESTS)
  add_test(NAME crashtest_cli_passes
           COMMAND pmds_cli crashtest --structure list/izraelevitz --crashes 40
                   --process-crashes 3 --json ${CMAKE_CURRENT_BINARY_DIR}/crashtest_cli.json)
  add_test(NAME crashtest_cli_reports_a_planted_bug
           COMMAND pmds_cli crashtest --structure list/izraelevitz-bug-d-recovery-drops-node
                   --crashes 40 --process-crashes 3 --stop-at-first)
  set_tests_properties(crashtest_cli_reports_a_planted_bug PROPERTIES PASS_REGULAR_EXPRESSION
                       "VIOLATION list/izraelevitz-bug-d-recovery-drops-node.*replay:  pmds crashtest")
  # A run is a function of its seed across processes, and a printed replay reproduces.
  add_test(NAME crashtest_replay COMMAND ${CMAKE_CURRENT_LIST_DIR}/crashtest_replay_test.sh
                                         $<TARGET_FILE:pmds_cli>)
  set_tests_properties(crashtest_cli_passes crashtest_cli_reports_a_planted_bug crashtest_replay
                       PROPERTIES LABELS "crashlab" TIMEOUT 300)

  # The lab measures itself (docs/ARCHITECTURE.md §3, "Mutation"): one list and one hash table
  # of each technique, every persistence site removed in turn at a small budget; the score
  # (mutants caught / mutants) must stay at or above the value measured when the floor was set
  # (a run is a function of its seed, so the score at this budget is reproducible). Raise a
  # floor when a change to the lab catches more; never lower one to make a change pass.
  # The mix is pinned (--mix fixed): a floor holds for the workload it was measured on, and at
  # this budget (four workload runs per mutant) a varied mix spreads them thinner than one.
  # Floors measured 2026-12-05 at this budget and the --mutate workload (50% reads, 8 keys). A
  # survivor that a named sim test kills with its site skipped ("Mutant killed by test",
  # crashlab/mutation.hpp) counts as caught; one whose site says why it is redundant does not.
  # list/linkfree 7/7, hash/linkfree 7/7, list/soft 4/4, hash/soft 4/4.
  # list/izraelevitz 9/14 and hash/izraelevitz 8/13: the survivors are persists that another
  # persist covers, and each site says which ("Mutant survives" in algo/; the immutable fields'
  # loads are one site, in algo/policy.hpp).
  # list/mirror and hash/mirror 7/9: the survivors are patomic's two fences, which the next
  # locked DWCAS makes redundant on x86 (mirror/patomic.hpp).
  # list/flit 12/13 and hash/flit 11/11: the reader windows (a load's persist while a store to
  # its word is in flight) are killed by test/algo/reader_windows_sim_test.cpp and the two
  # unlinking CASes' persists by test/algo/izraelevitz_sim_test.cpp; list/flit's survivor says
  # why it is redundant.
  # Each floor is its score rounded down to two places.
  # hash-bytes/soft, with 24-byte keys and 100-byte values so that its nodes span lines: 12/12
  # (2026-12-06). Four of its mutants are states this budget does not reach (the write-back of
  # a replacement's deletion of the version two back: a second replacement, a remove, a crash;
  # the flush and fence of recovery's deletion of an older version: a crash after a
  # replacement, a remove, a crash); their sites name the test that kills them
  # (test/linkfree_soft/soft_string_recovery_sim_test.cpp), which the lab runs with each mutant.
  # skiplist-bytes/soft is not here: its persistence sites are hash-bytes/soft's (the code is
  # shared: detail/soft_string_versions.hpp), so its run (12/12 in 10 s, the same sizes) would
  # spend CI time on the same mutants.
  set(mutation_floors
      list/linkfree 1.0 hash/linkfree 1.0 list/soft 1.0 hash/soft 1.0 hash-bytes/soft 1.0
      list/izraelevitz 0.64 hash/izraelevitz 0.61 list/mirror 0.77 hash/mirror 0.77
      list/flit 0.92 hash/flit 1.0)
  while(mutation_floors)
    list(POP_FRONT mutation_floors structure floor)
    string(REGEX REPLACE "[/-]" "_" test_name "crashtest_mutation_${structure}")
    set(sizes)
    if(structure MATCHES "-bytes/")
      set(sizes --key-size 24 --value-size 100)
    endif()
    add_test(NAME ${test_name}
             COMMAND pmds_cli crashtest --mutate --structure ${structure} --crashes 100
                     --census-crashes 300 --mix fixed --pct 0 --grow 0 --min-score ${floor}
                     ${sizes} --quiet)
    set_tests_properties(${test_name} PROPERTIES LABELS "crashlab;mutation"
                         TIMEOUT 600)
  endwhile()
endif()
