// pmds::montage::HashMap — Michael's lock-free hash table on nbMontage (its paper's Appendix A,
// Figure 7): "hash/montage", buffered durable linearizability, with sync(); and
// ByteStringHashMap, "hash-bytes/montage", the same table over byte-string keys and values
// (pmds::ByteStringMap: nbMontage §5's 32-byte keys and 1 KB values), with its transient twin
// "hash-bytes/transient" (TransientByteStringHashMap).
//
// The index — a fixed array of buckets in DRAM, each a Michael (Harris-Michael) sorted list of
// DRAM nodes — is transient and rebuilt at recovery. Each node points to its payload, a pool
// block (montage::Block header + key + value) that never changes once linked (§3.2's
// constraint 3). The two linearizing CASes are lin_cas (epoch_system.hpp): an insert's link of
// its node, and a remove's mark of the node's next word, after pdetach of its payload. The
// unlinking of a marked node is a plain cas: it changes no payload. Reads never flush or fence.
//
// put (insert or update) is one lin_cas on the OLD node's next word, from its successor to (new
// node | mark): the old node removed and the new one linked after it in the same instant, with
// the new payload and the old one's anti-node tagged by that one lin_cas (nbMontage §3.2). Not
// nbMontage Figure 7's update, under which a concurrent remove could also take effect:
// algo/harris_michael_list.hpp's HmBucket::put says why.
//
// Both maps are algo/michael_hash.hpp's table over MontagePolicy (montage/policy.hpp), as the
// skip list and the BST are; what this file adds around the table (the pool's root, the epoch
// system and sync are montage/structure.hpp's): the bucket count in the root, recovery, the
// table rebuilt from the payloads that survive (§3.4), and the clean close. With 8-byte keys
// (WordKeysByUid) a node keeps a copy of its key and value (immutable, like the payload:
// nbMontage §3.2), so reads touch DRAM only, as SOFT's volatile nodes do (Zuriel et al. §4), and
// its payload's uid, so that a remove touches no line of the payload (PayloadByUid,
// key_value_payload.hpp); the payload is read only by recovery. Byte-string keys go to buckets
// by their hash and lie in a bucket's list in (64-bit hash, bytes) order (HashedByteStringKeys);
// a node keeps the hash, and reads compare and copy the rest from the payload. The byte strings'
// twin, "hash-bytes/transient", is the same table over MontagePolicy<NoFaults, TransientSystem>:
// payloads on the heap, plain CASes, so that the ratio between the two is nbMontage's cost alone
// (the 8-byte map's twin is algo/'s table itself, "hash/transient").
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "HASHMONT" ("HASHMONB" for byte strings)
// and the bucket count; payload and anti-node blocks from the allocator. The payloads are as they
// were when this file had its own copy of the algorithm (a pool written by either build opens in
// the other).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "pmds/algo/michael_hash.hpp"
#include "pmds/error.hpp"
#include "pmds/faults.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/policy.hpp"
#include "pmds/montage/structure.hpp"
#include "pmds/montage/transient_system.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

/// A hash map from 8-byte keys to 8-byte values (`HashMap`) or from byte strings to byte strings
/// (`ByteStringHashMap`), durable in epochs: Michael's lock-free hash table on nbMontage.
///
/// - **Criterion:** buffered durable linearizability: after a crash in epoch e the map holds
///   exactly the operations that linearized in epochs up to e-2, a consistent prefix of the
///   execution: a crash loses at most the last two epochs' operations, never reorders them (an
///   epoch is 10 ms by default: Options::epoch_length, advanced by a thread of the map's own
///   unless Options::background_thread is false). sync() returns once every operation completed
///   before it is durable (at most two epoch advances); the destructor (a clean close) syncs.
/// - **Cost:** contains and get never flush or fence (with 8-byte keys they read DRAM only). The
///   linearizing CAS of an update (insert, put, remove) issues no flush or fence: its blocks are
///   written back later, by its thread or by an epoch advance. A thread fences when its first
///   update in a newer epoch writes back its blocks of the previous one, when blocks it freed
///   come due for reuse, and once per 32 blocks when its write-back buffer fills.
/// - **Progress:** lock-free; sync() and an epoch advance are wait-free (the pool allocator's
///   slow paths, sharing free slots between threads and growing the pool, take a mutex:
///   pm/allocator.hpp).
/// - **Threads:** up to pmds::max_threads (128) threads at once; more throw TooManyThreads.
/// - **A full pool:** insert and put throw PoolFull when no block is left for the new payload,
///   remove and put of a present key when none is left for the anti-node that records the
///   removal; the map is then unchanged. contains and get need none.
/// - **Bad input:** `HashMap`: keys 0 and 2^64-1 throw ReservedKey in every operation; every
///   value is allowed. `ByteStringHashMap`: a key over max_key_size (1024 bytes) throws
///   pmds::Error in every operation, a value over max_value_size (7112 bytes) in insert and put;
///   any other bytes, the empty string included, are a key. Nothing changes.
/// - **A bad pool:** opening a pool that holds another structure throws PoolError
///   (layout_mismatch); a root that names no epoch system area, a bucket count outside [1, 2^29]
///   (algo/michael_hash.hpp's limit; create() throws PoolError bad_argument for one), or a payload
///   recovery would keep that is damaged (too small, a reserved key, sizes that do not fit its
///   block) throws PoolCorrupt, the payloads checked before recovery writes anything.
///
/// nbMontage (Appendix A's hash table, its update done as this header says).
/// Registered as "hash/montage" (`HashMap`: pmds::BufferedHashMap) and "hash-bytes/montage"
/// (`ByteStringHashMap`: pmds::BufferedStringHashMap); `TransientByteStringHashMap`
/// ("hash-bytes/transient") is the same table in DRAM, persisting nothing.
template <class Keys, FaultPolicy Faults = NoFaults>
class BasicHashMap : public Structure<algo::MichaelHashTable<MontagePolicy<Faults>, Keys>, Faults> {
  using Table = algo::MichaelHashTable<MontagePolicy<Faults>, Keys>;
  using Base = Structure<Table, Faults>;

