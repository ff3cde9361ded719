// pmds bench — the runner: for one structure, every thread count × repetition of a workload, each
// in a fresh structure (in a fresh pool when durable), optionally in a child process, giving
// one Record per thread count; then, once, its recovery time. The pieces it is made of:
//   bench/timed_run.hpp        the prefill and the timed run (workers, phases, counters)
//   bench/target.hpp           a structure's compiled entry points; workloads per kind
//   bench/space.hpp            pool and DRAM bytes a structure holds
//   bench/temporary_pool.hpp   temporary pool files
//   bench/recovery_timing.hpp  recovery time after a process crash
//   bench/isolation.hpp        a repetition in a forked child
//   bench/record.hpp           the Record and its table, JSON and CSV
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "pmds/bench/isolation.hpp"
#include "pmds/bench/progress.hpp"
#include "pmds/bench/record.hpp"
#include "pmds/bench/recovery_timing.hpp"
#include "pmds/bench/space.hpp"
#include "pmds/bench/target.hpp"
#include "pmds/bench/temporary_pool.hpp"
#include "pmds/bench/timed_run.hpp"
#include "pmds/bench/workload.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/registry/descriptor.hpp"

namespace pmds::bench {

// What one repetition measured: its run, and (when asked) the space of an empty structure (the
// fixed cost) and of the structure at the end of the run. Trivially copyable: an isolated
// repetition sends it back through a pipe.
struct RepOutcome {
  RepResult result;
  std::uint64_t filled = 0;  // successful prefill operations
  Space empty, end;
  CheckpointCounts checkpoints;  // during warm-up and measurement (epoch-checkpointed entries)
};

// One repetition: a fresh structure (in a fresh pool at `path` when durable), its prefill, the
// timed run, and, if `measure_space`, first the space of an empty structure built alone, then
// the space at the end of the run.
inline RepOutcome run_one_repetition(const Target& t, const registry::CreateOptions& create,
                                     const std::string& path, const RunParams& p,
                                     std::uint64_t prefill_seed, unsigned threads,
                                     bool measure_space) {
  const registry::Entry& e = *t.entry;
  RepOutcome out;
  if (measure_space) {
    auto empty = registry::Instance::create(e, create, path);
    out.empty = space_of(empty);
    empty.close();
    if (!path.empty()) std::filesystem::remove(path);
  }
  auto inst = registry::Instance::create(e, create, path);
  out.filled = t.prefill(inst.object(), p.prefill, p.key_range, prefill_seed, threads);
  if (out.filled != p.prefill)
    throw Error("pmds: prefill of " + std::string(e.name) + " inserted " +
                std::to_string(out.filled) + " of " + std::to_string(p.prefill) + " elements");
  const auto checkpoints_before = inst.checkpoint_counts();
  out.result = t.run(inst.object(), p);
  if (const auto after = inst.checkpoint_counts()) out.checkpoints = *after - *checkpoints_before;
  if (measure_space) out.end = space_of(inst);
  inst.close();
  return out;
}

// A record of entry e under cfg at `threads` threads, with every parameter of the run and no
// measurement yet.
inline Record record_of_run(const registry::Entry& e, const Config& cfg, unsigned threads) {
  Record r;
  r.structure = std::string(e.name);
  r.technique = std::string(e.technique);
  r.kind = registry::to_string(e.kind);
  r.criterion = to_string(e.criterion);
  r.workload = to_string(cfg.workload);
  r.distribution = is_keyed(cfg.workload) ? to_string(cfg.distribution) : "none";
  r.threads = threads;
  r.key_range = cfg.key_range;
  r.prefill = cfg.effective_prefill();
  r.reads_pct = cfg.effective_reads();
  r.duration_s = cfg.duration_s;
  r.warmup_s = cfg.warmup_s;
  r.reps = cfg.reps;
  r.seed = cfg.seed;
  r.fence_latency_ns = cfg.fence_latency_ns;
  r.local_work = cfg.local_work;
  r.zipf_theta = cfg.zipf_theta;
  r.recovery_threads = cfg.recovery_threads;
  r.lazy_recovery = cfg.lazy_recovery;
  r.key_size = cfg.key_size;
  r.value_size = cfg.value_size;
  r.backend = pm::to_string(pm::backend);
  r.flush_instruction = pm::to_string(pm::flush_instruction());
  if (is_keyed(cfg.workload)) {
    registry::CreateOptions o;
    o.key_range = cfg.key_range;
    o.buckets = cfg.buckets;
    r.buckets = registry::bucket_count_for(o);
  }
  return r;
}

// How the structures of a run are sized.
inline registry::CreateOptions create_options_of(const Config& cfg) {
  registry::CreateOptions create;
  create.key_range = cfg.key_range;
  create.buckets = cfg.buckets;
  create.pool_size = cfg.pool_size;
  create.max_pool_size = cfg.max_pool_size;
  create.recovery_threads = cfg.recovery_threads;
  create.lazy_recovery = cfg.lazy_recovery;
  create.key_size = cfg.key_size;
  create.value_size = cfg.value_size;
  // A bounded heap is as large as the key range: Fatourou et al.'s Figure 7b runs a heap of 64 to
  // 1024 keys, half full.
  if (cfg.workload == Workload::heap) create.capacity = cfg.key_range;
  if (cfg.workload == Workload::ycsb_e) {
    // YCSB E inserts new keys above the range; count them into the structure's sizing.
    create.pool_size = cfg.pool_size != 0 ? cfg.pool_size : registry::default_pool_size(create) * 2;
  }
  return create;
}

// The pool files of one target's run. --pool PATH: every pool of the run is made at PATH,
// replacing the previous one, and the last stays there (the CLI refuses to start when PATH
// already exists, so any file found there is one this run made). Otherwise each pool is a
// temporary file, removed after use.
class RunPools {
 public:
  RunPools(const registry::Entry& e, const Config& cfg) : entry_(&e), kept_(cfg.pool_path) {}
  // The path for the next pool (empty for a transient structure).
  std::string next() const {
    if (!entry_->durable) return {};
    if (kept_.empty()) return temporary_pool_path(entry_->name);
    remove(kept_);
    return kept_;
  }
  // Done with a pool made at `path`.
  void done(const std::string& path) const {
    if (!path.empty() && kept_.empty()) remove(path);
  }
  static void remove(const std::string& path) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
  }

