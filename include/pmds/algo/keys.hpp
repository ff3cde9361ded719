// pmds — what an algorithm of algo/ holds as a key and a value: its Keys parameter (the skip
// list takes one). WordKeys, the default, is 8-byte keys and values (pmds::Map) kept in the node,
// under every memory policy. Under a payload policy (nbMontage, algo/policy.hpp "Payloads") a
// Keys may keep its keys and values in the node's payload instead: montage/key_value_payload.hpp's
// ByteStringKeys, byte strings in byte order (pmds::ByteStringMap), and HashedByteStringKeys, byte
// strings ordered by their hash (the hash table's chains).
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
//
// Below WordKeys: what a node of an algorithm over a policy P keeps of its element, written once
// for the algorithms that take a Keys (the skip list, the hash table's chains).
#pragma once

#include <cstddef>
#include <type_traits>

#include "pmds/algo/policy.hpp"
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

// ---- a node's element, under policy P ---------------------------------------------------------

// Byte-string Keys need a payload policy whose nodes are DRAM (nbMontage): the keys live in the
// payloads, and nothing recovers the nodes' shape.
template <class Keys, class P>
concept KeysUnder = !Keys::byte_strings || (HasPayloads<P> && !P::durable);

namespace detail {
template <class P, class Keys>
struct NodePayload {
  using type = payload_field_t<P>;
  using pointer = type;
};
template <class P, class Keys>
requires(Keys::byte_strings) struct NodePayload<P, Keys> {
  using type = typename Keys::Payload*;
  using pointer = type;
};
template <class P, class Keys>
requires(!Keys::byte_strings && HasPayloads<P> &&
         requires { typename Keys::Handle; }) struct NodePayload<P, Keys> {
  using type = typename Keys::Handle;
  using pointer = typename Keys::Payload*;
};

// A Keys::Cached of no bytes (hashed byte strings: the hash is the key word, the rest is in the
// payload), with the calls an algorithm makes of a policy's immutable field.
template <class T>
struct EmptyField {
  T load() const noexcept { return {}; }
  T peek() const noexcept { return {}; }
  void init(T) noexcept {}
};
}  // namespace detail

// A node's payload field: the policy's (NoPayload, no bytes, without payloads), or, for
// byte-string Keys, a pointer to the Keys' own payload block, or a Keys's Handle (a pointer and
// what the policy keeps beside it: montage/key_value_payload.hpp's PayloadByUid), which is
// assigned from the pointer, node_payload_pointer_t.
template <class P, class Keys>
using node_payload_t = typename detail::NodePayload<P, Keys>::type;
template <class P, class Keys>
using node_payload_pointer_t = typename detail::NodePayload<P, Keys>::pointer;

// A node's Keys::Cached field: a policy field, or none when Cached has no bytes (put it under
// [[no_unique_address]]).
template <class P, class Keys>
using cached_field_t = std::conditional_t<std::is_empty_v<typename Keys::Cached>,
                                          detail::EmptyField<typename Keys::Cached>,
                                          typename P::template immutable<typename Keys::Cached>>;

// The sign of (node n's key - the probe's key): by the key words, then by Keys::tie. n has the
// fields key, value (Cached) and payload. Forced inline: it is a search's inner step, and GCC
// left it a call where a search is inlined into a large caller (the benchmark's loop over
// TransientByteStringSkipList: skiplist-bytes/transient at 100,000 keys ran 0.91-0.97x of its
// copy before algo/ took it, 0.98-1.02x inlined).
template <class Keys, class Node>
[[gnu::always_inline]] inline int compare_node(const Node* n, const typename Keys::Probe& key) {
  const Key order = n->key.load();
  if (order != key.order) return order < key.order ? -1 : 1;
  if constexpr (Keys::byte_strings)
    return Keys::tie(n->value.load(), n->payload, key);
  else
    return 0;
}

// f(key, value) of a node.
template <class Keys, class Node, class F>
void visit_node(const Node* n, F& f) {
  if constexpr (Keys::byte_strings)
    Keys::visit(n->key.load(), n->value.load(), n->payload, f);
  else
    f(n->key.load(), n->value.load());
}

// A node's value, as Keys::ValueOut.
template <class Keys, class Node>
typename Keys::ValueOut node_value(const Node* n) {
  if constexpr (Keys::byte_strings)
    return Keys::value(n->value.load(), n->payload);
  else
    return n->value.load();
}

// What a new node of key k and value v keeps besides its key word: its payload (made here:
// PoolFull, nothing changed) and its Cached.
template <class P, class Keys>
struct NewElement {
  node_payload_pointer_t<P, Keys> payload{};
  typename Keys::Cached cached;
};
template <class P, class Keys>
NewElement<P, Keys> new_element(typename P::Memory& mem, const typename Keys::Probe& key,
                                typename Keys::KeyArg k, typename Keys::ValueArg v) {
  if constexpr (Keys::byte_strings) {
    return {mem.template make_payload<Keys>(k, v), Keys::cached(key, v)};
  } else {
    NewElement<P, Keys> e{{}, v};
    if constexpr (HasPayloads<P>) e.payload = mem.new_payload(k, v);
    return e;
  }
}

}  // namespace pmds::algo
