// pmds — what an algorithm of algo/ holds as a key and a value: its Keys parameter (the skip
// list takes one). WordKeys, the default, is 8-byte keys and values (pmds::Map) kept in the node,
// under every memory policy. Under a payload policy (nbMontage, algo/policy.hpp "Payloads") a
// Keys may keep its keys and values in the node's payload instead: montage/key_value_payload.hpp's
// ByteStringKeys, byte strings in byte order (pmds::ByteStringMap).
//
// A node keeps two words of an element: its key word, by which nodes are ordered (the key itself;
// byte strings: the first word of the key's order), and a Keys::Cached (the value, so that a read
// touches the node only; byte strings: the second word of the order). Two keys of equal key words
// are ordered by Keys::tie, which may read the payload (WordKeys: never, they are equal). What a
// Keys with byte_strings names besides WordKeys' members:
//   Payload                   the payload block a node points to;
//   make_payload(system, k, v)  a payload holding k and v, from the policy's System;
//   cached(probe, v)          the node's Cached for key `probe` and value v;
//   tie(cached, payload, probe)  the sign of (node's key - probe's key) for equal key words;
//   value(cached, payload)    the node's value, as ValueOut;
//   visit(order, cached, payload, f)  f(key, value) of a node.
#pragma once

#include <cstddef>

#include "pmds/interfaces.hpp"

namespace pmds::algo {

struct WordKeys {
  static constexpr bool byte_strings = false;
  using KeyArg = Key;  // what operations take
  using ValueArg = Value;
  using KeyOut = Key;  // what they give back
  using ValueOut = Value;
  using Cached = Value;  // the node's copy of its value
  static constexpr std::size_t max_key_size = sizeof(Key);
  static constexpr std::size_t max_value_size = sizeof(Value);

  // A key ready to be compared with nodes' keys.
  struct Probe {
    Key order;  // the key
  };
  static Probe probe(Key k) {
    check_key(k);  // ReservedKey
    return {k};
  }
  static void check_value(Value) {}
};

}  // namespace pmds::algo
