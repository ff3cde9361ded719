// Package checker — the sequential specifications (set/map, queue, stack, priority queue,
// register) as pure step functions on a canonical state, in the form porcupine needs.
package checker

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// state is an object's contents in canonical form, plus whether the post-crash observation has
// been linearized already (the crash "cut"):
//
//	map       sorted pairs k0,v0,k1,v1,...
//	queue     front .. back
//	stack     bottom .. top
//	pq        sorted multiset
//	register  one word, the float64 bit pattern
type state struct {
	items    []uint64
	observed bool
}

// input is what porcupine passes to Step: one recorded op, or the observation of the recovered
// state (observe != nil).
type input struct {
	op      *Op
	observe []uint64
	// The op's epoch bound (Op.Durable, Op.Lost), set when the history has an observation.
	beforeObservation, afterObservation bool
}

func statesEqual(a, b interface{}) bool {
	x, y := a.(state), b.(state)
	if x.observed != y.observed || len(x.items) != len(y.items) {
		return false
	}
	for i := range x.items {
		if x.items[i] != y.items[i] {
			return false
		}
	}
	return true
}

// stateHash is porcupine's Hash: FNV-1a over the state's words, a word at a time, each word
// mixed first (splitmix64's finalizer) so that all of its bits reach the result. Written out
// rather than through hash/fnv: porcupine hashes every state it caches, and fnv's byte-wise
// Write through the hash.Hash interface was 15% of the crash lab's CPU time on a queue entry.
func stateHash(a interface{}) uint64 {
	s := a.(state)
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for _, w := range s.items {
		w ^= w >> 30
		w *= 0xbf58476d1ce4e5b9
		w ^= w >> 27
		w *= 0x94d049bb133111eb
		w ^= w >> 31
		h = (h ^ w) * prime
	}
	if s.observed {
		h = (h ^ 1) * prime
	}
	return h
}

var nullResult = Result{Known: true, IsNull: true}

func boolResult(b bool) Result   { return Result{Known: true, IsBool: true, Bool: b} }
func wordResult(w uint64) Result { return Result{Known: true, Word: w} }

func sameResult(a, b Result) bool {
	if a.IsNull || b.IsNull {
		return a.IsNull == b.IsNull
	}
	if a.IsBool || b.IsBool {
		return a.IsBool == b.IsBool && a.Bool == b.Bool
	}
	return a.Word == b.Word
}

// apply runs one op of the sequential specification: its response and the next state.
func apply(kind Kind, s []uint64, op *Op) (Result, []uint64) {
	if op.Name == "sync" {
		return nullResult, s
	}
	switch kind {
	case KindMap:
		k := op.Args[0]
		i := sort.Search(len(s)/2, func(i int) bool { return s[2*i] >= k })
		present := i < len(s)/2 && s[2*i] == k
		var v uint64
		if len(op.Args) > 1 {
			v = op.Args[1]
		}
		switch op.Name {
		case "insert", "put":
			if present {
				if op.Name == "insert" { // Zuriel et al.: insert does not update an existing key
					return boolResult(false), s
				}
				n := append([]uint64(nil), s...)
				n[2*i+1] = v
				return boolResult(false), n
			}
			n := make([]uint64, 0, len(s)+2)
			n = append(append(append(n, s[:2*i]...), k, v), s[2*i:]...)
			return boolResult(true), n
		case "remove":
			if !present {
				return boolResult(false), s
			}
			n := make([]uint64, 0, len(s)-2)
			n = append(append(n, s[:2*i]...), s[2*i+2:]...)
			return boolResult(true), n
		case "contains":
			return boolResult(present), s
		case "get":
			if !present {
				return nullResult, s
			}
			return wordResult(s[2*i+1]), s
		}
	case KindQueue, KindStack:
		switch op.Name {
		case "enqueue", "push":
			n := make([]uint64, 0, len(s)+1)
			return nullResult, append(append(n, s...), op.Args[0])
		case "dequeue":
			if len(s) == 0 {
				return nullResult, s
			}
			return wordResult(s[0]), s[1:]
		case "pop":
			if len(s) == 0 {
				return nullResult, s
			}
			return wordResult(s[len(s)-1]), s[:len(s)-1]
		}
	case KindPQ:
		switch op.Name {
		case "insert":
			k := op.Args[0]
			i := sort.Search(len(s), func(i int) bool { return s[i] > k })
			n := make([]uint64, 0, len(s)+1)
			return nullResult, append(append(append(n, s[:i]...), k), s[i:]...)
		case "delete_min":
			if len(s) == 0 {
				return nullResult, s
			}
			return wordResult(s[0]), s[1:]
		case "get_min":
			if len(s) == 0 {
				return nullResult, s
			}
			return wordResult(s[0]), s
		}
	case KindRegister:
		cur := uint64(0)
		if len(s) > 0 {
			cur = s[0]
		}
		switch op.Name {
		case "read":
			return wordResult(cur), s
		case "write":
			return nullResult, []uint64{op.Args[0]}
		case "fetch_multiply":
			next := math.Float64frombits(cur) * math.Float64frombits(op.Args[0])
			return wordResult(cur), []uint64{math.Float64bits(next)}
		}
	}
	panic("checker: op " + op.Name + " not in the model (the parser should have refused it)")
}