 private:
  const registry::Entry* entry_;
  std::string kept_;
};

// The repetitions of one thread count, added up into r (space: from the first repetition).
inline void run_repetitions(const Target& t, const Config& cfg, unsigned threads,
                            const RunPools& pools, const KeyChooser* keys, Progress* progress,
                            const std::string& progress_prefix, Record& r) {
  const registry::Entry& e = *t.entry;
  const registry::CreateOptions create = create_options_of(cfg);
  RunParams p;
  p.workload = cfg.workload;
  p.threads = threads;
  p.warmup_s = cfg.warmup_s;
  p.duration_s = cfg.duration_s;
  p.key_range = cfg.key_range;
  p.prefill = cfg.effective_prefill();
  p.reads_pct = cfg.effective_reads();
  p.local_work = cfg.local_work;
  p.scan_length = cfg.scan_length;
  p.keys = keys;
  p.seed = cfg.seed;
  p.progress = progress;
  for (unsigned rep = cfg.first_rep; rep < cfg.first_rep + cfg.reps; ++rep) {
    p.rep = rep;
    p.progress_label = progress_prefix + std::string(e.name) + "  " + to_string(cfg.workload) +
                       "  threads " + std::to_string(threads) + "  rep " + std::to_string(rep + 1);
    if (progress != nullptr) progress->update(p.progress_label + "  prefill");
    const std::string path = pools.next();
    const auto one_rep = [&] {
      return run_one_repetition(t, create, path, p, cfg.seed + rep, threads, rep == 0);
    };
    const RepOutcome out = cfg.isolate ? in_child_process(one_rep, e.name) : one_rep();
    pools.done(path);
    const RepResult& res = out.result;
    r.mops_reps.push_back(res.mops());
    r.ops += res.ops;
    r.writer_ops += res.writer_ops;
    r.seconds_total += res.seconds;
    r.counters += res.counters;
    r.checkpoints += out.checkpoints;
    if (rep == 0) {
      r.elements_after_prefill = out.filled;
      r.elements = elements_after(out.filled, res);
      r.pool_bytes = out.end.pool_bytes;
      r.fixed_pool_bytes = out.empty.pool_bytes;
      if (out.end.has_dram_bytes && out.empty.has_dram_bytes) {
        r.dram_bytes = out.end.dram_bytes;
        r.fixed_dram_bytes = out.empty.dram_bytes;
      }
    }
  }
  r.finish_throughput();
  r.finish_counts();
  r.finish_bytes();
}

// Recovery time: once per structure (it does not depend on the thread count of the run), from a
// structure holding the prefill (queues/stacks: half the key range, as they run from empty),
// reported on each of its records.
inline void add_recovery_time(const Target& t, const Config& cfg, const RunPools& pools,
                              std::vector<Record>& records) {
  const registry::Entry& e = *t.entry;
  const std::uint64_t elements =
      (e.kind == registry::Kind::queue || e.kind == registry::Kind::stack)
          ? cfg.key_range / 2
          : (e.kind == registry::Kind::register_object ? 0 : cfg.effective_prefill());
  const std::string path = pools.next();
  try {
    const RecoveryMeasurement m =
        measure_recovery(t, create_options_of(cfg), path, elements, cfg.seed);
    for (Record& r : records) {
      r.recovery_ms = m.milliseconds;
      r.recovery_elements = m.elements;
      r.recovered_elements = m.found;
    }
  } catch (...) {
    RunPools::remove(path);
    throw;
  }
  pools.done(path);
}

// Runs cfg's workload on one target at every thread count of cfg; one Record per count.
inline std::vector<Record> run_target(const Target& t, const Config& cfg, Progress* progress,
                                      const std::string& progress_prefix = {}) {
  const registry::Entry& e = *t.entry;
  std::vector<Record> records;
  if (const auto why = unsupported_reason(e, cfg.workload)) {
    for (const unsigned threads : cfg.threads) {
      Record r = record_of_run(e, cfg, threads);
      r.status = "unsupported";
      r.note = *why;
      records.push_back(std::move(r));
    }
    return records;
  }
  std::optional<KeyChooser> keys;
  if (is_keyed(cfg.workload))
    keys.emplace(cfg.distribution, cfg.key_range, cfg.zipf_theta, cfg.seed);
  const RunPools pools(e, cfg);
  for (const unsigned threads : cfg.threads) {
    records.push_back(record_of_run(e, cfg, threads));
    run_repetitions(t, cfg, threads, pools, keys ? &*keys : nullptr, progress, progress_prefix,
                    records.back());
  }
  if (e.durable && cfg.measure_recovery) {
    if (progress != nullptr) progress->update(progress_prefix + std::string(e.name) + "  recovery");
    add_recovery_time(t, cfg, pools, records);
  }
  return records;
}

}  // namespace pmds::bench
