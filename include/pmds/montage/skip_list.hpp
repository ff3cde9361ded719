// pmds::montage::SkipList — a lock-free skip list on nbMontage (the skip list of its paper's §5):
// "skiplist/montage", an ordered map with scan, buffered durable linearizability, with sync();
// and ByteStringSkipList, "skiplist-bytes/montage", the same list over byte-string keys and
// values in byte order (pmds::ByteStringMap), and its transient twin
// "skiplist-bytes/transient" (TransientByteStringSkipList).
//
// Both are algo/skip_list.hpp's list (Herlihy & Shavit §14.4, after Fraser; its header explains
// the algorithm, the two-owner reclamation of a node and what it does for nbMontage) over
// MontagePolicy (montage/policy.hpp), as the BST is: the index in DRAM, each node pointing to its
// payload, which never changes once linked (§3.2). SkipList's nodes keep copies of the key and
// value so that reads touch DRAM only. ByteStringSkipList's keep the key's first 15 bytes and
// length in two order words (ByteStringKeys, key_value_payload.hpp) and compare the rest in the
// payload, where the value stays (a 1 KB value is not copied to DRAM). What this file adds around
// the list (the pool's root, the epoch system and sync are montage/structure.hpp's): recovery, the
// list rebuilt from the payloads that survive (§3.4), and the clean close; and the transient twin,
// the same list over MontagePolicy<NoFaults, TransientSystem>.
//
// The CASes at which an update takes effect are the level-0 ones, done by lin_cas
// (epoch_system.hpp): an insert's level-0 link, a put's replacing CAS and a remove's level-0 mark,
// each after the pdetach of the payload it removes. Every other CAS (upper levels, unlinking)
// changes no payload. Reads never flush or fence.
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "SKIPMONT" ("SKIPMONB" for byte
// strings); payload and anti-node blocks from the allocator. The payloads are as they were when
// each list had its own copy of the algorithm (a pool written by either build opens in the other).
#pragma once

#include <cstdint>

#include "pmds/algo/skip_list.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/key_value_payload.hpp"
#include "pmds/montage/policy.hpp"
#include "pmds/montage/structure.hpp"
#include "pmds/montage/transient_system.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

// The durable lists over Keys (key_value_payload.hpp): WordKeys, "skiplist/montage", or
// ByteStringKeys, "skiplist-bytes/montage". Use SkipList or ByteStringSkipList.
template <class Keys, FaultPolicy Faults = NoFaults>
class BasicSkipList : public Structure<algo::SkipList<MontagePolicy<Faults>, Keys>, Faults> {
 public:
  static constexpr std::uint64_t tag = Keys::byte_strings ? 0x424e4f4d50494b53   // "SKIPMONB"
                                                          : 0x544e4f4d50494b53;  // "SKIPMONT"
  static constexpr const char* name =
      Keys::byte_strings ? "skiplist-bytes/montage" : "skiplist/montage";

  // A new, empty map in `pool`, which must hold no structure.
  BasicSkipList(CreateTag, pm::Pool& pool, const Options& options = {}) {
    this->create(pool, options, tag, name);
  }

  // Opens the map a pool holds: the index is rebuilt from the payloads recovery keeps (§3.4),
  // each node of a fresh random height (montage/structure.hpp, nodes_in_key_order), linked in
  // one pass.
  BasicSkipList(OpenTag, pm::Pool& pool, const Options& options = {}) {
    const auto r = this->recover(pool, options, tag, name, &Keys::damaged);
    this->adopt_in_order(
        this->template nodes_in_key_order<Keys>(r, [this](const typename Keys::Entry& e) {
          return this->make_recovered_node(Keys::order(e), Keys::cached(e), e.payload);
        }));
  }

  // A clean close (montage/structure.hpp): sync, then the algorithm frees the DRAM index.
  ~BasicSkipList() { this->sync(); }
};

// "skiplist/montage": 8-byte keys and values.
template <FaultPolicy Faults = NoFaults>
using SkipList = BasicSkipList<WordKeys, Faults>;

// "skiplist-bytes/montage": byte-string keys and values (pmds::ByteStringMap), in byte order: a
// node keeps the key's two order words and compares the rest in the payload.
template <FaultPolicy Faults = NoFaults>
using ByteStringSkipList = BasicSkipList<ByteStringKeys, Faults>;

// "skiplist-bytes/transient": its twin in DRAM, the payloads on the heap (TransientSystem), so
// that the ratio of the two is nbMontage's cost alone.
class TransientByteStringSkipList
    : public algo::SkipList<MontagePolicy<NoFaults, TransientSystem>, ByteStringKeys> {
  using Base = algo::SkipList<MontagePolicy<NoFaults, TransientSystem>, ByteStringKeys>;

 public:
  static constexpr Criterion criterion = Criterion::none;
  static constexpr const char* name = "skiplist-bytes/transient";

  TransientByteStringSkipList() { mem_.open_transient_system(); }
  TransientByteStringSkipList(const TransientByteStringSkipList&) = delete;
  TransientByteStringSkipList& operator=(const TransientByteStringSkipList&) = delete;

  // The payloads of the nodes still linked go back to the heap; the algorithm then frees the
  // nodes (the removed ones' payloads went with them, Memory::retire).
  ~TransientByteStringSkipList() {
    mem_.drain();
    for (Node* n = algo::pointer_of<Node>(head_->next(0).peek()); n != nullptr;
         n = algo::pointer_of<Node>(n->next(0).peek()))
      mem_.discard_payload(n->payload);
  }

 private:
  using Base::head_;
  using Base::mem_;
  using typename Base::Node;
};

}  // namespace pmds::montage
