// pmds — Michael's lock-free hash table (Michael, SPAA 2002), written once over a memory policy
// (algo/policy.hpp): a fixed number of buckets, given at construction, each a Harris–Michael
// list (algo/harris_michael_list.hpp's detail::HmBucket) on one head link. It takes a Keys
// (algo/keys.hpp): 8-byte keys and values by default; over a payload policy also byte strings
// (montage/key_value_payload.hpp's HashedByteStringKeys: a bucket by the key's hash, a chain in
// (hash, bytes) order), and a put by replacement (HmBucket::put).
//
// Layout: anchor {kind, bucket count, directory} -> directory of segment pointers -> segments
// of head links. Segments keep every allocation within one pool chunk (a million buckets are
// 8 MiB of links; a chunk is 1 MiB). The segment pointers never change after creation, so the
// table keeps a DRAM copy of them and an operation reads only its bucket's links through the
// policy.
//
// Durable policies: recovery visits the anchor, the directory, the segments and every node of
// every bucket; nothing else is rebuilt (the DRAM copy of the segment pointers is re-read).
// A payload policy's index is DRAM and rebuilt from the payloads at open (nbMontage §3.4:
// make_recovered_node, adopt_in_bucket_order); its head links lie in one array on huge pages
// (huge_pages.hpp: 2^20 buckets are 8 MiB read at random, a TLB miss per bucket on 4 KiB pages).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/harris_michael_list.hpp"
#include "pmds/algo/keys.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/bucket_index.hpp"
#include "pmds/error.hpp"
#include "pmds/huge_pages.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P, class Keys = WordKeys>
requires MemoryPolicy<P> && KeysUnder<Keys, P>
class MichaelHashTable : public AnchoredStructure<P> {
 protected:
  using AnchoredStructure<P>::mem_;
  using Bucket = detail::HmBucket<P, Keys>;
  using Node = typename Bucket::Node;
  using Link = typename Bucket::Link;
  using Probe = typename Keys::Probe;

 public:
  static constexpr const char* name = "hash";
  static constexpr std::uint64_t kind = 0x706d64732e687368;  // "pmds.hsh"
  // Head links per segment: 32 KiB of 8-byte links.
  static constexpr std::size_t segment_buckets = 4096;
  static constexpr std::size_t default_bucket_count = 1024;
  // The directory must fit in one pool chunk (1 MiB of pointers: 2^29 buckets).
  static constexpr std::size_t max_bucket_count = std::size_t{1} << 29;
  static constexpr std::size_t max_key_size = Keys::max_key_size;
  static constexpr std::size_t max_value_size = Keys::max_value_size;

  using KeyArg = typename Keys::KeyArg;
  using ValueArg = typename Keys::ValueArg;
  using ValueOut = typename Keys::ValueOut;

