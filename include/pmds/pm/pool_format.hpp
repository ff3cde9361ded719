// pmds — the on-media format of a pool file: header, chunk directory, and their validation.
//
// A pool file is laid out as
//
//   [0, 4096)                      the header (one page):
//        bytes   0..135            Identity: immutable after create, covered by a checksum
//        bytes 256..263            clean-shutdown flag (its own cache line)
//        bytes 320..351            growth line (format 2; its own cache line): GrowthLine
//        bytes 512..639            root table: 16 words (two cache lines)
//   [directory_offset, chunks_offset)  chunk directory: one 8-byte word per chunk, room for
//                                  directory_capacity(id) chunks (the pages it fills)
//   [chunks_offset, size)          the chunks now, of chunk_size bytes, page aligned
//
// Format 2 adds growth: a pool may have room in its directory for more chunks than its file
// holds, and grow by extending the file (pool.hpp, Pool::grow). The Identity still says what
// create made (pool_size, chunk_count); the growth line says what the file holds now and how
// far it may grow. A format-1 file reads as a pool that never grew and may not grow (its growth
// line is zero). Format 1 files open unchanged; a pool created here is format 2.
//
// Everything here is shared by Pool::open (which validates a file before it maps it read-write,
// so a failed open never modifies the file) and inspect_pool (which only reads).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "pmds/error.hpp"
#include "pmds/thread_registry.hpp"

