// pmds::incll::Checkpoints — InCLL's fine-grained checkpointing (§3, §4) with its external
// log (§4.2): the durable memory mode of Masstree (incll/masstree.hpp, incll/durable_masstree.hpp).
//
// Epochs. Execution is cut into epochs (64 ms by default, Options::epoch_length). The current
// epoch number lives in the pool; a crash during epoch f makes f a failed epoch, and recovery
// returns every object to its state at the start of f — a consistent cut, since every write
// operation runs inside one epoch (below). Everything completed before the last completed
// boundary survives: sync() forces one (buffered durable linearizability, docs/ARCHITECTURE.md §4).
//
// The boundary (try_advance). InCLL flushes the whole cache with wbinvd at the start of an
// epoch; user space has no wbinvd, so each thread records every object it wrote in the epoch
// (the objects it logged and the nodes it allocated) and the boundary flushes exactly those
// (counted in stats().flushed_objects). In order: raise the operation barrier and wait until no
// write operation is in flight; flush the recorded objects; fence; store and persist epoch e+1;
// lower the barrier. A write operation (begin_write) waits while the barrier is up, so none
// spans a boundary — InCLL leaves this to Masstree's epoch machinery; here it is explicit.
// Read operations take no part: they write nothing.
//
// The external log (§4.2, incll/undo_log.hpp). Before an object that existed at the start of
// the epoch is first written in it, the writer copies the whole object into its thread's log and
// persists the entry — then writes. Each object has a logging word, 2e once logged in epoch e;
// only the holder of the object's lock logs it, so an object appears at most once per epoch. New
// objects are stamped 2e when allocated: their state at the start of the epoch is "unreachable",
// nothing to log. The log is discarded at the boundary.
//
// InCLL (§4.1; the InCLLCheckpoints mode below): an insert or a remove changes only a border's
// permutation (the new entry goes to a free slot), so the border logs its permutation in its own
// line (InCLL_p) instead of the external log; an update saves the value it replaces in the InCLL
// of that value's line; recovery puts both back.
//
// Recovery (§4.3): the failed epoch f is the pool's epoch (none after a clean shutdown); every
// log entry of epoch f (the header's epoch and a checksum over header and image say it is
// whole) is copied back to its object, flushed, one fence. The structure then clears the lock
// bits the crash left, has f added to the pool's record of failed epochs (record_failed_epoch)
// and reports its live objects to the allocator (every object allocated in f is unreachable
// again and returns to the free lists); finish_recovery() makes epoch f+3
// durable. Borders are recovered lazily, on first access (before_border_access), or all at open
// (recover_border with flush; then the record is emptied): incll/border_recovery.hpp. Nothing is
// consumed before the record and the new epoch are durable, so a crash during recovery recovers
// again.
//
// Byte strings (InCLL §5, incll/byte_string_blocks.hpp). The byte-string tree's keys and values
// are pool blocks, each with a 16-byte EpochLink before its bytes (incll/epoch_link.hpp, §5.1). A
// block the tree frees goes on its thread's free list of that block size in an epoch after the
// one that freed it, and make_bytes takes blocks from there first: the lists are objects the
// epochs checkpoint, read after a crash as they were at the start of the failed epoch. Eager
// recovery walks them (walk_block_lists) and rewrites their links before the record of failed
// epochs is emptied (settle_block_lists).
//
// Room. A write operation must not fail half-way: begin_write() first makes sure the thread has
// `reserve_per_size` free slots of each object size and room for `log_room` entries in its log
// (a new 256 KiB segment when not), and throws pmds::PoolFull there, before anything changed.
//
// Planted bugs for the crash lab (crashlab/fixtures.hpp): log_entry_not_fenced (an entry is
// flushed but not fenced before the object is written), boundary_flush_skips_node (each
// boundary leaves the first recorded object unflushed), creation_epoch_not_ended (the first
// operations run in the epoch the structure was created in) and, in the InCLL mode,
// node_epoch_before_permutation_log (InCLL_p's epoch is stored before the permutation it logs),
// value_tag_before_saved_value (a value InCLL's tag is stored before the value it saves) and
// lazy_recovery_skips_node (the first border lazy recovery should roll back is marked recovered
// with its permutation left as the failed epoch made it). One more, bytes_freed_in_their_epoch
// (a freed byte string's block goes on a free list within the epoch that freed it), is pinned
// by durable_string_masstree_hw_test: as a lab fixture it went unreported in 500 simulated
// crashes (and 300 with 100 operations per thread), so it is not one. And
// sweep_skips_lower_layers (durable_masstree.hpp): the lazy open's sweep of byte strings never
// visits the lower layers' borders, so it gives back the blocks that only they name.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pmds/backoff.hpp"
#include "pmds/error.hpp"
#include "pmds/faults.hpp"
#include "pmds/incll/border_recovery.hpp"
#include "pmds/incll/byte_string_blocks.hpp"
#include "pmds/incll/failed_epochs.hpp"
#include "pmds/incll/masstree.hpp"
#include "pmds/incll/undo_log.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/periodic_thread.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/allocator.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/pm/structure_root.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::incll {

