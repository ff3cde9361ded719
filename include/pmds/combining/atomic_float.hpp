// pmds — seed 004's AtomicFloat on PBcomb (§6, the synthetic benchmark): a shared double that
// fetch_multiply(k) replaces by v·k, returning v. The state is the double's 8 bytes; read() is a
// request too (served in the combiner's round like any other), so it needs no other
// synchronisation and is detectable like an update.
//
//   CombiningAtomicFloat<Persistence::none>        register/pbcomb-transient (Figure 8's twin)
//   CombiningAtomicFloat<Persistence::durable>     register/pbcomb-durable (null recovery)
//   CombiningAtomicFloat<Persistence::detectable>  register/pbcomb
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "pmds/combining/pbcomb.hpp"
#include "pmds/combining/structure.hpp"

namespace pmds::combining {

template <Persistence Mode, PlantedBug Bug = PlantedBug::none>
class CombiningAtomicFloat : public CombiningStructure<Mode> {
  using Base = CombiningStructure<Mode>;

 public:
  static constexpr const char* name = "register";
  static constexpr std::uint64_t kind = 0x706d64732e726366;  // "pmds.rcf"
  static constexpr double default_initial = 1.0;

  enum class Op : std::uint64_t { read = 1, fetch_multiply = 2 };
  struct Sequential {
    struct State {
      std::uint64_t bits;
    };
    struct Request {
      Op op;
      double factor;
    };
    struct Response {
      double value;  // the value before
    };
    Response apply(State& s, const Request& r) {
      const double before = std::bit_cast<double>(s.bits);
      if (r.op == Op::fetch_multiply) s.bits = std::bit_cast<std::uint64_t>(before * r.factor);
      return {before};
    }
  };
  using Comb = PBComb<Sequential, Mode, Bug>;
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
    auto trace = this->open_anchor(kind, &anchor_bytes, 1, "combining AtomicFloat register");
    comb_.emplace(object_, area(), this->slots(), open_existing);
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
  double peek() const { return std::bit_cast<double>(comb_->peek_state().bits); }

 private:
  static std::size_t anchor_bytes(std::size_t slots) {
    return Base::header_bytes + Comb::area_bytes(slots);
  }
  void* area() const { return this->anchor() + Base::header_bytes; }
  void create(double initial) {
    this->create_anchor(kind, anchor_bytes(this->slots()), 1);
    comb_.emplace(object_, area(), this->slots(),
                  typename Sequential::State{std::bit_cast<std::uint64_t>(initial)}, create_new);
    this->publish_anchor();
  }

  Sequential object_;
  std::optional<Comb> comb_;
};

}  // namespace pmds::combining
