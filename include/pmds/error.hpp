/// \file
/// pmds — errors reported to users.
///
/// Every failure a user can cause (bad pool file, full pool, too many threads, a reserved key)
/// is reported as a typed exception derived from pmds::Error, with a message that names the
/// file or value involved. Nothing in pmds aborts on bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace pmds {

/// The base of every error pmds reports.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What was wrong with a pool file (pm/pool.hpp). A failed open never modifies the file.
enum class PoolErrc {
  not_found,          ///< the path does not exist
  not_regular_file,   ///< a directory, a device that is not DAX, a FIFO, ...
  io,                 ///< open/stat/mmap failed for another reason (errno in the message)
  bad_magic,          ///< not a pmds pool (foreign file)
  layout_mismatch,    ///< a pmds pool holding another structure
  version_too_new,    ///< written by a newer pmds
  truncated,          ///< the file is shorter than its header says, or shorter than a header
  size_mismatch,      ///< the file is longer than its header says
  corrupted,          ///< header checksum or internal consistency check failed
  base_unavailable,   ///< the recorded base address is already in use in this process
  in_use,             ///< the pool is open in another process (file lock)
  already_exists,     ///< create() on an existing path
  bad_argument,       ///< create() with an unusable size or layout name
  full,               ///< the pool has no free chunk left
  corrupt_structure,  ///< the structure's bytes in the pool are damaged: a link read by recovery
                      /// leads outside the pool's slots or around a cycle, or a field is out
                      /// of range (PoolCorrupt)
};

const char* to_string(PoolErrc code) noexcept;

/// A bad, mismatched or unusable pool file; code() says which.
class PoolError : public Error {
 public:
  PoolError(PoolErrc code, const std::string& message) : Error(message), code_(code) {}
  PoolErrc code() const noexcept { return code_; }

 private:
  PoolErrc code_;
};

/// The pool has no free chunk left for an allocation (at its size limit, or the file system is
/// full). The pool is unchanged.
class PoolFull : public PoolError {
 public:
  explicit PoolFull(const std::string& message) : PoolError(PoolErrc::full, message) {}
};

/// Recovery found the structure in an opened pool damaged (PoolErrc::corrupt_structure): a link
/// that does not lead to a slot of the pool, a cycle, a field out of range. The message names
/// the structure and what was wrong. Thrown before recovery writes anything where the structure
/// allows it (docs/ARCHITECTURE.md §5, "Bad input inside the pool").
class PoolCorrupt : public PoolError {
 public:
  explicit PoolCorrupt(const std::string& message)
      : PoolError(PoolErrc::corrupt_structure, message) {}
};

/// More threads than pmds::max_threads use pmds at once.
class TooManyThreads : public Error {
 public:
  using Error::Error;
};

/// A bounded structure (the combining heap) has no room for another element. It is unchanged.
class CapacityExceeded : public Error {
 public:
  using Error::Error;
};

/// A key the structure reserves for its sentinels (0 and 2^64-1) was passed to an operation.
class ReservedKey : public Error {
 public:
  using Error::Error;
};

inline const char* to_string(PoolErrc code) noexcept {
  switch (code) {
    case PoolErrc::not_found:
      return "not_found";
    case PoolErrc::not_regular_file:
      return "not_regular_file";
    case PoolErrc::io:
      return "io";
    case PoolErrc::bad_magic:
      return "bad_magic";
    case PoolErrc::layout_mismatch:
      return "layout_mismatch";
    case PoolErrc::version_too_new:
      return "version_too_new";
    case PoolErrc::truncated:
      return "truncated";
    case PoolErrc::size_mismatch:
      return "size_mismatch";
    case PoolErrc::corrupted:
      return "corrupted";
    case PoolErrc::base_unavailable:
      return "base_unavailable";
    case PoolErrc::in_use:
      return "in_use";
    case PoolErrc::already_exists:
      return "already_exists";
    case PoolErrc::bad_argument:
      return "bad_argument";
    case PoolErrc::full:
      return "full";
    case PoolErrc::corrupt_structure:
      return "corrupt_structure";
  }
  return "unknown";
}

}  // namespace pmds