struct Options {
  // InCLL §4: 64 ms, Masstree's reclamation epoch.
  std::chrono::microseconds epoch_length{64'000};
  // false: no thread of its own; the caller runs background_step() (the crash lab does).
  bool background_thread = true;
  // InCLL §4.3: at open, undo the external log and check the interior nodes, and recover
  // each border on its first access (true: a 10M-entry tree opens in about a tenth of the
  // time); or check every node at open, then recover them all (false, the default). Lazy
  // recovery checks a border only when it first reaches it, after recovery has written to the
  // pool, and cannot check ahead of its use a damaged border that reads as another kind of
  // node: a pool whose body may be damaged must be opened eagerly, which is why eager is the
  // default (docs/ARCHITECTURE.md §5: a damaged pool ends in PoolCorrupt before anything is
  // written).
  bool lazy_recovery = false;
};

// Counts since the structure was opened.
struct CheckpointStats {
  std::uint64_t epochs = 0;           // boundaries passed
  std::uint64_t logged_objects = 0;   // external log entries written
  std::uint64_t flushed_objects = 0;  // objects the boundaries flushed
  std::uint64_t reused_blocks = 0;    // byte-string blocks taken from the free lists
};

namespace checkpoint_detail {

inline constexpr std::size_t reserve_per_size = 16;
inline constexpr std::uint64_t magic_value = 0x33544f50484b4843;  // "CHKHPOT3"
// Anchors of earlier pmds: before the record of failed epochs, before the block free lists.
inline constexpr std::uint64_t old_magic_values[] = {0x54494f50484b4843, 0x32544f50484b4843};

// The top layer's root pointer, logged like a node when a root split replaces it.
struct alignas(64) RootBox {
  pm::atomic<std::uint64_t> logged;
  pm::atomic<std::uint64_t> root;
};

struct alignas(64) Anchor {
  RootBox root_box;
  pm::atomic<std::uint64_t> magic;
  pm::atomic<std::uint64_t> epoch;  // the current epoch: a crash makes it the failed one
  pm::atomic<LogSegment*> logs[pmds::max_threads];  // each thread's first log segment
  FailedEpochs failed;
  pm::atomic<BlockLists*> block_lists[pmds::max_threads];  // each thread's, once it made a block
};

}  // namespace checkpoint_detail

template <FaultPolicy Faults = NoFaults>
class Checkpoints {
  using Anchor = checkpoint_detail::Anchor;
  using RootBox = checkpoint_detail::RootBox;
  using Log = UndoLog<Faults>;
  using Blocks = ByteStringBlocks<Faults>;

 public:
  static constexpr bool owns_nodes = false;  // nodes live in the pool
  // The tree frees the blocks it replaced every this many retires. Under the crash lab's
  // simulator at every retire, not every 64th: its workloads (tens of operations, one or two
  // epoch boundaries a run) then free blocks within the epoch that replaced them, so the free
  // lists are crashed too. Measured: with 64, the planted bug bytes_freed_in_their_epoch was
  // not caught in 500 crashes; with 1, its fixture is caught within a hundred.
#if defined(PMDS_BACKEND_SIMULATED)
  static constexpr std::uint32_t retires_per_collect = 1;
#else
  static constexpr std::uint32_t retires_per_collect = reclaim::EpochDomain::default_collect_every;
#endif
  static constexpr bool recovers_borders = true;  // lazily: before_border_access
  static constexpr std::size_t segment_bytes = Log::segment_bytes;
  static constexpr std::size_t block_header = Blocks::block_header;