namespace pmds::pm::format {

inline constexpr std::uint64_t magic = 0x4c4f4f5053444d50ull;  // "PMDSPOOL" in file byte order
inline constexpr std::uint32_t current_version = 2;
inline constexpr std::size_t page_size = 4096;
inline constexpr std::size_t header_size = page_size;
inline constexpr std::size_t max_layout_length = 63;
inline constexpr std::size_t root_count = 16;

inline constexpr std::size_t clean_flag_offset = 256;
inline constexpr std::size_t growth_offset = 320;
inline constexpr std::size_t roots_offset = 512;

// The growth line: what the file holds now, how far it may grow, and a growth under way. Each
// word is written alone and persisted in turn (Pool::grow): pending first (a growth to that
// many chunks has begun: the file may be longer than chunk_count says), then chunk_count (the
// new chunks exist: the file was extended and mapped before), then pending cleared.
struct GrowthLine {
  std::uint64_t chunk_count;  // chunks the file holds; 0: as created (Identity::chunk_count)
  std::uint64_t limit;        // the most chunks it may grow to; 0: as created (it never grows)
  std::uint64_t pending;      // a growth to this many chunks began and may not have ended; 0: none
  std::uint64_t growths;      // how many times the pool grew (for `pmds inspect`)
};
static_assert(sizeof(GrowthLine) <= 64 && growth_offset % 64 == 0);

// A chunk is a power of two of these bytes; 1 MiB by default. Smaller chunks suit small pools:
// the crash lab's use 256 KiB (a recovery scans every slot of a used chunk).
inline constexpr std::size_t min_chunk_size = std::size_t{64} << 10;
inline constexpr std::size_t max_chunk_size = std::size_t{4} << 20;
inline constexpr std::size_t default_chunk_size = std::size_t{1} << 20;

// Slot sizes are multiples of 16 (cmpxchg16b needs 16-byte alignment); a pool holds at most
// this many distinct slot sizes (the allocator keeps per-thread state for each).
inline constexpr std::size_t slot_alignment = 16;
inline constexpr std::size_t max_slot_sizes = 32;

// The immutable part of the header, at offset 0. Written once by create, before the magic.
struct Identity {
  std::uint64_t magic;  // written LAST by create: a file without it is not (yet) a pool
  std::uint32_t format_version;
  std::uint32_t header_size;
  std::uint64_t pool_size;
  std::uint64_t base_address;  // the pool is always mapped here (pointers in it are absolute)
  std::uint64_t chunk_size;
  std::uint64_t chunk_count;
  std::uint64_t directory_offset;
  std::uint64_t chunks_offset;
  char layout[max_layout_length + 1];  // NUL padded: which structure the pool holds
  std::uint64_t checksum;              // FNV-1a over every byte after magic, before checksum
};
static_assert(sizeof(Identity) == 136);
static_assert(sizeof(Identity) <= clean_flag_offset);

inline std::uint64_t fnv1a(const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// The magic is checked on its own (it is written last); the checksum covers the rest.
inline std::uint64_t identity_checksum(const Identity& id) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(&id);
  return fnv1a(bytes + sizeof(id.magic), offsetof(Identity, checksum) - sizeof(id.magic));
}

inline std::string_view layout_of(const Identity& id) {
  return {id.layout, strnlen(id.layout, sizeof(id.layout))};
}

constexpr std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

// Chunks the directory has room for: the whole pages it fills (a pool made by geometry_for has
// up to 511 more than its chunk_count; one made to grow, those of its limit).
inline std::size_t directory_capacity(const Identity& id) {
  return (id.chunks_offset - id.directory_offset) / sizeof(std::uint64_t);
}

// The file size of a pool holding `count` chunks: as created, or (grown) up to its last chunk.
inline std::size_t size_for(const Identity& id, std::size_t count) {
  return count == id.chunk_count ? id.pool_size : id.chunks_offset + count * id.chunk_size;
}

// Where the directory and the chunks go in a pool of `size` bytes with `chunk_size` chunks.
struct Geometry {
  std::size_t directory_offset = 0;
  std::size_t chunks_offset = 0;
  std::size_t chunk_count = 0;
};

inline Geometry geometry_for(std::size_t size, std::size_t chunk_size) {
  Geometry g;
  g.directory_offset = header_size;
  if (size < header_size + page_size + chunk_size) return g;  // chunk_count 0: too small
  std::size_t count = (size - header_size) / chunk_size;
  for (; count > 0; --count) {
    const std::size_t chunks_offset = round_up(header_size + count * 8, page_size);
    if (chunks_offset + count * chunk_size <= size) {
      g.chunks_offset = chunks_offset;
      g.chunk_count = count;
      return g;
    }
  }
  return g;
}

// ---------------------------------------------------------------------------------------------
// Chunk directory words. One 8-byte word per chunk, changed only by a CAS then persisted, so a
// crash leaves each word either before or after a change (docs/ARCHITECTURE.md §3: a word is in
// one line).
//   bits  0..7   state: 0 free, 1 used (any other value: corrupted)
//   bits  8..15  owner: the pmds::thread_id() of the thread that claimed the chunk
//   bits 16..31  zero
//   bits 32..63  slot size in bytes (a multiple of 16, at most the chunk size)
// A free chunk's word is 0, so a freshly created (zero-filled) directory is all free.

namespace chunk_word {
inline constexpr std::uint64_t free_word = 0;
inline constexpr std::uint64_t state_used = 1;

constexpr std::uint64_t used(std::size_t owner, std::size_t slot_size) {
  return state_used | (std::uint64_t{owner} << 8) | (std::uint64_t{slot_size} << 32);
}
constexpr bool is_used(std::uint64_t w) {
  return (w & 0xff) == state_used;
}
constexpr std::size_t owner(std::uint64_t w) {
  return (w >> 8) & 0xff;
}
constexpr std::size_t slot_size(std::uint64_t w) {
  return static_cast<std::size_t>(w >> 32);
}
// Empty string when the word is well formed; otherwise what is wrong with it.
inline std::string check(std::uint64_t w, std::size_t chunk_size) {
  if (w == free_word) return {};
  if ((w & 0xff) != state_used) return "unknown state " + std::to_string(w & 0xff);
  if (((w >> 16) & 0xffff) != 0) return "nonzero reserved bits";
  if (owner(w) >= pmds::max_threads) return "owner thread id " + std::to_string(owner(w));
  const std::size_t s = slot_size(w);
  if (s == 0 || s % slot_alignment != 0 || s > chunk_size) return "slot size " + std::to_string(s);
  return {};
}
}  // namespace chunk_word

// ---------------------------------------------------------------------------------------------
// Validation of a file's header (shared by open and inspect). Throws PoolError naming the path.

[[noreturn]] inline void fail(PoolErrc code, const std::string& path, const std::string& what) {
  throw PoolError(code, "pmds pool '" + path + "': " + what + " [" + to_string(code) + "]");
}

// A validated header: the Identity, and what the growth line says now.
struct Header {
  Identity id{};
  std::size_t chunk_count = 0;  // chunks the pool holds now
  std::size_t limit = 0;        // the most chunks it may grow to
  std::size_t pending = 0;      // a growth to this many chunks began (0: none)
  std::size_t growths = 0;
  std::size_t size = 0;  // the pool's size now: size_for(id, chunk_count)
  // The file is longer than `size`, within the pending growth: a growth that crashed after it
  // extended the file and before the header said so. Its chunks were never handed out (the
  // header's write-back comes first), so open trims the file back to `size`.
  bool interrupted_growth = false;
};

// `file_size`: the file's size; `prefix`: its first min(file_size, header_size) bytes.
// `expected_layout`: empty to accept any layout (inspect).
inline Header validate_header(const std::string& path, const unsigned char* prefix,
                              std::size_t file_size, std::string_view expected_layout) {
  if (file_size < sizeof(std::uint64_t))
    fail(PoolErrc::truncated, path,
         "file of " + std::to_string(file_size) + " bytes is shorter than a pool header");
  std::uint64_t m;
  std::memcpy(&m, prefix, sizeof m);
  if (m != magic) {
    fail(PoolErrc::bad_magic, path,
         m == 0 ? "no pool magic (an empty file, or a create that did not finish)"
                : "not a pmds pool (wrong magic number)");
  }
  if (file_size < header_size)
    fail(PoolErrc::truncated, path,
         "file of " + std::to_string(file_size) + " bytes is shorter than the " +
             std::to_string(header_size) + "-byte pool header");
  Header h;
  Identity& id = h.id;
  std::memcpy(&id, prefix, sizeof id);
  // The version is checked before the checksum: a newer format may checksum differently.
  if (id.format_version > current_version)
    fail(PoolErrc::version_too_new, path,
         "format version " + std::to_string(id.format_version) +
             " is newer than this pmds reads (" + std::to_string(current_version) + ")");
  if (id.format_version == 0) fail(PoolErrc::corrupted, path, "format version 0");
  if (identity_checksum(id) != id.checksum)
    fail(PoolErrc::corrupted, path, "header checksum mismatch");
  if (!expected_layout.empty() && layout_of(id) != expected_layout)
    fail(PoolErrc::layout_mismatch, path,
         "holds layout '" + std::string(layout_of(id)) + "', expected '" +
             std::string(expected_layout) + "'");
  // Internal consistency: a checksummed header can still be one a bug wrote; never trust it
  // to compute addresses before these hold. A pool made to grow has its directory sized for its
  // limit, not by geometry_for(pool_size).
  GrowthLine growth{};
  if (id.format_version >= 2) std::memcpy(&growth, prefix + growth_offset, sizeof growth);
  const bool chunk_ok = id.chunk_size >= min_chunk_size && id.chunk_size <= max_chunk_size &&
                        (id.chunk_size & (id.chunk_size - 1)) == 0;
  const bool growable = growth.limit > id.chunk_count;
  bool geometry_ok;
  if (!growable) {
    const Geometry g = geometry_for(id.pool_size, chunk_ok ? id.chunk_size : min_chunk_size);
    geometry_ok = id.directory_offset == g.directory_offset &&
                  id.chunks_offset == g.chunks_offset && id.chunk_count == g.chunk_count;
  } else {
    geometry_ok = id.directory_offset == header_size && id.chunks_offset > id.directory_offset &&
                  id.chunks_offset % page_size == 0 && id.chunks_offset < (std::size_t{1} << 46) &&
                  chunk_ok && id.pool_size == id.chunks_offset + id.chunk_count * id.chunk_size;
  }
  if (id.header_size != header_size || !chunk_ok || id.pool_size % page_size != 0 ||
      id.base_address == 0 || id.base_address % page_size != 0 || !geometry_ok ||
      id.chunk_count == 0 || layout_of(id).empty() || id.layout[max_layout_length] != '\0')
    fail(PoolErrc::corrupted, path, "inconsistent header fields");
  const std::size_t capacity = directory_capacity(id);
  h.chunk_count = growth.chunk_count != 0 ? growth.chunk_count : id.chunk_count;
  h.limit = growth.limit != 0 ? growth.limit : id.chunk_count;
  h.pending = growth.pending;
  h.growths = growth.growths;
  if (h.chunk_count < id.chunk_count || h.limit < h.chunk_count || h.limit > capacity ||
      (h.pending != 0 && (h.pending < h.chunk_count || h.pending > h.limit)) ||
      h.limit > (std::size_t{1} << 46) / id.chunk_size)
    fail(PoolErrc::corrupted, path,
         "inconsistent growth line (holds " + std::to_string(h.chunk_count) + " chunks, limit " +
             std::to_string(h.limit) + ", directory room " + std::to_string(capacity) + ")");
  h.size = size_for(id, h.chunk_count);
  if (h.size > file_size)
    fail(PoolErrc::truncated, path,
         "file of " + std::to_string(file_size) + " bytes is shorter than the pool size " +
             std::to_string(h.size) + " recorded in its header");
  if (h.size < file_size) {
    if (h.pending == 0 || file_size > size_for(id, h.pending))
      fail(PoolErrc::size_mismatch, path,
           "file of " + std::to_string(file_size) + " bytes is longer than the pool size " +
               std::to_string(h.size) + " recorded in its header");
    h.interrupted_growth = true;
  }
  return h;
}

// The directory words as read from a file (or a mapping); throws corrupted on a bad word.
// The directory words of the chunks the pool holds (`chunk_count`).
inline void validate_directory(const std::string& path, const Identity& id,
                               std::size_t chunk_count, const std::uint64_t* words) {
  std::array<std::size_t, max_slot_sizes> seen{};
  std::size_t distinct = 0;
  for (std::size_t i = 0; i < chunk_count; ++i) {
    const std::string problem = chunk_word::check(words[i], id.chunk_size);
    if (!problem.empty())
      fail(PoolErrc::corrupted, path,
           "chunk directory entry " + std::to_string(i) + ": " + problem);
    if (!chunk_word::is_used(words[i])) continue;
    const std::size_t s = chunk_word::slot_size(words[i]);
    bool known = false;
    for (std::size_t k = 0; k < distinct; ++k) known |= seen[k] == s;
    if (known) continue;
    if (distinct == max_slot_sizes)
      fail(PoolErrc::corrupted, path,
           "chunk directory holds more than " + std::to_string(max_slot_sizes) +
               " distinct slot sizes");
    seen[distinct++] = s;
  }
}

}  // namespace pmds::pm::format
