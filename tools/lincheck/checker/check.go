// Package checker — the crash criteria of docs/ARCHITECTURE.md §4 reduced to linearizability
// checks that porcupine decides, and the violation report (criterion, object, smallest excerpt).
//
// The reductions (timestamps t become 2t so that the crash fits between them):
//
//   - durable linearizability: completed ops keep their interval; an op pending at the crash
//     gets an unknown response and an interval open to infinity (it may take effect before the
//     crash, or never: linearized after the observation it changes nothing that is checked); the
//     recovered contents are one more op, "observe", invoked just after the crash, legal only
//     when the state equals the recovered contents. So every completed op precedes the
//     observation (it survived) and the whole history, crash removed, is linearizable. A set or
//     map is checked key by key (linearizability is local, Herlihy & Wing), the observation
//     split into one per key.
//   - buffered durable linearizability: the observation is concurrent with everything
//     (interval from before the first op to infinity): it may sit at any point of a
//     linearization of the whole pre-crash history, i.e. the recovered state is that after some
//     prefix; a completed sync() must lie inside that prefix (the model refuses it after the
//     observation), so everything that completed before the sync was invoked is in the prefix.
//     One cut across all keys: never partitioned.
//   - detectable recoverability: durable, after applying each thread's report about its last op:
//     "taken, with response r" makes a pending op complete with r just before the crash; "not
//     taken" removes it; a pending op with no report, or a report that contradicts a completed
//     op, is a violation by itself.
package checker

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// Verdict is the outcome for one history; it is printed as one JSON line.
type Verdict struct {
	Verdict    string          `json:"verdict"` // ok | violation | unknown | error
	Criterion  string          `json:"criterion,omitempty"`
	Object     string          `json:"object,omitempty"` // "key 17", "queue", ...
	Message    string          `json:"message,omitempty"`
	Excerpt    []string        `json:"excerpt,omitempty"`
	Meta       json.RawMessage `json:"meta,omitempty"`
	Ops        int             `json:"ops"`
	Pending    int             `json:"pending"`
	Partitions int             `json:"partitions"`
	ElapsedMs  float64         `json:"elapsed_ms"`
}

// partition is one independently checked object: its ops and, if there is one, its observation.
type partition struct {
	name    string
	init    []uint64
	ops     []*Op
	observe []uint64 // nil: no observation in this history
	hasObs  bool
}

// The time limits of the porcupine search, per partition (one key of a map, or the whole
// object): the caller's limit for a partition of up to limitOps operations, and that much more
// for each further limitOps, so a large partition is not starved by a limit sized for small
// ones. A partition left undecided is searched once more with retryFactor times its limit; only
// then is it "unknown". Every partition gets its own limit: one slow key never keeps another
// key's violation from being found.
const (
	limitOps    = 100
	retryFactor = 4
)

// PartitionLimit is the first search's time limit for a partition of n operations (0: none).
func PartitionLimit(limit time.Duration, n int) time.Duration {
	if limit <= 0 {
		return 0
	}
	return limit * time.Duration(1+max(0, n-1)/limitOps)
}

// Check decides the history's criterion. limit bounds the porcupine search of each partition
// (PartitionLimit; 0: none).
func Check(h *History, limit time.Duration) Verdict {
	start := time.Now()
	v := check(h, limit)
	v.Meta = h.Meta
	v.Ops = len(h.Ops)
	for i := range h.Ops {
		if !h.Ops[i].Done {
			v.Pending++
		}
	}
	v.ElapsedMs = float64(time.Since(start).Microseconds()) / 1000
	return v
}

// decide searches one partition: once with its limit, and if that is not enough once more with
// retryFactor times it.
func decide(h *History, p *partition, limit time.Duration) porcupine.CheckResult {
	l := PartitionLimit(limit, len(p.ops))
	res, _ := run(h, p, p.init, p.ops, p.hasObs, l, false)
	if res == porcupine.Unknown && l > 0 {
		res, _ = run(h, p, p.init, p.ops, p.hasObs, retryFactor*l, false)
	}
	return res
}