  // A new anchor in `pool`, which must hold no structure; `object_sizes` are the sizes the
  // structure allocates (each at most 512 bytes), `byte_strings` whether its entries are byte
  // strings (make_bytes; else 8-byte keys and values). The structure then builds its empty state
  // and calls finish_create().
  Checkpoints(CreateTag, pm::Pool& pool, const char* name, const Options& options,
              const std::vector<std::size_t>& object_sizes, bool byte_strings)
      : Checkpoints(pool, options, object_sizes, byte_strings,
                    new_anchor(pool, name, object_sizes)) {
    epoch_.store(1, std::memory_order_relaxed);
  }

  // The anchor `area` of an existing structure: applies the failed epoch's log (recovery's first
  // step). The structure then clears its nodes' locks, calls recover_allocator() and
  // finish_recovery().
  Checkpoints(OpenTag, pm::Pool& pool, void* area, const char* name, const Options& options,
              const std::vector<std::size_t>& object_sizes, bool byte_strings)
      : Checkpoints(pool, options, object_sizes, byte_strings,
                    existing_anchor(pool, area, name, object_sizes)) {
    const std::uint64_t e = anchor_->epoch.load();
    epoch_.store(e, std::memory_order_relaxed);
    opened_epoch_ = e;
    const pm::ChunkAllocator& a = pool.allocator();
    failed_.read(anchor_->failed, e, pool_.was_clean_shutdown(),
                 [&a](const char* what) { a.corrupt(what); });
    // This execution's first epoch, the mark of a border recovered in it: e + 1 when every border
    // is recovered at open, e + 2 when each is on its first access. Two recoveries of one failed
    // epoch (the first crashed before finish_recovery) must not share a mark: an eager one marks
    // each border it recovers, and a crash may keep a mark without the value lines recovered
    // before it (each line persists alone), which a lazy one with that mark would take for
    // recovered in its own execution (test/incll/durable_masstree_sim_test.cpp,
    // EagerAfterLazyRecovery). Lazy ones mark only after finish_recovery, past both.
    borders_.set_execution_epoch(e + (recovers_lazily() ? 2 : 1));
    log_.recover(e, &anchor_->root_box, sizeof(RootBox));
  }

  Checkpoints(const Checkpoints&) = delete;
  Checkpoints& operator=(const Checkpoints&) = delete;

  // A clean close: one last boundary, so everything completed is durable.
  ~Checkpoints() {
    background_.stop();
    if (running_)
      for (int spins = 0; !try_advance();) pmds::backoff(spins);
  }

  // ---- the memory mode's members (incll/masstree.hpp's TransientMemory has the same) -------

  class WriteScope {
   public:
    explicit WriteScope(pm::atomic<std::uint64_t>* active) : active_(active) {}
    WriteScope(const WriteScope&) = delete;
    WriteScope& operator=(const WriteScope&) = delete;
    ~WriteScope() { active_->store(0, std::memory_order_seq_cst); }

   private:
    pm::atomic<std::uint64_t>* active_;
  };

  // Enters a write operation: room first (PoolFull here changes nothing), then past the barrier.
  WriteScope begin_write() {
    ThreadState& t = state();
    make_room(t);
    for (;;) {  // Dekker with the advancer: both store, then read the other's word (seq_cst)
      t.active.store(1, std::memory_order_seq_cst);
      if (barrier_.load(std::memory_order_seq_cst) == 0) break;
      t.active.store(0, std::memory_order_seq_cst);
      for (int spins = 0; barrier_.load(std::memory_order_acquire) != 0;) pmds::backoff(spins);
    }
    blocks_.release_freed(t.blocks, epoch(), t.written);  // (inside: it writes the free lists)
    return WriteScope(&t.active);
  }

  // A slot for a new object of one of the declared sizes, recorded for the boundary flush.
  void* allocate(std::size_t bytes) {
    ThreadState& t = state();
    std::vector<void*>& spare = t.spare[size_index(bytes)];
    void* p;
    if (!spare.empty()) {
      p = spare.back();
      spare.pop_back();
    } else {  // outside a write operation (creating the structure): may throw PoolFull
      p = pool_.allocator().allocate(bytes);
    }
    t.written.push_back({p, bytes});
    return p;
  }
  void release(void*) {}  // never called: owns_nodes is false