// step is porcupine's Step: whether the op can take effect now with its recorded response.
func step(kind Kind) func(st, in, out interface{}) (bool, interface{}) {
	return func(st, in, out interface{}) (bool, interface{}) {
		s := st.(state)
		i := in.(*input)
		if i.observe != nil || i.op == nil {
			// The crash cut: the recovered contents must equal the state here.
			if s.observed {
				return false, s
			}
			if !statesEqual(state{items: s.items}, state{items: i.observe}) {
				return false, s
			}
			return true, state{items: s.items, observed: true}
		}
		recorded := out.(Result)
		if i.op.Name == "sync" && recorded.Known && s.observed {
			// Buffered durability: a completed sync lies inside the recovered prefix.
			return false, s
		}
		if (i.beforeObservation && s.observed) || (i.afterObservation && !s.observed) {
			return false, s // the structure's epoch bound puts it on the other side of the cut
		}
		res, next := apply(kind, s.items, i.op)
		if recorded.Known && !sameResult(res, recorded) {
			return false, s
		}
		return true, state{items: next, observed: s.observed}
	}
}

// orderedByObservation wraps a queue's or a stack's step (values unique) so that an add is
// refused as soon as it contradicts the recovered contents, instead of when the observation is
// finally stepped: porcupine tries concurrent adds in call order, and a wrong order among values
// that stay in the queue until the crash would otherwise show only at the observation, after
// every other choice in between was tried (seconds on a 100-op queue history). Before the
// observation is linearized, the state there must equal `observe`, so:
//   - observe[i] (i > 0) is added while observe[i-1] is in the state (added before it, and never
//     removed: it is there at the observation);
//   - queue: a value not in observe is added while observe[0] is not in the state (it would be
//     behind observe[0], which is never dequeued before the observation, so it could not have
//     left the queue).
//
// Both only prune orders that the observation step would refuse later.
func orderedByObservation(kind Kind, inner func(st, in, out interface{}) (bool, interface{}),
	observe []uint64) func(st, in, out interface{}) (bool, interface{}) {
	index := make(map[uint64]int, len(observe))
	for i, v := range observe {
		index[v] = i
	}
	holds := func(items []uint64, v uint64) bool {
		for _, w := range items {
			if w == v {
				return true
			}
		}
		return false
	}
	return func(st, in, out interface{}) (bool, interface{}) {
		s := st.(state)
		i := in.(*input)
		if !s.observed && i.op != nil && adding(kind, i.op) && len(i.op.Args) > 0 {
			if at, ok := index[i.op.Args[0]]; ok {
				if at > 0 && !holds(s.items, observe[at-1]) {
					return false, s
				}
			} else if kind == KindQueue && len(observe) > 0 && holds(s.items, observe[0]) {
				return false, s
			}
		}
		return inner(st, in, out)
	}
}

// ---- descriptions for reports -----------------------------------------------------------------

func formatWord(kind Kind, w uint64) string {
	if kind == KindRegister {
		return fmt.Sprintf("%g", math.Float64frombits(w))
	}
	return fmt.Sprintf("%d", w)
}

func formatResult(kind Kind, r Result) string {
	switch {
	case !r.Known:
		return "?"
	case r.IsNull:
		return "null"
	case r.IsBool:
		return fmt.Sprintf("%t", r.Bool)
	}
	return formatWord(kind, r.Word)
}

func formatState(kind Kind, s []uint64, ignoreValues bool) string {
	var parts []string
	switch kind {
	case KindMap:
		for i := 0; i+1 < len(s); i += 2 {
			if ignoreValues {
				parts = append(parts, fmt.Sprintf("%d", s[i]))
			} else {
				parts = append(parts, fmt.Sprintf("%d:%d", s[i], s[i+1]))
			}
		}
		return "{" + strings.Join(parts, " ") + "}"
	case KindRegister:
		if len(s) == 0 {
			return "0"
		}
		return formatWord(kind, s[0])
	}
	for _, w := range s {
		parts = append(parts, formatWord(kind, w))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func formatOp(kind Kind, op *Op) string {
	var args []string
	for _, a := range op.Args {
		args = append(args, formatWord(kind, a))
	}
	call := fmt.Sprintf("%s(%s)", op.Name, strings.Join(args, ","))
	if op.Forced {
		return fmt.Sprintf("t%d %-22s -> %-6s [%d, pending: assumed to have taken effect]", op.Thread, call, formatResult(kind, op.Result), op.Call)
	}
	if !op.Done {
		return fmt.Sprintf("t%d %-22s [%d, pending]", op.Thread, call, op.Call)
	}
	return fmt.Sprintf("t%d %-22s -> %-6s [%d, %d]", op.Thread, call, formatResult(kind, op.Result), op.Call, op.Ret)
}
