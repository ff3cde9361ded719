// pmds — Fatourou et al.'s AtomicFloat on a combining protocol (§6, the synthetic benchmark): a
// shared double that fetch_multiply(k) replaces by v·k, returning v. The state is the double's 8
// bytes; read() is a request too (served in a round like any other), so it needs no other
// synchronisation and is detectable like an update. Written once over the protocol (PBComb or
// PWFComb) and the persistence:
//
//   CombiningAtomicFloat<PBComb, Persistence::none>        register/pbcomb-transient (Figure 8)
//   CombiningAtomicFloat<PBComb, Persistence::durable>     register/pbcomb-durable (null recovery)
//   CombiningAtomicFloat<PBComb, Persistence::detectable>  register/pbcomb
//   and the same three with PWFComb: register/pwfcomb, -durable, -transient
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pmds/combining/protocol.hpp"
#include "pmds/combining/structure.hpp"

namespace pmds::combining {

template <template <class, Persistence, FaultPolicy> class Protocol, Persistence Mode,
          FaultPolicy Faults = NoFaults>
class CombiningAtomicFloat : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;

 public:
  static constexpr const char* name = "register";
  static constexpr double default_initial = 1.0;

  enum class Op : std::uint64_t { read = 1, fetch_multiply = 2 };
  struct Sequential {
    struct Request {
      Op op;
      double factor;
    };
    struct Response {
      double value;  // the value before
    };
    std::size_t state_words() const { return 1; }  // the double's bits
    Response apply(std::uint64_t* state, const Request& r) noexcept {
      const double before = std::bit_cast<double>(state[0]);
      if (r.op == Op::fetch_multiply) state[0] = std::bit_cast<std::uint64_t>(before * r.factor);
      return {before};
    }
  };
  using Comb = Protocol<Sequential, Mode, Faults>;
  static constexpr std::uint64_t kind = kind_word('r', Comb::kind_letter);  // "pmds.r2f/w"
  using Response = typename Sequential::Response;

  explicit CombiningAtomicFloat(double initial = default_initial,
                                std::size_t slots = default_slots) requires(Mode ==
                                                                            Persistence::none)
      : Base(slots) {
    create(initial);
  }
  CombiningAtomicFloat(CreateTag, pm::Pool& pool, double initial = default_initial,
                       std::size_t slots = default_slots) requires(Mode != Persistence::none)
      : Base(pool, slots, create_new) {
    create(initial);
  }
  CombiningAtomicFloat(OpenTag, pm::Pool& pool) requires(Mode != Persistence::none)
      : Base(pool, open_existing) {
    auto trace = this->open_anchor(kind, &anchor_bytes, 1, 0, "combining AtomicFloat register");
    comb_.emplace(object_, area(), this->slots(), open_existing, trace);
    trace.finish();
  }

  double read() { return comb_->perform({Op::read, 1.0}).value; }
  double fetch_multiply(double factor) {
    return comb_->perform({Op::fetch_multiply, factor}).value;
  }
  double read(Ticket t) { return comb_->perform(t, {Op::read, 1.0}).value; }
  double fetch_multiply(double factor, Ticket t) {
    return comb_->perform(t, {Op::fetch_multiply, factor}).value;
  }

  Ticket next_ticket(std::size_t slot) const { return comb_->next_ticket(slot); }
  Outcome<double> recover_pending(Ticket t) const requires(Mode == Persistence::detectable) {
    const auto o = comb_->recover_pending(t);
    return {o.took_effect, o.response.value};
  }

  // Quiescent read (recovery, tests).
  double peek() const { return std::bit_cast<double>(comb_->state_word(0)); }

 private:
  static std::size_t anchor_bytes(std::size_t slots, std::uint64_t) {
    return Base::header_bytes + Comb::area_bytes(slots, 1);
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create(double initial) {
    this->create_anchor(kind, anchor_bytes(this->slots(), 0), 1);
    const std::uint64_t state = std::bit_cast<std::uint64_t>(initial);
    comb_.emplace(object_, area(), this->slots(), &state, create_new);
    this->publish_anchor();
  }

  Sequential object_;
  std::optional<Comb> comb_;
};

}  // namespace pmds::combining