  // Byte strings (the byte-string tree's keys and values): a pool block each, its EpochLink
  // then the Bytes (at most 8 KiB), taken from the thread's free list of that size (InCLL §5),
  // else from the allocator; written and recorded for the boundary flush like a new node — new
  // in this epoch, nothing to log. Called inside a write operation, before it changes anything
  // (PoolFull then changes nothing).
  static constexpr std::size_t max_key_size = 1024;
  static constexpr std::size_t max_value_size =
      Blocks::max_block - block_header - sizeof(masstree_detail::Bytes);
  static std::size_t block_size_for(std::size_t length) {
    return Blocks::block_size_for(length);
  }
  masstree_detail::Bytes* make_bytes(std::string_view s) {
    ThreadState& t = state();
    return blocks_.make(t.blocks, s, epoch(), t.written,
                        [this](std::size_t bytes) { return allocate_in_operation(bytes); });
  }
  // A byte string the tree no longer names (once no reader can hold it): its block is listed in
  // an epoch after this one (incll/byte_string_blocks.hpp), at once when the thread is inside a
  // write operation, else by its next.
  void free_bytes(masstree_detail::Bytes* b) {
    ThreadState& t = state();
    Blocks::free(t.blocks, b, epoch());
    if (t.active.load(std::memory_order_relaxed) != 0)
      blocks_.release_freed(t.blocks, epoch(), t.written);
  }
  // A new object counts as logged in the current epoch.
  std::uint64_t new_node_stamp() const {
    return epoch_.load(std::memory_order_relaxed) << 1;
  }

  // After a write that needs no undo but must be durable once its epoch has ended: a parent
  // link an interior split moved (derived state; recovery rebuilds only the links under the
  // nodes the failed epoch's log restores, so any other link must already be right in the pool).
  void after_derived_write(const void* object, std::size_t bytes) {
    record_written(object, bytes);
  }

  // Before the first write in this epoch to an object that existed before it: log it (above).
  // The caller holds the object's lock.
  void before_write(pm::atomic<std::uint64_t>& logged, const void* object, std::size_t bytes) {
    const std::uint64_t e = epoch_.load(std::memory_order_relaxed);
    if (logged.load(std::memory_order_relaxed) == e << 1) return;
    ThreadState& t = state();
    log_.write(t.log, e, object, bytes);
    t.written.push_back({object, bytes});
    logged.store(e << 1, std::memory_order_relaxed);
  }
  // Before an insert or a remove changes a border's permutation, or an update one of its values:
  // the logging mode logs the border whole.
  template <class Border>
  void before_permutation_write(Border& b, bool /*inserting*/) {
    before_write(b.logged, &b, sizeof(Border));
  }
  template <class Border>
  void before_value_write(Border& b, int /*slot*/) {
    before_write(b.logged, &b, sizeof(Border));
  }

  pm::atomic<std::uint64_t>& root_word() {
    return anchor_->root_box.root;
  }
  const pm::atomic<std::uint64_t>& root_word() const {
    return anchor_->root_box.root;
  }
  void before_root_write() {
    before_write(anchor_->root_box.logged, &anchor_->root_box, sizeof(RootBox));
  }

  void before_border_access(masstree_detail::Border& b) const {
    borders_.before_access(b);
  }

  // ---- epochs ---------------------------------------------------------------------------------

  std::uint64_t epoch() const {
    return epoch_.load(std::memory_order_acquire);
  }
  // The pool's epoch when it was opened: after a crash, the failed epoch (0: created new).
  std::uint64_t opened_epoch() const {
    return opened_epoch_;
  }

  // One boundary, unless another thread is passing one (then false). See the header.
  bool try_advance() {
    std::uint64_t expected = 0;
    if (!barrier_.compare_exchange_strong(expected, 1, std::memory_order_seq_cst)) return false;
    const std::size_t threads = threads_seen_.load(std::memory_order_seq_cst);
    for (std::size_t i = 0; i < threads; ++i)
      for (int spins = 0; states_[i].active.load(std::memory_order_seq_cst) != 0;)
        pmds::backoff(spins);
    bool skipped = Faults::planted != Fault::boundary_flush_skips_node;
    std::uint64_t flushed = 0;
    for (std::size_t i = 0; i < threads; ++i) {
      for (const auto& [p, n] : states_[i].written) {
        if (!skipped) {
          skipped = true;
          continue;
        }
        pm::flush_range(p, n);
        ++flushed;
      }
      states_[i].written.clear();
    }
    pm::fence();  // the epoch's writes are durable before the epoch moves past them
    const std::uint64_t e = epoch_.load(std::memory_order_relaxed);
    anchor_->epoch.store(e + 1);
    pm::persist(&anchor_->epoch, sizeof(std::uint64_t));
    epoch_.store(e + 1, std::memory_order_release);
    stats_epochs_.fetch_add(1, std::memory_order_relaxed);
    stats_flushed_.fetch_add(flushed, std::memory_order_relaxed);
    barrier_.store(0, std::memory_order_seq_cst);
    return true;
  }

