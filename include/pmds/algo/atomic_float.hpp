// pmds — AtomicFloat (Fatourou et al.'s register object), written once over a memory policy
// (algo/policy.hpp).
//
// One shared 8-byte word holds the bit pattern of a double. read() is one shared load;
// fetch_multiply(x) loads the word and CASes in the product until the CAS succeeds (its
// linearization point) and returns the value it replaced. The word holds a plain value, never
// a pointer, so the CAS has no ABA problem and nothing is ever retired.
//
// Durable policies: the anchor {kind, bits} is the root and the only slot the structure owns;
// recovery visits it and nothing else. Under the Izraelevitz policy every load and CAS of
// `bits` is flushed and fenced, so a fetch_multiply that returned is durable and a read never
// returns a product a crash could still take back: durable linearizability by the transform.
// No operation pins an epoch: the register never allocates or retires after creation, so there
// is nothing for reclamation to protect. The CAS is Access::plain (it links no node), so the link
// planted bugs (a) and (b) do not act here, and (d) has no node to drop.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "pmds/algo/anchored_structure.hpp"
#include "pmds/algo/policy.hpp"
#include "pmds/interfaces.hpp"

namespace pmds::algo {

template <class P>
requires MemoryPolicy<P>
class AtomicFloat : public AnchoredStructure<P> {
  using AnchoredStructure<P>::mem_;

 public:
  static constexpr const char* name = "register";
  static constexpr std::uint64_t kind = 0x706d64732e666c74;  // "pmds.flt"
  // The value a new register holds (the crash lab records it with a first read).
  static constexpr double default_initial = 1.0;

  explicit AtomicFloat(double initial = default_initial) requires(!P::durable) { create(initial); }
  AtomicFloat(CreateTag, pm::Pool& pool, double initial = default_initial) requires(P::durable)
      : AnchoredStructure<P>(create_new, pool) {
    create(initial);
  }
  AtomicFloat(OpenTag, pm::Pool& pool) requires(P::durable)
      : AnchoredStructure<P>(open_existing, pool) {
    open_and_recover();
  }

  ~AtomicFloat() {
    if constexpr (!P::durable) mem_.deallocate(anchor_);
  }

  double read() const { return std::bit_cast<double>(anchor_->bits.load()); }

  // Returns the value before. A failed CAS leaves the current bits in `seen`, so each retry
  // multiplies the value another thread just installed: no update is lost.
  double fetch_multiply(double factor) {
    // Mutant survives: the value read only feeds the CAS on the same word below, which persists
    // it whether it succeeds or fails, before the call returns.
    std::uint64_t seen = anchor_->bits.load();
    while (!anchor_->bits.compare_exchange(
        seen, std::bit_cast<std::uint64_t>(std::bit_cast<double>(seen) * factor))) {
    }
    return std::bit_cast<double>(seen);
  }

  // Quiescent read (recovery, tests): no flush.
  double peek() const { return std::bit_cast<double>(anchor_->bits.peek()); }

 private:
  struct Anchor {
    typename P::template immutable<std::uint64_t> kind;
    typename P::template shared<std::uint64_t> bits;
  };

  void create(double initial) {
    // The initial value is durable before the root (create_anchor publishes the anchor).
    anchor_ = this->template create_anchor<Anchor>(
        kind, [&](Anchor& a) { a.bits.init(std::bit_cast<std::uint64_t>(initial)); });
  }

  void open_and_recover() requires(P::durable) {
    auto trace = this->open_anchor(anchor_, kind, "AtomicFloat register");
    trace.finish();
  }

  Anchor* anchor_ = nullptr;
};

}  // namespace pmds::algo