func check(h *History, limit time.Duration) Verdict {
	ops := make([]*Op, 0, len(h.Ops))
	for i := range h.Ops {
		ops = append(ops, &h.Ops[i])
	}
	recorded := ops
	if h.Criterion == Detectable {
		var bad *Verdict
		ops, bad = applyReports(h, ops)
		if bad != nil {
			return *bad
		}
	}
	// The history is ok when, for some resolution of the pending ops, every partition is legal;
	// a violation when every resolution has a partition found illegal; otherwise (some
	// resolution has partitions left undecided and none illegal) unknown.
	alternatives := resolvePending(h, ops)
	var failing, parts []*partition
	var undecided *partition // a partition of a resolution that only undecided ones kept from ok
	for ai, alt := range alternatives {
		altParts := partitions(h, alt)
		var altFailing, altUnknown []*partition
		for _, p := range altParts {
			switch decide(h, p, limit) {
			case porcupine.Illegal:
				altFailing = append(altFailing, p)
			case porcupine.Unknown:
				altUnknown = append(altUnknown, p)
			}
			if len(altFailing) > 0 && len(alternatives) > 1 {
				break // this resolution of the pending ops fails: try the next one
			}
		}
		if len(altFailing) == 0 && len(altUnknown) == 0 {
			return Verdict{Verdict: "ok", Criterion: string(h.Criterion), Partitions: len(altParts)}
		}
		if len(altFailing) == 0 && undecided == nil {
			undecided = altUnknown[0]
		}
		if ai == 0 {
			failing, parts = altFailing, altParts
		}
	}
	if undecided != nil {
		l := PartitionLimit(limit, len(undecided.ops))
		return Verdict{Verdict: "unknown", Criterion: string(h.Criterion), Object: undecided.name,
			Partitions: len(parts),
			Message: fmt.Sprintf("porcupine decided %s (%d ops) neither within %v nor within %v",
				undecided.name, len(undecided.ops), l, retryFactor*l)}
	}
	sort.SliceStable(failing, func(i, j int) bool { return len(failing[i].ops) < len(failing[j].ops) })
	var before *partition // the same object's ops as recorded, before any report
	for _, p := range partitions(h, recorded) {
		if p.name == failing[0].name {
			before = p
		}
	}
	v := report(h, failing[0], before, PartitionLimit(limit, len(failing[0].ops)))
	v.Partitions = len(parts)
	if len(failing) > 1 {
		v.Message += fmt.Sprintf(" (%d objects violate it; the smallest is shown)", len(failing))
	}
	if len(alternatives) > 1 {
		v.Message += fmt.Sprintf(" (for each of the %d ways the pending ops could have ended)", len(alternatives))
	}
	return v
}

// applyReports turns the detectability reports into completed or removed ops.
func applyReports(h *History, ops []*Op) ([]*Op, *Verdict) {
	last := map[int]*Op{}
	for _, op := range ops {
		last[op.Thread] = op // ops of one thread are in call order (validated)
	}
	reports := map[int]*Report{}
	for i := range h.Reports {
		r := &h.Reports[i]
		if reports[r.Thread] != nil {
			return nil, &Verdict{Verdict: "error", Message: fmt.Sprintf("line %d: second report for thread %d", r.Line, r.Thread)}
		}
		reports[r.Thread] = r
	}
	violation := func(object, msg string, lines ...string) *Verdict {
		return &Verdict{Verdict: "violation", Criterion: string(Detectable), Object: object, Message: msg, Excerpt: lines}
	}
	removed := map[*Op]bool{}
	replaced := map[*Op]*Op{}
	threads := make([]int, 0, len(last))
	for t := range last {
		threads = append(threads, t)
	}
	sort.Ints(threads)
	for _, t := range threads {
		op, r := last[t], reports[t]
		obj := fmt.Sprintf("thread %d", t)
		switch {
		case !op.Done && r == nil:
			return nil, violation(obj, "an op pending at the crash has no report after recovery", formatOp(h.Kind, op))
		case !op.Done && r.Taken:
			done := *op // a copy: the recorded history stays as it was for the pre-crash check
			done.Done, done.Ret, done.Result = true, h.CrashTime, r.Result
			replaced[op] = &done
		case !op.Done:
			removed[op] = true
		case r != nil && !r.Taken:
			return nil, violation(obj, "recovery reports a completed op as not taken", formatOp(h.Kind, op), "report: not taken")
		case r != nil && !sameResult(r.Result, op.Result):
			return nil, violation(obj, "recovery reports a completed op with another response", formatOp(h.Kind, op),
				"report: taken -> "+formatResult(h.Kind, r.Result))
		}
	}
	for t, r := range reports {
		if last[t] == nil && r.Taken {
			return nil, violation(fmt.Sprintf("thread %d", t), "recovery reports an op taken for a thread that invoked none")
		}
	}
	kept := make([]*Op, 0, len(ops))
	for _, op := range ops {
		if r := replaced[op]; r != nil {
			kept = append(kept, r)
		} else if !removed[op] {
			kept = append(kept, op)
		}
	}
	return kept, nil
}

