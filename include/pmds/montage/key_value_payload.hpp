// The persistent part of one key of an nbMontage map (Payload, Figure 7 of its paper), in the
// forms a montage/ map is written over (its Keys parameter):
//   WordKeys              8-byte keys and values (pmds::Map): a 64-byte KeyValuePayload;
//   ByteStringKeys        byte-string keys and values (pmds::ByteStringMap, nbMontage §5's
//                         32-byte keys and 1 KB values) in byte order, for the skip list: a
//                         ByteStringPayload of the size its bytes need;
//   HashedByteStringKeys  the same payload, for the hash table, whose chains need no byte order.
// Every montage/ map stores its keys in these, and reads them back the same way when it rebuilds
// its index at recovery (sorted_entries). An algorithm is written once over Keys: a DRAM node
// keeps an `order` word and Keys::Cached; two keys compare by order, then, on equal orders, by
// Keys::tie (compare() below). For words the order is the key and Cached its value, so reads
// touch DRAM only. For byte strings the value stays in the payload (a 1 KB value is not copied
// to DRAM; reads go to the pool, as nbMontage's maps do), and the order is, in byte order, the
// two words of the key's ByteKeyOrder (its first 15 bytes and its length: byte_key_order.hpp;
// the second is Cached), so that only keys that share their first 15 bytes are compared in the
// pool; hashed, the key's 64-bit hash, so that only keys of equal hashes are.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "pmds/algo/keys.hpp"
#include "pmds/byte_key_order.hpp"
#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/montage/parallel.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"

namespace pmds::montage {

// ---- 8-byte keys and values -------------------------------------------------------------------

// Never changes once its operation's lin_cas linked it (nbMontage §3.2).
struct KeyValuePayload : Block {
  pm::atomic<Key> key;
  pm::atomic<Value> value;
};
static_assert(sizeof(KeyValuePayload) == 64);

// One recovered key: its key and value read from the payload once, so that sorting and building
// the index do not go back to the pool.
struct KeyValueEntry {
  Key key;
  Value value;
  KeyValuePayload* payload;
};

// By key: the order of the ordered maps.
inline bool key_less(const KeyValueEntry& a, const KeyValueEntry& b) {
  return a.key < b.key;
}

// algo::WordKeys (algo/keys.hpp: the key's word orders nodes, Cached is the value), with the
// payload and recovery members the montage/ maps use.
struct WordKeys : algo::WordKeys {
  using Payload = KeyValuePayload;
  using Entry = KeyValueEntry;

  static std::uint64_t hash(const Probe& p) { return p.order; }  // BucketIndex takes low bits
  static int tie(const Cached&, const Payload*, const Probe&) { return 0; }  // equal keys

  template <class System>
  static Payload* make_payload(System& system, Key k, Value v) {
    Payload* p = system.template pnew<Payload>();  // PoolFull: nothing changed
    p->key.store(k, std::memory_order_relaxed);
    p->value.store(v, std::memory_order_relaxed);
    return p;
  }
  static Cached cached(const Probe&, Value v) { return v; }
  static ValueOut value(const Cached& c, const Payload*) { return c; }
  // f(key, value) of a node.
  template <class F>
  static void visit(std::uint64_t order, const Cached& c, const Payload*, F& f) {
    f(Key{order}, Value{c});
  }

  // What is wrong with a payload recovery keeps (EpochSystem::recover's check), or nullptr.
  static const char* damaged(const Block* b) {
    if (b->kind_size.load() >> 8 < sizeof(Payload)) return "montage: a payload too small";
    if (is_reserved_key(static_cast<const Payload*>(b)->key.load()))
      return "montage: a payload with a reserved key";
    return nullptr;
  }
  // A payload recovery kept (damaged() found nothing), as an entry.
  static Entry entry(Block* b) {
    auto* p = static_cast<Payload*>(b);
    return {p->key.load(), p->value.load(), p};
  }
  static std::uint64_t order(const Entry& e) { return e.key; }
  static std::uint64_t hash(const Entry& e) { return e.key; }
  static Cached cached(const Entry& e) { return e.value; }
  static bool less(const Entry& a, const Entry& b) { return a.key < b.key; }
  static bool same_key(const Entry& a, const Entry& b) { return a.key == b.key; }
};

// A node's handle of its KeyValuePayload (a Keys's Handle, algo/keys.hpp): the pointer, and the
// payload's uid and then, once its removal committed, that remove's anti-node (anti_tag | the
// pointer), so that a remove touches no line of the payload (MontagePolicy::Memory's overloads
// for it: detach by the uid, the anti-node kept here and passed to pdelete). The 8-byte hash
// map's nodes hold copies of key and value, so nothing else of a remove reads the payload, whose
// line, written back at its epoch's end, is cold (clwb evicts it on some hosts). Measured at
// 2:1:1 over 1M keys (pmds bench hash/montage, alternating rounds of the two builds): the uid
// copy 1.06x (6 rounds); the anti-node here rather than stored in the payload at the commit,
// 1.11x at 1 thread and 1.13x at 2 (12 rounds). One word serves both, so a node is no larger
// than with the uid alone: a removal commits only by a lin_cas that marks the node's next word,
// and marks are never undone, so once the anti-node is in the word every lin_cas that would
// detach the node again must fail; detach sees the tag and returns false instead.
struct PayloadByUid {
  static constexpr std::uint64_t anti_tag = std::uint64_t{1} << 63;
  static_assert(pmds::max_threads <= (std::uint64_t{1} << 15),
                "uids ((tid << 48) | n) keep bit 63 clear");