  // Everything completed before the call is durable when it returns: one boundary after it.
  void sync() {
    const std::uint64_t start = epoch();
    for (int spins = 0; epoch() <= start;)
      if (!try_advance()) pmds::backoff(spins);
  }

  void background_step() {
    try_advance();
  }

  CheckpointStats stats() const {
    CheckpointStats s;
    s.epochs = stats_epochs_.load(std::memory_order_relaxed);
    s.flushed_objects = stats_flushed_.load(std::memory_order_relaxed);
    for (std::size_t i = 0; i < pmds::max_threads; ++i) {
      s.logged_objects += states_[i].log.logged.load(std::memory_order_relaxed);
      s.reused_blocks += states_[i].blocks.reused.load(std::memory_order_relaxed);
    }
    return s;
  }

  // ---- creation and recovery ------------------------------------------------------------------

  // Quiescent, after the structure built its empty state (in epoch 1): makes it durable, ends
  // epoch 1 — the objects made in it count as new in it, so the first operations must find it
  // over, or they would change them unlogged — names the anchor in the pool's roots (the tag
  // last) and starts the epochs.
  void finish_create(std::uint64_t tag) {
    for (auto& [p, n] : state().written) pm::flush_range(p, n);
    state().written.clear();
    pm::persist(&anchor_->root_box, sizeof(RootBox));
    if constexpr (Faults::planted != Fault::creation_epoch_not_ended) {
      anchor_->epoch.store(2);
      pm::persist(&anchor_->epoch, sizeof(std::uint64_t));
      epoch_.store(2, std::memory_order_release);
    }
    borders_.set_execution_epoch(1);  // (a new tree has no border to recover)
    pm::StructureRoot::write(pool_, tag, 0, anchor_);
    start();
  }

  // Quiescent: rebuilds the allocator's free lists. is_object(slot) says whether a slot is one of
  // the structure's live objects; the anchor and the log segments are live too. Returns the
  // allocator's counts.
  template <class IsObject>
  pm::AllocatorRecoveryStats recover_allocator(IsObject&& is_object) {
    return pool_.allocator().recover(with_own_slots(is_object));
  }
  // The same for the chunks used at open only, later, while operations run (the byte-string
  // tree's lazy open: pm::ChunkAllocator::recover_chunks). Operations allocate no slot of those
  // chunks before, and free none: the tree's blocks go to the free lists above.
  template <class IsObject>
  pm::AllocatorRecoveryStats recover_allocator_chunks(const std::vector<std::size_t>& chunks,
                                                      IsObject&& is_object) {
    return pool_.allocator().recover_chunks(chunks, with_own_slots(is_object));
  }
  // The byte-string tree's lazy open (incll/durable_masstree.hpp): `check` is called with each
  // border lazy recovery is about to recover (under its recovery lock, before it is written),
  // and `pool_full` when the pool has no free chunk for an operation (true: it made room, the
  // allocation is tried again). Set before operations start.
  void set_lazy_open_hooks(std::function<void(masstree_detail::Border&)> check,
                           std::function<bool()> pool_full) {
    borders_.set_before_recovery(std::move(check));
    when_pool_full_ = std::move(pool_full);
  }

  // The anchor and the log segments: the slots recover_allocator() keeps besides the objects.
  std::size_t own_slots() const {
    return 1 + log_.segments().size();
  }
  // is_object, and the anchor and the log segments found at open.
  template <class IsObject>
  auto with_own_slots(IsObject& is_object) const {
    return [this, &is_object](void* slot, std::size_t size) {
      if (slot == anchor_) return true;
      if (size == segment_bytes) return log_.is_segment(slot);
      return static_cast<bool>(is_object(slot));
    };
  }