 public:
  static constexpr std::uint64_t tag = Keys::byte_strings ? 0x424e4f4d48534148   // "HASHMONB"
                                                          : 0x544e4f4d48534148;  // "HASHMONT"
  static constexpr const char* name = Keys::byte_strings ? "hash-bytes/montage" : "hash/montage";
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;

  // A new, empty map with `bucket_count` buckets (at most Table::max_bucket_count) in `pool`,
  // which must hold no structure.
  BasicHashMap(CreateTag, pm::Pool& pool, std::size_t bucket_count = default_bucket_count,
               const Options& options = {})
      : Base(bucket_count) {
    this->create(pool, options, tag, name, bucket_count);
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4),
  // sorted by (bucket, key) over Options::recovery_threads threads and linked in one pass.
  BasicHashMap(OpenTag, pm::Pool& pool, const Options& options = {})
      : Base(stored_bucket_count(pool)) {
    const auto r = this->recover(pool, options, tag, name, &Keys::damaged);
    const auto bucket_of = [this](const typename Keys::Entry& e) {
      return this->index_of(Keys::hash(e));
    };
    this->adopt_in_bucket_order(this->template nodes_in_order<Keys>(
        r,
        [bucket_of](const typename Keys::Entry& a, const typename Keys::Entry& b) {
          const std::size_t ia = bucket_of(a), ib = bucket_of(b);
          return ia != ib ? ia < ib : Keys::less(a, b);
        },
        [this](const typename Keys::Entry& e) {
          return this->make_recovered_node(Keys::order(e), Keys::cached(e), e.payload);
        }));
  }

  // A clean close (montage/structure.hpp): sync, then the table frees the DRAM index.
  ~BasicHashMap() {
    if constexpr (Faults::planted != Fault::close_without_sync) this->sync();
  }

 private:
  // The bucket count the root holds, checked before it sizes the DRAM table (a damaged pool).
  static std::size_t stored_bucket_count(pm::Pool& pool) {
    const std::uint64_t n = StructureRoot::read(pool, tag, name).first;
    if (n == 0 || n > Table::max_bucket_count)
      throw PoolCorrupt(std::string("pmds: pool '") + pool.path() + "': " + name +
                        " with bucket count " + std::to_string(n));
    return static_cast<std::size_t>(n);
  }
};

// "hash/montage": 8-byte keys and values (pmds::UpdatableMap); its nodes keep the payload's uid
// (PayloadByUid, key_value_payload.hpp).
template <FaultPolicy Faults = NoFaults>
using HashMap = BasicHashMap<WordKeysByUid, Faults>;

// "hash-bytes/montage": byte-string keys and values (pmds::ByteStringMap), each key in a
// ByteStringPayload of the size its bytes need.
template <FaultPolicy Faults = NoFaults>
using ByteStringHashMap = BasicHashMap<HashedByteStringKeys, Faults>;

// "hash-bytes/transient": its twin in DRAM, the payloads on the heap (TransientSystem), so that
// the ratio of the two is nbMontage's cost alone.
class TransientByteStringHashMap
    : public algo::MichaelHashTable<MontagePolicy<NoFaults, TransientSystem>,
                                    HashedByteStringKeys> {
  using Base =
      algo::MichaelHashTable<MontagePolicy<NoFaults, TransientSystem>, HashedByteStringKeys>;

 public:
  static constexpr Criterion criterion = Criterion::none;
  static constexpr const char* name = "hash-bytes/transient";
  static constexpr std::size_t default_bucket_count = std::size_t{1} << 20;

  explicit TransientByteStringHashMap(std::size_t bucket_count = default_bucket_count)
      : Base(bucket_count) {
    mem_.open_transient_system();
  }

  // The payloads of the nodes still linked go back to the heap; the table then frees the nodes
  // (the removed ones' payloads went with them, Memory::retire).
  ~TransientByteStringHashMap() {
    mem_.drain();
    for (std::size_t i = 0; i < bucket_count(); ++i)
      for (Node* n = algo::pointer_of<Node>(bucket(i).peek()); n != nullptr;
           n = algo::pointer_of<Node>(n->next.peek()))
        mem_.discard_payload(n->payload);
  }

 private:
  using Base::mem_;
  using typename Base::Node;
};

}  // namespace pmds::montage