  KeyValuePayload* block = nullptr;
  std::atomic<std::uint64_t> uid_or_anti{0};

  // A node being built takes its payload: the uid is read now, while the line is in the cache.
  PayloadByUid& operator=(KeyValuePayload* p) noexcept {
    block = p;
    uid_or_anti.store(p != nullptr ? EpochSystem<>::uid_of(p) : 0, std::memory_order_relaxed);
    return *this;
  }
  // The anti-node of a committed removal (nullptr: none). Relaxed: pdelete reads it after the
  // reclamation's grace period, which orders it.
  Block* committed_anti() const noexcept {
    const std::uint64_t w = uid_or_anti.load(std::memory_order_relaxed);
    return (w & anti_tag) != 0 ? reinterpret_cast<Block*>(w & ~anti_tag) : nullptr;
  }
};

// 8-byte keys and values whose nodes keep a PayloadByUid: the hash map's (a skip list or a tree
// keeps the pointer alone).
struct WordKeysByUid : WordKeys {
  using Handle = PayloadByUid;
};

// ---- byte-string keys and values --------------------------------------------------------------

// Never changes once linked (nbMontage §3.2). The key's bytes, then the value's, follow the
// header to the end of the block.
struct ByteStringPayload : Block {
  pm::atomic<std::uint64_t> sizes;  // key bytes | value bytes << 32

  unsigned char* bytes() { return reinterpret_cast<unsigned char*>(this + 1); }
  const unsigned char* bytes() const { return reinterpret_cast<const unsigned char*>(this + 1); }
};
static_assert(sizeof(ByteStringPayload) == 56);

struct ByteStringEntry {
  std::uint64_t order, order_tail;  // ByteKeyOrder's head and tail; hashed: the hash, 0
  std::string key;
  ByteStringPayload* payload;
};

template <bool InByteOrder>
struct BasicByteStringKeys {
  static constexpr bool byte_strings = true;
  using KeyArg = std::string_view;
  using ValueArg = std::string_view;
  using KeyOut = std::string;
  using ValueOut = std::string;
  using Payload = ByteStringPayload;
  using Entry = ByteStringEntry;
  // The value stays in the payload; in byte order a node keeps the second word of its key's
  // order.
  struct OrderTail {
    std::uint64_t order_tail;  // ByteKeyOrder::tail
  };
  struct Nothing {};
  using Cached = std::conditional_t<InByteOrder, OrderTail, Nothing>;
  struct Probe {
    std::uint64_t order;       // ByteKeyOrder::head; hashed: the hash
    std::uint64_t order_tail;  // ByteKeyOrder::tail; hashed: 0
    std::string_view key;
  };

  // A payload block is at most 8 KiB (pm::ChunkAllocator::block_size says why), so keys are at most
  // 1 KiB and values at most what is left of the block.
  static constexpr std::size_t max_payload_size = 8192;
  static constexpr std::size_t max_key_size = 1024;
  static constexpr std::size_t max_value_size =
      max_payload_size - sizeof(Payload) - max_key_size;  // 7112

  static Probe probe(std::string_view k) {
    if (k.size() > max_key_size)
      throw Error("pmds: montage maps take keys of at most " + std::to_string(max_key_size) +
                  " bytes; this one has " + std::to_string(k.size()));
    if constexpr (InByteOrder) {
      const ByteKeyOrder o = ByteKeyOrder::of(k);
      return {o.head, o.tail, k};
    } else {
      return {std::hash<std::string_view>{}(k), 0, k};
    }
  }
  static void check_value(std::string_view v) {
    if (v.size() > max_value_size)
      throw Error("pmds: montage maps take values of at most " + std::to_string(max_value_size) +
                  " bytes; this one has " + std::to_string(v.size()));
  }
  // The hash table's bucket; only the hashed keys have one (a skip list never asks).
  static std::uint64_t hash(const Probe& p) requires(!InByteOrder) { return p.order; }

  static std::size_t key_size(const Payload* p) { return p->sizes.load() & 0xffffffff; }
  static std::size_t value_size(const Payload* p) { return p->sizes.load() >> 32; }

