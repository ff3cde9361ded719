// pmds — the Px86 simulator's crash images (pm/simulator.hpp takes the snapshots): a Snapshot
// holds the durable-state model of every attached region at one moment, and writes any crash
// image it allows, after execution went on.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/pm/backend.hpp"

namespace pmds::pm::sim {

// Bad use of the simulator's own API (a misaligned region, an unknown region, a choice that does
// not fit the snapshot, ...).
class SimulatorError : public Error {
 public:
  using Error::Error;
};

enum class ImageKind {
  minimum,  // every line at its floor: only what is certainly durable
  maximum,  // every line with all its stores: what a clean shutdown would leave
  random,   // every line at a uniformly drawn point in [floor, stores], from a seed
};

// One crash image: for each undetermined line of a snapshot (in snapshot order), how many of its
// not-yet-durable stores persisted, in [0, Snapshot::choices(i) - 1].
using Choice = std::vector<std::uint32_t>;

// The durable-state model of every attached region at one moment: a copy of each region's
// current content plus, for each line whose content is not certain, its durable base and its
// not-yet-durable stores. Self-contained: images can be written after execution went on.
class Snapshot {
 public:
  std::size_t region_count() const { return regions_.size(); }
  void* region_base(std::size_t region) const;
  std::size_t region_size(std::size_t region) const;
  // event_count() when the snapshot was taken.
  std::uint64_t event() const { return event_; }
  // True if it was taken in eADR mode (then every image is the maximum one).
  bool eadr() const { return eadr_; }

  // Lines with more than one possible content after a crash (0 in eADR mode).
  std::size_t undetermined_lines() const { return lines_.size(); }
  // Address of undetermined line i and its number of possible contents (its stores above the
  // floor, plus one).
  const void* line_address(std::size_t i) const;
  std::size_t choices(std::size_t i) const;
  // Number of distinct choices: the product over lines of choices(i) (as a double: it can be
  // astronomically large). 1 when every line is determined.
  double image_count() const;

  // The choice of the given kind (seed matters for random only).
  Choice choice(ImageKind kind, std::uint64_t seed = 0) const;
  // Writes region `region`'s bytes under choice c into out (region_size(region) bytes).
  void write_image(std::size_t region, const Choice& c, void* out) const;
  void write_image(std::size_t region, ImageKind kind, std::uint64_t seed, void* out) const {
    write_image(region, choice(kind, seed), out);
  }
  std::vector<unsigned char> image(std::size_t region, const Choice& c) const;
  // Without region copies (snapshot(false), added for the crash lab): only the undetermined
  // lines are copied, which costs what is undetermined rather than the regions' size, but an
  // image is then memory AS IT IS NOW with line_image() written over each undetermined line,
  // valid only while memory still holds what it held at the snapshot (inside the crash
  // handler, or quiescent). write_image()/image() need the copies (SimulatorError otherwise).
  bool has_region_copies() const { return copies_; }
  // Undetermined line i's 64 bytes with its first k not-yet-durable stores applied
  // (k < choices(i)), and the region it lies in.
  void line_image(std::size_t i, std::uint32_t k, void* out) const;
  std::size_t line_region(std::size_t i) const { return lines_.at(i).region; }
  // Exhaustive enumeration: if image_count() <= limit, calls f(const Choice&) for every choice
  // (f may return false to stop early) and returns true; otherwise calls nothing, returns false.
  // Different choices may give equal images (a store of the value already there).
  template <class F>
  bool for_each_choice(double limit, F&& f) const;