  // Quiescent, last step of recovery: the failed epoch f is left behind, durably. Operations
  // start in f + 3: f + 1 and f + 2 are the marks of a border recovered in this execution
  // (node_epoch; eager and lazy, above), and must name no epoch whose writes they could be taken
  // for — a border marked with an operations' epoch would count as logged in it
  // (InCLLCheckpoints) and miss the boundary flush.
  void finish_recovery() {
    const std::uint64_t e = opened_epoch_ + 3;
    anchor_->epoch.store(e);
    pm::persist(&anchor_->epoch, sizeof(std::uint64_t));
    epoch_.store(e, std::memory_order_release);
    start();
  }

  std::size_t log_entries_applied() const {
    return log_.restored_objects().size();
  }
  // Whether the object at `p` was restored from the log (recovery only).
  bool restored_from_log(const void* p) const {
    return log_.restored(p);
  }
  // The objects the log restored, in address order (recovery only).
  const std::vector<const void*>& restored_objects() const {
    return log_.restored_objects();
  }

  // ---- lazy and eager recovery of borders and block lists (InCLL §4.3, §5) -------------------

  // Whether this recovery leaves the borders to lazy recovery: unless the options say eager or
  // the record of failed epochs is full (then the eager recovery empties it).
  bool recovers_lazily() const {
    return options_.lazy_recovery && failed_.has_room();
  }
  // Lazy recovery, before any border is recovered: the failed epoch joins the record, durably.
  void record_failed_epoch() {
    failed_.record();
  }
  // Eager recovery, once every border is recovered, flushed and fenced: no border carries a
  // failed epoch any more (settle_block_lists left no link that reads by them).
  void forget_failed_epochs() {
    failed_.forget();
  }
  // The failed epochs the pool's record holds.
  std::size_t failed_epochs_recorded() const {
    return failed_.stored();
  }

  // Recovery, before anything is written: the free lists of blocks, checked and set in `reached`
  // (ByteStringBlocks::walk); eager recovery then rewrites their links (settle).
  using ListedBlocks = typename Blocks::Listed;
  ListedBlocks walk_block_lists(pm::ChunkAllocator::SlotBits& reached) const {
    return blocks_.walk(reached);
  }
  void settle_block_lists() {
    blocks_.settle(borders_.execution_epoch());
  }

  // Borders (incll/border_recovery.hpp): checked as recovery will find them, the value a slot
  // will hold, recovered (the eager recovery, with `flush`), and the counts of what was restored.
  masstree_detail::Permutation check_border(const masstree_detail::Border& b) const {
    return borders_.check(b);
  }
  std::uint64_t value_after_recovery(const masstree_detail::Border& b, int slot) const {
    return borders_.value_after_recovery(b, slot);
  }
  void recover_border(masstree_detail::Border& b, bool flush) const {
    borders_.recover(b, flush);
  }
  std::size_t permutations_restored() const {
    return borders_.permutations_restored();
  }
  std::size_t values_restored() const {
    return borders_.values_restored();
  }

 protected:
  // The calling thread wrote `object` in this epoch: the boundary flushes it.
  void record_written(const void* object, std::size_t bytes) {
    state().written.push_back({object, bytes});
  }

 private:
  struct alignas(64) ThreadState {
    pm::atomic<std::uint64_t> active{0};  // DRAM; a pm::atomic so the crash lab schedules it
    typename Log::Cursor log;
    typename Blocks::Local blocks;            // byte strings only
    EpochWrites written;                      // this epoch's objects
    std::array<std::vector<void*>, 4> spare;  // per declared size
  };

  Checkpoints(pm::Pool& pool, const Options& options, const std::vector<std::size_t>& sizes,
              bool byte_strings, Anchor* anchor)
      : pool_(pool),
        options_(options),
        sizes_(sizes),
        byte_strings_(byte_strings),
        anchor_(anchor),
        log_(pool, anchor->logs),
        blocks_(pool, anchor->block_lists, failed_),
        borders_(pool, byte_strings, failed_) {}

  static Anchor* new_anchor(pm::Pool& pool, const char* name,
                            const std::vector<std::size_t>& sizes) {
    check_sizes(sizes);
    pm::StructureRoot::check_unused(pool, name);
    auto* anchor = static_cast<Anchor*>(pool.allocator().allocate(sizeof(Anchor)));
    anchor->root_box.logged.store(0, std::memory_order_relaxed);
    anchor->root_box.root.store(0, std::memory_order_relaxed);
    anchor->epoch.store(1, std::memory_order_relaxed);
    for (auto& l : anchor->logs) l.store(nullptr, std::memory_order_relaxed);
    for (auto& l : anchor->block_lists) l.store(nullptr, std::memory_order_relaxed);
    anchor->failed.count.store(0, std::memory_order_relaxed);
    anchor->magic.store(checkpoint_detail::magic_value, std::memory_order_relaxed);
    pm::persist(anchor, sizeof(Anchor));
    return anchor;
  }