  // For equal orders, the sign of (the node's key - the probe's key): in byte order the second
  // word decides, else the bytes from ByteKeyOrder::covered on, read from the payload; hashed,
  // the bytes (equal hashes: almost always the same key).
  static int tie(const Cached& c, const Payload* p, const Probe& q) {
    std::size_t from = 0;
    if constexpr (InByteOrder) {
      if (c.order_tail != q.order_tail) return c.order_tail < q.order_tail ? -1 : 1;
      if (!ByteKeyOrder::bytes_decide(c.order_tail)) return 0;
      from = ByteKeyOrder::covered;  // both keys have at least these bytes, equal
    }
    char rest[max_key_size];
    const std::size_t n = key_size(p) - from;
    pm::read(rest, p->bytes() + from, n);
    const int r = std::string_view(rest, n).compare(q.key.substr(from));
    return (r > 0) - (r < 0);
  }

  template <class System>
  static Payload* make_payload(System& system, std::string_view k, std::string_view v) {
    Payload* p = system.template pnew<Payload>(
        pm::ChunkAllocator::block_size(sizeof(Payload) + k.size() + v.size()));
    p->sizes.store(k.size() | std::uint64_t{v.size()} << 32, std::memory_order_relaxed);
    if (!k.empty()) pm::write(p->bytes(), k.data(), k.size());
    if (!v.empty()) pm::write(p->bytes() + k.size(), v.data(), v.size());
    return p;
  }
  static Cached cached(const Probe& q, std::string_view) {
    if constexpr (InByteOrder)
      return {q.order_tail};
    else
      return {};
  }
  static ValueOut value(const Cached&, const Payload* p) {
    return pm::read_string(p->bytes() + key_size(p), value_size(p));
  }
  template <class F>
  static void visit(std::uint64_t, const Cached&, const Payload* p, F& f) {
    const std::string key = pm::read_string(p->bytes(), key_size(p));
    const std::string value = BasicByteStringKeys::value({}, p);
    f(std::string_view(key), std::string_view(value));
  }

  static const char* damaged(const Block* b) {
    const auto* p = static_cast<const Payload*>(b);
    if (b->kind_size.load() >> 8 < sizeof(Payload)) return "montage: a payload too small";
    const std::size_t ks = key_size(p), vs = value_size(p);
    if (ks > max_key_size || vs > max_value_size ||
        (b->kind_size.load() >> 8) < sizeof(Payload) + ks + vs)
      return "montage: a payload whose key and value do not fit its block";
    return nullptr;
  }
  static Entry entry(Block* b) {
    auto* p = static_cast<Payload*>(b);
    const std::size_t ks = key_size(p);
    std::string key = pm::read_string(p->bytes(), ks);
    if constexpr (InByteOrder) {
      const ByteKeyOrder o = ByteKeyOrder::of(key);
      return {o.head, o.tail, std::move(key), p};
    } else {
      const std::uint64_t hash = std::hash<std::string_view>{}(key);
      return {hash, 0, std::move(key), p};
    }
  }
  static std::uint64_t order(const Entry& e) { return e.order; }
  static std::uint64_t hash(const Entry& e) requires(!InByteOrder) { return e.order; }
  static Cached cached(const Entry& e) {
    if constexpr (InByteOrder)
      return {e.order_tail};
    else
      return {};
  }
  static bool less(const Entry& a, const Entry& b) {
    return a.order != b.order ? a.order < b.order : a.key < b.key;
  }
  static bool same_key(const Entry& a, const Entry& b) {
    return a.order == b.order && a.key == b.key;
  }
};
using ByteStringKeys = BasicByteStringKeys<true>;
using HashedByteStringKeys = BasicByteStringKeys<false>;

// The sign of (a node's key - the probe's key): by order, then by Keys::tie.
template <class Keys>
int compare(std::uint64_t order, const typename Keys::Cached& cached,
            const typename Keys::Payload* payload, const typename Keys::Probe& probe) {
  if (order != probe.order) return order < probe.order ? -1 : 1;
  return Keys::tie(cached, payload, probe);
}

// The payloads recovery kept (in address order: the pool is read sequentially; checked by
// Keys::damaged), as entries sorted by `less`, over `threads` threads (parallel.hpp).
template <class Keys = WordKeys, class Less>
std::vector<typename Keys::Entry> sorted_entries(const std::vector<Block*>& blocks,
                                                 std::size_t threads, Less less) {
  std::vector<typename Keys::Entry> out(blocks.size());
  in_parallel(threads, blocks.size(), [&](std::size_t first, std::size_t last) {
    for (std::size_t i = first; i < last; ++i) out[i] = Keys::entry(blocks[i]);
  });
  parallel_sort(out, less, threads);
  return out;
}

}  // namespace pmds::montage
