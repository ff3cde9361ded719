// pmds::montage::Queue — the Michael–Scott queue on nbMontage (§5 of its paper): "queue/montage",
// buffered durable linearizability, with sync().
//
// The list of nodes, head and tail are DRAM; each enqueued value has a payload (montage::Block
// header + value + serial number) in the pool. nbMontage §5: "the queue uses payloads to hold
// values and their order. Specifically, between its two loads of the queue tail pointer, the
// enqueue operation calls fetch_add on a global counter to obtain a serial number for the
// to-be-inserted value." Here the serial is taken once the enqueuer has seen the tail with a
// null next, right before its lin_cas on that next word, and again at every retry: a link on a
// node is the first that node's next ever takes, and any later link is made on a node that is
// only reachable after it, by an enqueuer that saw it as the tail afterwards, so serial order is
// queue order. Recovery sorts the surviving payloads by serial number.
//
// The two linearizing CASes are lin_cas: an enqueue's link of its node after the last one, and a
// dequeue's swing of head to head's successor, whose payload (the value returned; the successor
// becomes the dummy) it detaches first. Swinging the tail is a plain cas. A dummy's payload is
// deleted when the dummy itself is retired.
//
// Why not algo/ms_queue.hpp over a policy, as the BST is (montage/policy.hpp): the seam's
// payloads hold a key and a value (algo/policy.hpp, "Payloads"); the queue's also hold the serial
// number taken right before each link attempt, its order at recovery, which algo/ms_queue.hpp has
// no step for.
//
// Pool layout: StructureRoot (epoch_system.hpp) with tag "QUEUMONT" and parameter 0.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <optional>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/interfaces.hpp"
#include "pmds/montage/epoch_system.hpp"
#include "pmds/pm/access.hpp"
#include "pmds/pm/pool.hpp"
#include "pmds/reclaim/epoch.hpp"

namespace pmds::montage {

template <FaultPolicy Faults = NoFaults>
class Queue {
 public:
  static constexpr Criterion criterion = Criterion::buffered;
  static constexpr EpochBound epoch_bound = EpochBound::two_epochs;
  static constexpr std::uint64_t tag = 0x544e4f4d55455551;  // "QUEUMONT"
  static constexpr const char* name = "queue/montage";

  struct Payload : Block {
    pm::atomic<Value> value;
    pm::atomic<std::uint64_t> serial;  // the enqueue order
  };
  static_assert(sizeof(Payload) == 64);

  Queue(CreateTag, pm::Pool& pool, const Options& options = {}) {
    StructureRoot::check_unused(pool, name);
    system_.emplace(create_new, pool, options);
    init_list({});
    StructureRoot::write(pool, tag, 0, system_->area());
  }

  Queue(OpenTag, pm::Pool& pool, const Options& options = {}) {
    const auto [parameter, area] = StructureRoot::read(pool, tag, name);
    (void)parameter;
    system_.emplace(open_existing, pool, area, options);
    auto r = system_->recover([](const Block* b) -> const char* {
      return b->kind_size.load() >> 8 < sizeof(Payload) ? "montage queue: a payload too small"
                                                        : nullptr;
    });
    recovery_ = r.stats;
    std::vector<Payload*> payloads;
    payloads.reserve(r.payloads.size());
    for (Block* b : r.payloads) payloads.push_back(static_cast<Payload*>(b));
    std::sort(payloads.begin(), payloads.end(), [](const Payload* a, const Payload* b) {
      return a->serial.load() < b->serial.load();
    });
    init_list(payloads);
  }

  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // A clean close: everything completed is made durable (sync), then the DRAM list is freed.
  ~Queue() {
    sync();
    domain_.drain();
    for (Node* n = node_of(head_.load()); n != nullptr;) {
      Node* next = node_of(n->next.load());
      delete n;
      n = next;
    }
  }

  // Throws PoolFull (the queue unchanged) when no block is left for the payload.
  void enqueue(Value v) {
    auto guard = domain_.pin();
    Payload* p = system_->template pnew<Payload>();
    p->value.store(v, std::memory_order_relaxed);
    Node* n = new Node{{0}, v, p};
    for (;;) {
      const std::uint64_t t = system_->load(tail_);
      Node* last = node_of(t);
      const std::uint64_t next = system_->load(last->next);
      if (system_->load(tail_) != t) continue;
      if (next != 0) {
        system_->cas(tail_, t, next);  // a lagging tail: help it on
        continue;
      }
      // The payload is still private: its serial may change until the lin_cas succeeds.
      p->serial.store(next_serial_.fetch_add(1, std::memory_order_acq_rel),
                      std::memory_order_relaxed);
      if (system_->lin_cas(last->next, 0, word_of(n))) {
        system_->cas(tail_, t, word_of(n));
        return;
      }
    }
  }

  // The value at the front, removed; nullopt when the queue is empty. Throws PoolFull (the
  // queue unchanged) when no block is left for the anti-node.
  std::optional<Value> dequeue() {
    auto guard = domain_.pin();
    for (;;) {
      const std::uint64_t h = system_->load(head_);
      const std::uint64_t t = system_->load(tail_);
      Node* first = node_of(h);
      const std::uint64_t next = system_->load(first->next);
      if (system_->load(head_) != h) continue;
      if (h == t) {
        if (next == 0) return std::nullopt;
        system_->cas(tail_, t, next);
        continue;
      }
      Node* successor = node_of(next);
      system_->pdetach(successor->payload);
      if (system_->lin_cas(head_, h, next)) {
        const Value v = successor->value;
        retire(first);
        return v;
      }
    }
  }

  void sync() { system_->sync(); }
  std::uint64_t epoch() const { return system_->epoch(); }
  void background_step() { system_->background_step(); }
  void drain() { domain_.drain(); }
  const RecoveryStats& recovery_stats() const { return recovery_; }

 private:
  struct Node {
    std::atomic<std::uint64_t> next;  // Node*, or a descriptor while a lin_cas on it runs
    Value value;                      // a copy of the payload's
    Payload* payload;                 // null for the initial dummy
  };
  static Node* node_of(std::uint64_t w) { return reinterpret_cast<Node*>(w); }
  static std::uint64_t word_of(const Node* n) { return reinterpret_cast<std::uint64_t>(n); }

  // A dummy (no payload), then one node per payload in order.
  void init_list(const std::vector<Payload*>& payloads) {
    Node* last = new Node{{0}, 0, nullptr};
    head_.store(word_of(last));
    std::uint64_t serial = 0;
    for (Payload* p : payloads) {
      Node* n = new Node{{0}, p->value.load(), p};
      last->next.store(word_of(n));
      last = n;
      serial = std::max(serial, p->serial.load() + 1);
    }
    tail_.store(word_of(last));
    next_serial_.store(serial);
  }

  void retire(Node* n) {
    EpochSystem<Faults>* system = &*system_;
    domain_.retire(n, [system](Node* dead) noexcept {
      if (dead->payload != nullptr) system->pdelete(dead->payload);
      delete dead;
    });
  }

  std::optional<EpochSystem<Faults>> system_;  // before domain_: its deleters call pdelete
  reclaim::EpochDomain domain_;
  alignas(64) std::atomic<std::uint64_t> head_{0};
  alignas(64) std::atomic<std::uint64_t> tail_{0};
  alignas(64) std::atomic<std::uint64_t> next_serial_{0};
  RecoveryStats recovery_;
};

}  // namespace pmds::montage