  static Anchor* existing_anchor(pm::Pool& pool, void* area, const char* name,
                                 const std::vector<std::size_t>& sizes) {
    check_sizes(sizes);
    const pm::ChunkAllocator& a = pool.allocator();
    if (a.is_slot(area, sizeof(RootBox)) &&
        std::ranges::count(checkpoint_detail::old_magic_values,
                           static_cast<Anchor*>(area)->magic.load()) != 0)
      a.corrupt(std::string(name) +
                ": the pool was written by an earlier pmds, in a format "
                "this one does not read (docs/ARCHITECTURE.md §5)");
    if (!a.is_slot(area, sizeof(Anchor)) ||
        static_cast<Anchor*>(area)->magic.load() != checkpoint_detail::magic_value)
      a.corrupt(std::string(name) + ": its root does not name a checkpoint anchor");
    return static_cast<Anchor*>(area);
  }

  static void check_sizes(const std::vector<std::size_t>& sizes) {
    if (sizes.empty() || sizes.size() > 4)
      throw Error("pmds: incll::Checkpoints takes 1 to 4 object sizes");
    for (std::size_t s : sizes)
      if (s > Log::max_object_bytes || s % 64 != 0)
        throw Error("pmds: incll::Checkpoints: object size " + std::to_string(s) +
                    " is not a multiple of 64 up to 512");
  }
  std::size_t size_index(std::size_t bytes) const {
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      if (sizes_[i] == bytes) return i;
    throw Error("pmds: incll::Checkpoints: allocation of an undeclared size " +
                std::to_string(bytes));
  }

  ThreadState& state() {
    const std::size_t id = pmds::thread_id();
    std::size_t seen = threads_seen_.load(std::memory_order_relaxed);
    while (seen <= id &&
           !threads_seen_.compare_exchange_weak(seen, id + 1, std::memory_order_seq_cst)) {
    }
    return states_[id];
  }

  void start() {
    running_ = true;
    if (options_.background_thread)
      background_.start(options_.epoch_length, [this] { try_advance(); });
  }

  // Before a write operation changes anything: the thread's block lists (byte strings), spare
  // slots of every size, and room in its log (UndoLog::room entries).
  void make_room(ThreadState& t) {
    const auto allocate = [this](std::size_t bytes) { return allocate_in_operation(bytes); };
    if (byte_strings_) blocks_.find_lists(t.blocks, allocate);
    for (std::size_t i = 0; i < sizes_.size(); ++i)
      while (t.spare[i].size() < checkpoint_detail::reserve_per_size)
        t.spare[i].push_back(allocate(sizes_[i]));
    log_.make_room(t.log, epoch_.load(std::memory_order_relaxed), allocate);
  }

  // A slot from the allocator for an operation, taken before it changes anything (PoolFull then
  // changes nothing); while the byte-string tree's lazy open still withholds the chunks used
  // before it, a full pool first has it finish (set_lazy_open_hooks).
  void* allocate_in_operation(std::size_t bytes) {
    try {
      return pool_.allocator().allocate(bytes);
    } catch (const PoolFull&) {
      if (!when_pool_full_ || !when_pool_full_()) throw;
    }
    return pool_.allocator().allocate(bytes);
  }

  pm::Pool& pool_;
  Options options_;
  std::vector<std::size_t> sizes_;
  bool byte_strings_;
  Anchor* anchor_;
  FailedEpochRecord<Faults> failed_;  // recovery's (incll/failed_epochs.hpp)
  Log log_;
  Blocks blocks_;
  BorderRecovery<Faults> borders_;
  std::atomic<std::uint64_t> epoch_{0};   // the volatile copy; the pool's is never behind it
  pm::atomic<std::uint64_t> barrier_{0};  // DRAM; 1 while a boundary is passed
  std::atomic<std::size_t> threads_seen_{0};
  std::unique_ptr<ThreadState[]> states_{new ThreadState[pmds::max_threads]};
  std::atomic<std::uint64_t> stats_epochs_{0};
  std::atomic<std::uint64_t> stats_flushed_{0};
  std::uint64_t opened_epoch_ = 0;
  std::function<bool()> when_pool_full_;  // set_lazy_open_hooks
  bool running_ = false;
  PeriodicThread background_;
};

// The InCLL mode (§4.1): Checkpoints, except that a border logs its own changes in its
// cache lines where it can (the InCLLs of incll/masstree.hpp's Border and ValueLine) instead of
// in the external log: an insert or a remove its permutation (InCLL_p), an update the value it
// replaces (the InCLL of that value's line). Splits, layer creation and interior nodes use the
// external log, as in the paper.
template <FaultPolicy Faults = NoFaults>
class InCLLCheckpoints : public Checkpoints<Faults> {
 public:
  using Checkpoints<Faults>::Checkpoints;

