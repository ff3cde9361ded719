// pmds — the key-to-bucket mapping every hash table in pmds uses.
//
// One mapping for all of them, so that a durable hash table and its transient or Izraelevitz
// twin differ only in technique: with different mappings a benchmark compares hash functions
// (a direct-mapped table against one with collisions) instead. The mapping is Zuriel et al.'s
// (§6, after ASCYLIB): the low bits of the key for a power-of-two table, the remainder
// otherwise. Uniformly drawn keys spread evenly; adversarial key sets crowd buckets.
#pragma once

#include <cstddef>
#include <cstdint>

#include "pmds/interfaces.hpp"

namespace pmds {

class BucketIndex {
 public:
  BucketIndex() = default;
  explicit BucketIndex(std::size_t bucket_count)
      : count_(bucket_count),
        mask_((bucket_count & (bucket_count - 1)) == 0 ? bucket_count - 1 : 0) {}

  std::size_t operator()(Key k) const {
    return mask_ != 0 ? static_cast<std::size_t>(k & mask_) : static_cast<std::size_t>(k % count_);
  }
  std::size_t bucket_count() const { return count_; }

 private:
  std::size_t count_ = 1;
  std::uint64_t mask_ = 0;
};

}  // namespace pmds
