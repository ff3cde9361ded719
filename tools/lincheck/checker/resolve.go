// Package checker — resolving pending operations before the search.
//
// An operation pending at the crash may have taken effect (at any point after its invocation)
// or not; porcupine tries every place for it, and a pending operation that stalled early in a
// long history (a thread descheduled by the OS just before the kill) multiplies the search by
// the history's length. Two exact reductions remove most of that:
//
//   - A pending op that changes nothing (contains, get, get_min, read, sync) can be dropped:
//     "not taken" allows everything "taken" allows (a pending sync promises nothing).
//   - Containers with unique values (queue, stack, priority queue; every value added at most
//     once, as the crash lab's workloads make them) under durable or detectable linearizability:
//     a value added and neither removed by a completed op nor present after recovery can only
//     have been taken by a pending remove (or never added). So each pending remove either did
//     not take effect, or took effect before the crash returning one of those missing values;
//     a pending add took effect exactly when its value is present, was removed, or is the value
//     some pending remove is assumed to return. Every assignment of missing values to pending
//     removes is one alternative history, with no unknown result left; the original history is
//     durably linearizable iff one alternative is (a pending remove returning "empty" changes
//     nothing, so "not taken" covers it).
package checker

// How many alternatives are tried before giving up the reduction (and checking the history as
// it is).
const maxAlternatives = 256

func readOnly(op *Op) bool {
	switch op.Name {
	case "contains", "get", "get_min", "read", "sync":
		return true
	}
	return false
}

func adding(kind Kind, op *Op) bool {
	switch kind {
	case KindQueue:
		return op.Name == "enqueue"
	case KindStack:
		return op.Name == "push"
	case KindPQ:
		return op.Name == "insert"
	}
	return false
}

func removing(kind Kind, op *Op) bool {
	switch kind {
	case KindQueue:
		return op.Name == "dequeue"
	case KindStack:
		return op.Name == "pop"
	case KindPQ:
		return op.Name == "delete_min"
	}
	return false
}

// resolvePending returns the alternative op lists to check (the history is fine iff one is).
func resolvePending(h *History, ops []*Op) [][]*Op {
	var kept []*Op
	for _, op := range ops {
		if !op.Done && !op.Forced && readOnly(op) {
			continue
		}
		kept = append(kept, op)
	}
	container := h.Kind == KindQueue || h.Kind == KindStack || h.Kind == KindPQ
	if !container || !h.HasRecovered || (h.Criterion != Durable && h.Criterion != Detectable) {
		return [][]*Op{kept}
	}
	if !uniqueAdds(h.Kind, h.Init, kept) {
		return [][]*Op{kept} // values are not unique: the reduction does not hold
	}
	added := map[uint64]bool{}
	for _, v := range h.Init {
		added[v] = true
	}
	removed := map[uint64]bool{}
	var removers, adders, rest []*Op
	for _, op := range kept {
		if adding(h.Kind, op) {
			added[op.Args[0]] = true
		}
		switch {
		case op.Done || op.Forced:
			if removing(h.Kind, op) && !op.Result.IsNull {
				removed[op.Result.Word] = true
			}
			rest = append(rest, op)
		case removing(h.Kind, op):
			removers = append(removers, op)
		case adding(h.Kind, op):
			adders = append(adders, op)
		default:
			rest = append(rest, op)
		}
	}
	if len(removers) == 0 && len(adders) == 0 {
		return [][]*Op{kept}
	}
	present := map[uint64]bool{}
	for _, v := range h.Recovered {
		present[v] = true
	}
	var missing []uint64
	for v := range added {
		if !removed[v] && !present[v] {
			missing = append(missing, v)
		}
	}
	sortWords(missing)

	// A missing value whose add completed (or was in the initial state) must have been taken by
	// a pending remove: alternatives that leave one untaken are not linearizable, and porcupine
	// would search the whole history to find that out (seconds per alternative on a long queue
	// history). Only alternatives covering every such value are built.
	mustCover := map[uint64]bool{}
	for _, v := range h.Init {
		if !removed[v] && !present[v] {
			mustCover[v] = true
		}
	}
	for _, op := range rest {
		if adding(h.Kind, op) && !removed[op.Args[0]] && !present[op.Args[0]] {
			mustCover[op.Args[0]] = true
		}
	}

	assigned := make([]int, len(removers)) // index into missing, or -1: not taken
	alternative := func() []*Op {
		alt := append([]*Op(nil), rest...)
		taken := map[uint64]bool{}
		for r, m := range assigned {
			if m < 0 {
				continue
			}
			forced := *removers[r]
			forced.Forced = true
			forced.Result = wordResult(missing[m])
			alt = append(alt, &forced)
			taken[missing[m]] = true
		}
		for _, a := range adders {
			v := a.Args[0]
			if present[v] || removed[v] || taken[v] {
				forced := *a
				forced.Forced = true
				forced.Result = nullResult
				alt = append(alt, &forced)
			}
		}
		return alt
	}

	var out [][]*Op
	used := map[int]bool{}
	uncovered := len(mustCover)
	var build func(i int) bool
	build = func(i int) bool {
		if len(out) >= maxAlternatives {
			return false
		}
		if uncovered > len(removers)-i {
			return true // too few removes left to take every value that must have been taken
		}
		if i == len(removers) {
			out = append(out, alternative())
			return true
		}
		assigned[i] = -1
		if !build(i + 1) {
			return false
		}
		for m := range missing {
			if used[m] {
				continue
			}
			used[m] = true
			assigned[i] = m
			if mustCover[missing[m]] {
				uncovered--
			}
			ok := build(i + 1)
			if mustCover[missing[m]] {
				uncovered++
			}
			used[m] = false
			if !ok {
				return false
			}
		}
		return true
	}
	if !build(0) {
		return [][]*Op{kept} // too many ways: check the history as it is
	}
	if len(out) == 0 {
		// No pending remove could have taken what is missing: not linearizable whatever the
		// pending ops did; the alternative where none took effect shows it.
		for i := range assigned {
			assigned[i] = -1
		}
		out = append(out, alternative())
	}
	return out
}

func sortWords(w []uint64) {
	for i := 1; i < len(w); i++ {
		for j := i; j > 0 && w[j] < w[j-1]; j-- {
			w[j], w[j-1] = w[j-1], w[j]
		}
	}
}