// partitions splits a map history by key when the criterion allows it (durable, detectable,
// plain linearizability: all local properties); otherwise one partition.
func partitions(h *History, ops []*Op) []*partition {
	whole := &partition{name: objectName(h.Kind), init: h.Init, ops: ops, observe: h.Recovered, hasObs: h.HasRecovered}
	if h.Kind != KindMap || h.Criterion == Buffered {
		return []*partition{whole}
	}
	byKey := map[uint64]*partition{}
	get := func(k uint64) *partition {
		p := byKey[k]
		if p == nil {
			p = &partition{name: fmt.Sprintf("key %d", k), observe: []uint64{}, hasObs: h.HasRecovered}
			byKey[k] = p
		}
		return p
	}
	for _, op := range ops {
		if op.Name == "sync" {
			continue // no effect on a durably linearizable object's abstract state
		}
		p := get(op.Args[0])
		p.ops = append(p.ops, op)
	}
	for i := 0; i+1 < len(h.Init); i += 2 {
		get(h.Init[i]).init = h.Init[i : i+2]
	}
	for i := 0; i+1 < len(h.Recovered); i += 2 {
		get(h.Recovered[i]).observe = h.Recovered[i : i+2]
	}
	keys := make([]uint64, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	out := make([]*partition, 0, len(keys))
	for _, k := range keys {
		out = append(out, byKey[k])
	}
	return out
}

func objectName(k Kind) string {
	return [...]string{"map", "queue", "stack", "priority queue", "register"}[k]
}

// run checks one partition, from state init, with the given ops and optionally the observation.
// Returns the porcupine result and, for the observation-free op list, the operations as passed.
func run(h *History, p *partition, init []uint64, ops []*Op, withObs bool, timeout time.Duration,
	verbose bool) (porcupine.CheckResult, porcupine.LinearizationInfo) {
	hist := encode(h, ops, p.observe, withObs)
	model := porcupine.Model{
		Init:  func() interface{} { return state{items: append([]uint64(nil), init...)} },
		Step:  step(h.Kind),
		Equal: statesEqual,
		Hash:  stateHash,
	}
	if withObs && (h.Kind == KindQueue || h.Kind == KindStack) && uniqueAdds(h.Kind, init, ops) {
		model.Step = orderedByObservation(h.Kind, model.Step, p.observe)
	}
	if verbose {
		return porcupine.CheckOperationsVerbose(model, hist, timeout)
	}
	return porcupine.CheckOperationsTimeout(model, hist, timeout), porcupine.LinearizationInfo{}
}

// uniqueAdds reports whether every value is added at most once (initial contents included).
func uniqueAdds(kind Kind, init []uint64, ops []*Op) bool {
	seen := make(map[uint64]bool, len(init)+len(ops))
	for _, v := range init {
		if seen[v] {
			return false
		}
		seen[v] = true
	}
	for _, op := range ops {
		if adding(kind, op) && len(op.Args) > 0 {
			if seen[op.Args[0]] {
				return false
			}
			seen[op.Args[0]] = true
		}
	}
	return true
}

// encode builds porcupine's operations (see the package comment for the reductions). The
// observation, when present, is the last element.
func encode(h *History, ops []*Op, observe []uint64, withObs bool) []porcupine.Operation {
	crash := 2 * h.CrashTime
	infinity := int64(math.MaxInt64 / 2)
	out := make([]porcupine.Operation, 0, len(ops)+1)
	for _, op := range ops {
		in := &input{op: op}
		if withObs {
			in.beforeObservation, in.afterObservation = op.Durable, op.Lost
		}
		o := porcupine.Operation{ClientId: op.Thread, Input: in, Call: 2 * op.Call}
		switch {
		case op.Done:
			o.Return, o.Output = 2*op.Ret, op.Result
		case op.Forced:
			o.Return, o.Output = crash, op.Result // took effect before the crash
		default:
			o.Return, o.Output = infinity, Result{}
		}
		out = append(out, o)
	}
	if withObs {
		o := porcupine.Operation{ClientId: -1, Input: &input{observe: observe}, Output: Result{}, Return: infinity}
		if h.Criterion == Buffered {
			o.Call = -1 // anywhere in the linearization: a prefix of it
		} else {
			o.Call = crash + 1 // after every op that completed before the crash
		}
		out = append(out, o)
	}
	return out
}

// report builds the violation report for a failing partition: which criterion, and the
// smallest excerpt found.
func report(h *History, p, before *partition, timeout time.Duration) Verdict {
	v := Verdict{Verdict: "violation", Criterion: string(h.Criterion), Object: p.name}
	if p.hasObs && before != nil {
		if res, _ := run(h, before, before.init, before.ops, false, timeout, false); res == porcupine.Illegal {
			// Not a crash problem: the history is not linearizable even before the crash.
			v.Criterion = "linearizability"
			v.Message = "the operations before the crash are not linearizable"
			v.Excerpt = excerpt(h, before, false, timeout)
			return v
		}
	}
	switch h.Criterion {
	case Durable:
		v.Message = "the recovered state follows from no linearization in which every op completed before the crash took effect"
	case Detectable:
		v.Message = "the recovered state and the recovery reports follow from no linearization in which every completed op took effect"
	case Buffered:
		v.Message = "the recovered state is the state after no prefix of a linearization containing every completed sync"
	default:
		v.Message = "not linearizable"
	}
	v.Excerpt = excerpt(h, p, p.hasObs, timeout)
	return v
}

// How many ops of the folded prefix an excerpt shows as context.
const excerptContext = 2

// excerpt finds a short window that still fails: the ops before a real-time cut are replaced by
// the state a linearization of them reaches (porcupine's longest partial linearization gives the
// candidate cuts), keeping the latest cut from which the rest is still not linearizable.
func excerpt(h *History, p *partition, withObs bool, timeout time.Duration) []string {
	_, info := run(h, p, p.init, p.ops, withObs, timeout, true)
	var longest []int
	for _, part := range info.PartialLinearizations() {
		for _, seq := range part {
			if len(seq) > len(longest) {
				longest = seq
			}
		}
	}
	// Candidate cuts k: P[0:k] are completed ops, all returned before any other op was invoked.
	var cuts []int
	inPrefix := make([]bool, len(p.ops))
	var maxRet int64 = math.MinInt64
	for k := 1; k <= len(longest); k++ {
		id := longest[k-1]
		if id >= len(p.ops) || !p.ops[id].Done {
			break // the observation or a pending op: stop the prefix here
		}
		inPrefix[id] = true
		if p.ops[id].Ret > maxRet {
			maxRet = p.ops[id].Ret
		}
		minCall := int64(math.MaxInt64)
		for i, op := range p.ops {
			if !inPrefix[i] && op.Call < minCall {
				minCall = op.Call
			}
		}
		if maxRet < minCall && k < len(p.ops) {
			cuts = append(cuts, k) // (a window keeps at least one op: a bare state explains nothing)
		}
	}
	startState, rest, skipped := p.init, p.ops, 0
	var context []*Op // the last ops of the folded prefix, in linearization order
	for i := len(cuts) - 1; i >= 0; i-- {
		k := cuts[i]
		s := append([]uint64(nil), p.init...)
		member := map[int]bool{}
		for _, id := range longest[:k] {
			_, s = apply(h.Kind, s, p.ops[id])
			member[id] = true
		}
		var window []*Op
		for j, op := range p.ops {
			if !member[j] {
				window = append(window, op)
			}
		}
		if res, _ := run(h, p, s, window, withObs, timeout, false); res == porcupine.Illegal {
			startState, rest, skipped = s, window, k
			for _, id := range longest[max(0, k-excerptContext):k] {
				context = append(context, p.ops[id])
			}
			break
		}
	}
	sorted := append([]*Op(nil), rest...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Call < sorted[j].Call })
	var lines []string
	if skipped > 0 {
		lines = append(lines, fmt.Sprintf("state %s after a linearization of the %d earlier ops, ending:", formatState(h.Kind, startState, h.IgnoreValues), skipped))
		for _, op := range context {
			lines = append(lines, "  (earlier) "+formatOp(h.Kind, op))
		}
	} else {
		lines = append(lines, "initial state "+formatState(h.Kind, startState, h.IgnoreValues))
	}
	const maxLines = 60
	for i, op := range sorted {
		if i == maxLines {
			lines = append(lines, fmt.Sprintf("... %d more ops", len(sorted)-maxLines))
			break
		}
		lines = append(lines, formatOp(h.Kind, op))
	}
	if withObs {
		lines = append(lines, fmt.Sprintf("crash at %d; recovered %s", h.CrashTime, formatState(h.Kind, p.observe, h.IgnoreValues)))
	}
	inWindow := map[int]bool{}
	for _, op := range sorted {
		inWindow[op.Thread] = true
	}
	for _, r := range h.Reports {
		if !inWindow[r.Thread] {
			continue
		}
		lines = append(lines, fmt.Sprintf("report t%d: taken=%t result=%s", r.Thread, r.Taken, formatResult(h.Kind, r.Result)))
	}
	return lines
}