  explicit MichaelHashTable(std::size_t bucket_count = default_bucket_count) requires(!P::durable) {
    create(bucket_count);
  }
  MichaelHashTable(CreateTag, pm::Pool& pool,
                   std::size_t bucket_count = default_bucket_count) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create(bucket_count);
  }
  MichaelHashTable(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~MichaelHashTable() {
    if constexpr (!P::durable) {
      for (std::size_t i = 0; i < bucket_count_; ++i) Bucket::free_all(mem_, bucket(i));
      if constexpr (!links_in_chunk)
        for (Link* segment : segments_) mem_.deallocate(segment);
      mem_.deallocate(pointer_of<void>(anchor_->directory.peek()));
      mem_.deallocate(anchor_);
    }
  }

  // False if the key was present. Throws PoolFull (the table unchanged) when no slot is left.
  bool insert(KeyArg k, ValueArg v) {
    const Probe key = Keys::probe(k);  // ReservedKey, or a key too long
    Keys::check_value(v);
    auto guard = mem_.pin();
    return Bucket::insert(mem_, bucket_of(key), key, k, v);
  }
  // Insert or replace, over a payload policy: true if the key was absent (HmBucket::put).
  bool put(KeyArg k, ValueArg v) requires HasPayloads<P> {
    const Probe key = Keys::probe(k);
    Keys::check_value(v);
    auto guard = mem_.pin();
    return Bucket::put(mem_, bucket_of(key), key, k, v);
  }
  bool remove(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    return Bucket::remove(mem_, bucket_of(key), key);
  }
  bool contains(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    return Bucket::search(bucket_of(key), key) != nullptr;
  }
  std::optional<ValueOut> get(KeyArg k) {
    const Probe key = Keys::probe(k);
    auto guard = mem_.pin();
    const Node* n = Bucket::search(bucket_of(key), key);
    if (n == nullptr) return std::nullopt;
    return node_value<Keys>(n);
  }

  std::size_t bucket_count() const { return bucket_count_; }

  // Quiescent: f(key, value) for every key (bucket by bucket, each in key order).
  template <class F>
  void for_each(F&& f) const {
    for (std::size_t i = 0; i < bucket_count_; ++i) Bucket::for_each(bucket(i), f);
  }
  std::size_t size() const {
    std::size_t n = 0;
    for_each([&](const auto&, const auto&) { ++n; });
    return n;
  }
  // Slots other than nodes: anchor, directory, segments (for tests' slot accounting).
  std::size_t overhead_slots() const { return 2 + segments_.size(); }

 protected:
  // Over a payload policy, for a structure that rebuilds the table from its payloads at open
  // (nbMontage §3.4): a node for a payload that survived, and adopt_in_bucket_order(nodes),
  // which links nodes sorted by (bucket, key), one per key, into their buckets. Quiescent, on a
  // table just created. Sorted by bucket, the head links are written in array order.
  Node* make_recovered_node(Key order, typename Keys::Cached cached,
                            node_payload_pointer_t<P, Keys> payload) requires HasPayloads<P> {
    Node* n = new (mem_.allocate(sizeof(Node))) Node;
    n->key.init(order);
    n->value.init(cached);
    n->next.init(0);
    n->payload = payload;
    return n;
  }
  void adopt_in_bucket_order(const std::vector<Node*>& nodes) requires HasPayloads<P> {
    Link* last = nullptr;  // the link the next node of the same bucket goes in
    std::size_t last_bucket = bucket_count_;
    for (Node* n : nodes) {
      const std::size_t b = index_of(n->key.peek());
      (b == last_bucket ? *last : bucket(b)).init(word_of(n));
      last = &n->next;
      last_bucket = b;
    }
  }
  // The bucket of a key word (the key; hashed byte strings: the hash).
  std::size_t index_of(Key order) const { return index_(order); }
  Link& bucket(std::size_t i) const {
    if constexpr (links_in_chunk)
      return links_[i];  // one load less than through the segment's pointer
    else
      return segments_[i / segment_buckets][i % segment_buckets];
  }

 private:
  // A payload policy's head links are DRAM, in one array on huge pages (the header).
  static constexpr bool links_in_chunk = HasPayloads<P>;
  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template immutable<std::uint64_t> bucket_count;
    typename P::template immutable<std::uintptr_t> directory;  // -> Link[segment count]
  };

  // The same key-to-bucket mapping as the hash sets of Zuriel et al. (bucket_index.hpp), so that
  // hash/transient is a fair twin of hash/linkfree and hash/soft.
  Link& bucket_of(const Probe& key) const { return bucket(index_of(key.order)); }

  std::size_t segment_size(std::size_t s) const {
    const std::size_t first = s * segment_buckets;
    return std::min(segment_buckets, bucket_count_ - first);
  }

  void create(std::size_t bucket_count) {
    if (bucket_count == 0 || bucket_count > max_bucket_count)
      throw PoolError(PoolErrc::bad_argument, "pmds: hash table bucket count " +
                                                  std::to_string(bucket_count) +
                                                  " is out of range [1, 2^29]");
    bucket_count_ = bucket_count;
    index_ = BucketIndex(bucket_count);
    const std::size_t segment_count = (bucket_count + segment_buckets - 1) / segment_buckets;
    auto* directory = static_cast<Link*>(mem_.allocate(segment_count * sizeof(Link)));
    if constexpr (links_in_chunk) links_ = make_chunk_array<Link>(bucket_count);  // zeroed
    for (std::size_t s = 0; s < segment_count; ++s) {
      const std::size_t n = segment_size(s);
      Link* segment;
      if constexpr (links_in_chunk) {
        segment = &links_[s * segment_buckets];
      } else {
        segment = static_cast<Link*>(mem_.allocate(n * sizeof(Link)));
        for (std::size_t i = 0; i < n; ++i) {
          new (&segment[i]) Link;
          segment[i].init(0);
        }
        mem_.publish(segment, n * sizeof(Link));
      }
      segments_.push_back(segment);
      new (&directory[s]) Link;
      directory[s].init(word_of(segment));
    }
    mem_.publish(directory, segment_count * sizeof(Link));
    anchor_ = this->template create_anchor<Anchor>(kind, [&](Anchor& a) {
      a.bucket_count.init(bucket_count);
      a.directory.init(word_of(directory));
    });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "Michael hash table");
    bucket_count_ = anchor_->bucket_count.peek();
    // Checked before use: it sizes the directory and segments read next (a damaged pool).
    if (bucket_count_ == 0 || bucket_count_ > (std::size_t{1} << 29))
      trace.corrupt("bucket count " + std::to_string(bucket_count_) + " is out of range [1, 2^29]");
    index_ = BucketIndex(bucket_count_);
    const std::size_t segment_count = (bucket_count_ + segment_buckets - 1) / segment_buckets;
    auto* directory = pointer_of<Link>(anchor_->directory.peek());
    trace.visit_once(directory, segment_count * sizeof(Link));
    for (std::size_t s = 0; s < segment_count; ++s) {
      auto* segment = pointer_of<Link>(directory[s].peek());
      trace.visit_once(segment, segment_size(s) * sizeof(Link));
      segments_.push_back(segment);
    }
    if constexpr (P::planted == Fault::recovery_drops_node) {
      for (std::size_t i = 0; i < bucket_count_; ++i)
        if (Bucket::drop_first_node(bucket(i))) break;
    }
    for (std::size_t i = 0; i < bucket_count_; ++i) Bucket::trace(trace, bucket(i));
    trace.finish();
  }

  Anchor* anchor_ = nullptr;
  std::size_t bucket_count_ = 0;
  BucketIndex index_;
  std::vector<Link*> segments_;  // DRAM copy of the directory (immutable after creation)
  [[no_unique_address]] std::conditional_t<links_in_chunk, ChunkArray<Link>, NoPayload> links_;
};

}  // namespace pmds::algo