 private:
  friend Snapshot snapshot(bool);
  struct StoreCopy {
    std::uint8_t offset, len;
    std::uint32_t pos;  // first byte in LineCopy::bytes
  };
  struct RegionCopy {
    std::uintptr_t base;
    std::size_t size;
    std::vector<unsigned char> bytes;  // empty without region copies
  };
  struct LineCopy {
    std::uintptr_t address;
    std::size_t region;
    std::array<unsigned char, cache_line_size> base;  // the durable content
    std::vector<StoreCopy> stores;                    // not yet durable, in visibility order
    std::vector<unsigned char> bytes;
  };
  void check_region(std::size_t region) const;
  std::uint64_t event_ = 0;
  bool eadr_ = false;
  bool copies_ = true;
  std::vector<RegionCopy> regions_;
  std::vector<LineCopy> lines_;  // sorted by address
};

// Takes a snapshot. Callable from a crash handler, or when quiescent (it takes the lock).
// copy_regions = false: the undetermined lines only (see Snapshot::has_region_copies).
// Defined in pm/simulator.hpp.
Snapshot snapshot(bool copy_regions = true);

inline void Snapshot::check_region(std::size_t region) const {
  if (region >= regions_.size())
    throw SimulatorError("pmds::pm::sim::Snapshot: region " + std::to_string(region) +
                         " out of range (" + std::to_string(regions_.size()) + " regions)");
}

inline void* Snapshot::region_base(std::size_t region) const {
  check_region(region);
  return reinterpret_cast<void*>(regions_[region].base);
}

inline std::size_t Snapshot::region_size(std::size_t region) const {
  check_region(region);
  return regions_[region].size;
}

inline const void* Snapshot::line_address(std::size_t i) const {
  return reinterpret_cast<const void*>(lines_.at(i).address);
}

inline std::size_t Snapshot::choices(std::size_t i) const {
  return lines_.at(i).stores.size() + 1;
}

inline double Snapshot::image_count() const {
  double n = 1;
  for (const LineCopy& l : lines_) n *= static_cast<double>(l.stores.size() + 1);
  return n;
}

inline Choice Snapshot::choice(ImageKind kind, std::uint64_t seed) const {
  Choice c(lines_.size(), 0);
  std::mt19937_64 random(seed);
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    const auto n = static_cast<std::uint32_t>(lines_[i].stores.size());
    switch (kind) {
      case ImageKind::minimum:
        break;
      case ImageKind::maximum:
        c[i] = n;
        break;
      case ImageKind::random:
        c[i] = static_cast<std::uint32_t>(random() % (std::uint64_t{n} + 1));
        break;
    }
  }
  return c;
}

inline void Snapshot::write_image(std::size_t region, const Choice& c, void* out) const {
  check_region(region);
  if (c.size() != lines_.size())
    throw SimulatorError("pmds::pm::sim::Snapshot::write_image: the choice has " +
                         std::to_string(c.size()) + " entries, the snapshot " +
                         std::to_string(lines_.size()) + " undetermined lines");
  if (!copies_)
    throw SimulatorError(
        "pmds::pm::sim::Snapshot::write_image: a snapshot taken without region copies");
  const RegionCopy& r = regions_[region];
  auto* dst = static_cast<unsigned char*>(out);
  std::memcpy(dst, r.bytes.data(), r.bytes.size());
  for (std::size_t i = 0; i < lines_.size(); ++i) {
    const LineCopy& l = lines_[i];
    if (c[i] > l.stores.size())
      throw SimulatorError("pmds::pm::sim::Snapshot::write_image: choice " + std::to_string(c[i]) +
                           " for line " + std::to_string(i) + " exceeds its " +
                           std::to_string(l.stores.size()) + " stores");
    if (l.region != region) continue;
    std::array<unsigned char, cache_line_size> content = l.base;
    for (std::uint32_t k = 0; k < c[i]; ++k) {
      const StoreCopy& st = l.stores[k];
      std::memcpy(content.data() + st.offset, l.bytes.data() + st.pos, st.len);
    }
    std::memcpy(dst + (l.address - r.base), content.data(), cache_line_size);
  }
}

inline void Snapshot::line_image(std::size_t i, std::uint32_t k, void* out) const {
  const LineCopy& l = lines_.at(i);
  if (k > l.stores.size())
    throw SimulatorError("pmds::pm::sim::Snapshot::line_image: choice " + std::to_string(k) +
                         " for line " + std::to_string(i) + " exceeds its " +
                         std::to_string(l.stores.size()) + " stores");
  std::array<unsigned char, cache_line_size> content = l.base;
  for (std::uint32_t j = 0; j < k; ++j) {
    const StoreCopy& st = l.stores[j];
    std::memcpy(content.data() + st.offset, l.bytes.data() + st.pos, st.len);
  }
  std::memcpy(out, content.data(), cache_line_size);
}

inline std::vector<unsigned char> Snapshot::image(std::size_t region, const Choice& c) const {
  std::vector<unsigned char> out(region_size(region));
  write_image(region, c, out.data());
  return out;
}

template <class F>
bool Snapshot::for_each_choice(double limit, F&& f) const {
  if (image_count() > limit) return false;
  Choice c(lines_.size(), 0);
  for (;;) {
    if constexpr (std::is_same_v<decltype(f(c)), bool>) {
      if (!f(static_cast<const Choice&>(c))) return true;
    } else {
      f(static_cast<const Choice&>(c));
    }
    // Next choice: an odometer over the lines.
    std::size_t i = 0;
    while (i < c.size() && c[i] == lines_[i].stores.size()) c[i++] = 0;
    if (i == c.size()) return true;
    ++c[i];
  }
}

}  // namespace pmds::pm::sim