  // InCLL Listing 3's InCLL() before an insert or a remove. A remove clears
  // insertions_allowed: an insert could then reuse the removed entry's slot, whose key and value
  // the permutation alone cannot bring back, so the next insert in this epoch logs the border
  // whole (§4.1.1) — once: then it counts as logged.
  template <class Border>
  void before_permutation_write(Border& b, bool inserting) {
    const std::uint64_t e = this->epoch();
    const std::uint64_t node_epoch = b.node_epoch.load(std::memory_order_relaxed);
    if (node_epoch >> 1 != e)
      log_permutation(b, e);
    else if (inserting && (node_epoch & 1) == 0)
      this->before_write(b.logged, &b, sizeof(Border));  // nothing when already logged
    if (!inserting) b.node_epoch.store(e << 1, std::memory_order_release);
  }

  // Listing 3's update(), with the InCLL of the value's line (§4.1.3): the first update of a
  // value in epoch e saves the value, then tags the line's InCLL with e and the value's index
  // (one line, so the saved value persists before the tag, and the tag before the new value).
  // A second value of the same line updated in e finds the InCLL taken: the border is logged
  // whole. Like the paper's update, it also starts the border's epoch (InCLL_p), which records
  // the border for the boundary flush.
  template <class Border>
  void before_value_write(Border& b, int slot) {
    const std::uint64_t e = this->epoch();
    if (b.logged.load(std::memory_order_relaxed) == e << 1) return;  // logged whole, or made, in e
    if (b.node_epoch.load(std::memory_order_relaxed) >> 1 != e) log_permutation(b, e);
    using Line = std::remove_cvref_t<decltype(b.value_lines[0])>;
    auto& line = b.value_lines[slot / Line::values];
    const int index = slot % Line::values;
    const std::uint64_t tag = e << 3 | static_cast<std::uint64_t>(index);
    const std::uint64_t taken = line.log_tag.load(std::memory_order_relaxed);
    if (taken == tag) return;  // this value was saved in e already
    if (taken >> 3 == e) {
      this->before_write(b.logged, &b, sizeof(Border));
      return;
    }
    const std::uint64_t old = line.value[index].load(std::memory_order_relaxed);
    if constexpr (Faults::planted == Fault::value_tag_before_saved_value) {
      line.log_tag.store(tag, std::memory_order_release);
      line.log_value.store(old, std::memory_order_release);
    } else {
      line.log_value.store(old, std::memory_order_release);
      line.log_tag.store(tag, std::memory_order_release);
    }
  }

 private:
  // The first change of a border in epoch e: InCLL_p saves the permutation, then stamps
  // node_epoch with e (the order matters: a node_epoch of the failed epoch makes recovery trust
  // permutation_log, so the log must persist first; both share the permutation's line, where
  // stores persist in order, so release stores suffice). A border logged whole in e, or made in
  // e, is restored without it.
  template <class Border>
  void log_permutation(Border& b, std::uint64_t e) {
    if (b.logged.load(std::memory_order_relaxed) == e << 1) {
      b.node_epoch.store(e << 1 | 1, std::memory_order_release);
      return;
    }
    const std::uint64_t permutation = b.permutation.load(std::memory_order_relaxed);
    if constexpr (Faults::planted == Fault::node_epoch_before_permutation_log) {
      b.node_epoch.store(e << 1 | 1, std::memory_order_release);
      b.permutation_log.store(permutation, std::memory_order_release);
    } else {
      b.permutation_log.store(permutation, std::memory_order_release);
      b.node_epoch.store(e << 1 | 1, std::memory_order_release);
    }
    this->record_written(&b, sizeof(Border));
  }
};

}  // namespace pmds::incll
