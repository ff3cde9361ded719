// Package checker — the history format of the pmds crash lab and its parser.
//
// A history is a stream of JSON lines (one JSON object per line), written by the C++ crash lab
// (include/pmds/crashlab/history.hpp) and read here. Several histories may follow each other in
// one stream; each starts with a "header" line and ends with an "end" line.
//
//	{"type":"header","model":"set","criterion":"durable","meta":{...}}
//	    model: set | map | queue | stack | pq | register
//	    criterion: durable | buffered | detectable | linearizable (no crash expected)
//	    meta: any JSON object, copied into the verdict (structure name, seed, replay command)
//	{"type":"init","state":STATE}            contents before the first recorded operation
//	{"type":"op","thread":T,"op":NAME,"args":[...],"call":C,"ret":R,"result":X}
//	    call/ret: timestamps from one global counter (call read before invoking, ret after
//	    returning); an operation pending at the crash has no "ret" (and no "result").
//	{"type":"crash","time":C}                the crash (after every recorded timestamp)
//	{"type":"recovered","state":STATE}       contents read back after recovery (observation)
//	{"type":"report","thread":T,"taken":B,"result":X}
//	    detectable recoverability: after recovery, thread T's last invoked operation took effect
//	    (taken, with its response) or not
//	{"type":"end"}
//
// An op line of a buffered history may carry the epoch bound its structure promises
// (docs/ARCHITECTURE.md §4): "durable":true, the op must lie inside the recovered prefix (it
// linearized in an epoch the crash cannot lose); "lost":true, it must lie outside it (it ran in
// the epoch the crash undoes).
//
// Operations and results per model (keys, values and items are unsigned 64-bit integers;
// register values are doubles; "sync" is valid in every model and has no result):
//
//	set, map   insert(k[,v])->bool  remove(k)->bool  contains(k)->bool
//	           get(k)->v|null       put(k,v)->bool (true when k was absent)
//	queue      enqueue(v)->null     dequeue()->v|null
//	stack      push(v)->null        pop()->v|null
//	pq         insert(k)->null      delete_min()->k|null  get_min()->k|null
//	register   read()->x            write(x)->null        fetch_multiply(x)->x (value before)
//
// STATE per model: set/map {"keys":[[k,v],...]} (for a set the value may be omitted: [k]);
// queue {"items":[front,...,back]}; stack {"items":[bottom,...,top]}; pq {"items":[...]} (any
// order); register {"value":x}.
package checker

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"

	// goccy/go-json: encoding/json's API and errors (UseNumber, DisallowUnknownFields, the
	// same messages), decoding faster. Reading histories is a third of lincheck's time in the
	// crash lab: the 1,923 histories of one crashlab_sim_test case of list/linkfree
	// (PMDS_CRASHLAB_DUMP) took 0.97 s with encoding/json and 0.73 s with this, verdicts
	// identical (2026-12-05, 2-core AMD EPYC). Verdicts are still written with encoding/json
	// (main.go): few, and small.
	json "github.com/goccy/go-json"
)

// Kind of sequential object a history is checked against.
type Kind int

const (
	KindMap Kind = iota // set and map share one model: a key -> value function
	KindQueue
	KindStack
	KindPQ
	KindRegister
)

// Criterion a history is checked for (docs/ARCHITECTURE.md §4).
type Criterion string

const (
	Linearizable Criterion = "linearizable"
	Durable      Criterion = "durable"
	Buffered     Criterion = "buffered"
	Detectable   Criterion = "detectable"
)

// Result of one operation: unknown (pending), null, a bool, or a 64-bit word (register values
// are float64 bit patterns).
type Result struct {
	Known  bool
	IsNull bool
	IsBool bool
	Bool   bool
	Word   uint64
}

// Op is one recorded operation.
type Op struct {
	Thread int
	Name   string
	Args   []uint64
	Call   int64
	Ret    int64 // valid when Done
	Done   bool  // false: pending at the crash
	Result Result
	Line   int // line number in the input, for reports
	// Forced: a pending op the checker assumes took effect before the crash, with Result
	// (resolve.go); it is then linearized before the recovered state is observed.
	Forced bool
	// Buffered histories, the structure's epoch bound: the op lies inside the recovered prefix
	// (Durable) or outside it (Lost).
	Durable, Lost bool
}

// Report is a thread's post-recovery statement about its last invoked operation.
type Report struct {
	Thread int
	Taken  bool
	Result Result
	Line   int
}

// History is one parsed history.
type History struct {
	ModelName    string
	Kind         Kind
	Criterion    Criterion
	Meta         json.RawMessage
	Init         []uint64 // canonical state (see state.go); nil: empty
	Ops          []Op
	Crashed      bool
	CrashTime    int64
	Recovered    []uint64 // canonical observed state; valid when HasRecovered
	HasRecovered bool
	Reports      []Report
	// IgnoreValues: the observed state lists keys without values, so values are not compared
	// (every value is taken as 0). Not allowed with get/put, whose results are values.
	IgnoreValues bool
}

// InputError is a malformed history: a clear message naming the line.
type InputError struct {
	Line int
	Msg  string
}

func (e *InputError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

type rawLine struct {
	Type      string          `json:"type"`
	Model     string          `json:"model"`
	Criterion string          `json:"criterion"`
	Meta      json.RawMessage `json:"meta"`
	State     *rawState       `json:"state"`
	Thread    *int            `json:"thread"`
	Op        string          `json:"op"`
	Args      []json.Number   `json:"args"`
	Call      *int64          `json:"call"`
	Ret       *int64          `json:"ret"`
	Result    json.RawMessage `json:"result"`
	Time      *int64          `json:"time"`
	Taken     *bool           `json:"taken"`
	Durable   bool            `json:"durable"`
	Lost      bool            `json:"lost"`
}

type rawState struct {
	Keys  [][]json.Number `json:"keys"`
	Items []json.Number   `json:"items"`
	Value *json.Number    `json:"value"`
}

// Reader reads successive histories from a stream.
type Reader struct {
	sc   *bufio.Scanner
	line int
}

func NewReader(r io.Reader) *Reader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	return &Reader{sc: sc}
}

// Next returns the next history, io.EOF at the end of the stream, or an *InputError. After an
// input error the reader skips to the next "header" line on the following call.
func (rd *Reader) Next() (*History, error) {
	var h *History
	for rd.sc.Scan() {
		rd.line++
		text := bytes.TrimSpace(rd.sc.Bytes())
		if len(text) == 0 {
			continue
		}
		var l rawLine
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		dec.DisallowUnknownFields()
		if err := dec.Decode(&l); err != nil {
			if h == nil {
				continue // skipping after an error, or garbage before a header
			}
			return nil, rd.skip(&InputError{rd.line, "not a history line: " + err.Error()})
		}
		if l.Type == "header" {
			if h != nil {
				return nil, &InputError{rd.line, "header inside a history (missing \"end\")"}
			}
			var err error
			if h, err = newHistory(&l, rd.line); err != nil {
				return nil, err
			}
			continue
		}
		if h == nil {
			return nil, rd.skip(&InputError{rd.line, "line before any header"})
		}
		if l.Type == "end" {
			return h, h.validate()
		}
		if err := h.add(&l, rd.line); err != nil {
			return nil, rd.skip(err)
		}
	}
	if err := rd.sc.Err(); err != nil {
		return nil, err
	}
	if h != nil {
		return h, h.validate() // a stream cut after the last line still checks
	}
	return nil, io.EOF
}

// skip drops lines up to the next "end" so the following history can be read.
func (rd *Reader) skip(err error) error {
	for rd.sc.Scan() {
		rd.line++
		var l struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(rd.sc.Bytes(), &l) == nil && l.Type == "end" {
			break
		}
	}
	return err
}

func newHistory(l *rawLine, line int) (*History, error) {
	h := &History{ModelName: l.Model, Meta: l.Meta, Criterion: Criterion(l.Criterion)}
	switch l.Model {
	case "set", "map":
		h.Kind = KindMap
	case "queue":
		h.Kind = KindQueue
	case "stack":
		h.Kind = KindStack
	case "pq":
		h.Kind = KindPQ
	case "register":
		h.Kind = KindRegister
	default:
		return nil, &InputError{line, fmt.Sprintf("unknown model %q (set, map, queue, stack, pq, register)", l.Model)}
	}
	switch h.Criterion {
	case Linearizable, Durable, Buffered, Detectable:
	default:
		return nil, &InputError{line, fmt.Sprintf("unknown criterion %q (durable, buffered, detectable, linearizable)", l.Criterion)}
	}
	if len(h.Meta) == 0 {
		h.Meta = json.RawMessage("{}")
	}
	return h, nil
}

func (h *History) add(l *rawLine, line int) error {
	switch l.Type {
	case "init", "recovered":
		if l.State == nil {
			return &InputError{line, l.Type + " needs a \"state\""}
		}
		st, err := h.parseState(l.State, line)
		if err != nil {
			return err
		}
		if l.Type == "init" {
			h.Init = st
		} else {
			h.Recovered, h.HasRecovered = st, true
		}
	case "op":
		if l.Thread == nil || l.Call == nil || l.Op == "" {
			return &InputError{line, "op needs \"thread\", \"op\" and \"call\""}
		}
		op := Op{Thread: *l.Thread, Name: l.Op, Call: *l.Call, Line: line, Durable: l.Durable, Lost: l.Lost}
		if op.Durable && op.Lost {
			return &InputError{line, "an op cannot be both \"durable\" and \"lost\""}
		}
		if (op.Durable || op.Lost) && h.Criterion != Buffered {
			return &InputError{line, "\"durable\" and \"lost\" mark ops of buffered histories only"}
		}
		if err := h.checkSignature(&op, len(l.Args), line); err != nil {
			return err
		}
		for _, a := range l.Args {
			w, err := h.parseWord(a, line)
			if err != nil {
				return err
			}
			op.Args = append(op.Args, w)
		}
		if l.Ret != nil {
			if *l.Ret < op.Call {
				return &InputError{line, "ret before call"}
			}
			op.Ret, op.Done = *l.Ret, true
			r, err := h.parseResult(l.Result, line)
			if err != nil {
				return err
			}
			op.Result = r
		} else if len(l.Result) > 0 {
			return &InputError{line, "a pending op (no \"ret\") cannot have a result"}
		}
		h.Ops = append(h.Ops, op)
	case "crash":
		if l.Time == nil {
			return &InputError{line, "crash needs \"time\""}
		}
		h.Crashed, h.CrashTime = true, *l.Time
	case "report":
		if l.Thread == nil || l.Taken == nil {
			return &InputError{line, "report needs \"thread\" and \"taken\""}
		}
		r, err := h.parseResult(l.Result, line)
		if err != nil {
			return err
		}
		h.Reports = append(h.Reports, Report{Thread: *l.Thread, Taken: *l.Taken, Result: r, Line: line})
	default:
		return &InputError{line, fmt.Sprintf("unknown line type %q", l.Type)}
	}
	return nil
}

// validate checks what only the whole history shows.
func (h *History) validate() error {
	lastCall := map[int]int64{}
	pending := map[int]bool{}
	var maxTime int64
	for _, op := range h.Ops {
		if op.Call > maxTime {
			maxTime = op.Call
		}
		if op.Done && op.Ret > maxTime {
			maxTime = op.Ret
		}
		if pending[op.Thread] {
			return &InputError{op.Line, fmt.Sprintf("thread %d invokes an op after one that never returned", op.Thread)}
		}
		if c, ok := lastCall[op.Thread]; ok && op.Call < c {
			return &InputError{op.Line, fmt.Sprintf("thread %d's ops are not in call order", op.Thread)}
		}
		lastCall[op.Thread] = op.Call
		if !op.Done {
			pending[op.Thread] = true
		}
	}
	if h.Crashed && h.CrashTime < maxTime {
		return &InputError{0, fmt.Sprintf("crash time %d precedes a recorded timestamp %d", h.CrashTime, maxTime)}
	}
	if !h.Crashed {
		h.CrashTime = maxTime + 1
	}
	if h.IgnoreValues {
		for i := range h.Ops {
			op := &h.Ops[i]
			if op.Name == "get" || op.Name == "put" {
				return &InputError{op.Line, "a state without values cannot be checked against get/put"}
			}
			if op.Name == "insert" && len(op.Args) == 2 {
				op.Args = op.Args[:1]
			}
		}
		for i := 1; i < len(h.Init); i += 2 {
			h.Init[i] = 0
		}
		for i := 1; i < len(h.Recovered); i += 2 {
			h.Recovered[i] = 0
		}
	}
	if h.Criterion != Linearizable && !h.HasRecovered {
		return &InputError{0, "criterion " + string(h.Criterion) + " needs a \"recovered\" line"}
	}
	if len(pending) > 0 && !h.Crashed && h.Criterion != Linearizable {
		return &InputError{0, "pending ops but no crash line"}
	}
	return nil
}

var signatures = map[Kind]map[string][2]int{ // op name -> min, max argument count
	KindMap:      {"insert": {1, 2}, "remove": {1, 1}, "contains": {1, 1}, "get": {1, 1}, "put": {2, 2}, "sync": {0, 0}},
	KindQueue:    {"enqueue": {1, 1}, "dequeue": {0, 0}, "sync": {0, 0}},
	KindStack:    {"push": {1, 1}, "pop": {0, 0}, "sync": {0, 0}},
	KindPQ:       {"insert": {1, 1}, "delete_min": {0, 0}, "get_min": {0, 0}, "sync": {0, 0}},
	KindRegister: {"read": {0, 0}, "write": {1, 1}, "fetch_multiply": {1, 1}, "sync": {0, 0}},
}

func (h *History) checkSignature(op *Op, nargs int, line int) error {
	sig, ok := signatures[h.Kind][op.Name]
	if !ok {
		return &InputError{line, fmt.Sprintf("model %s has no op %q", h.ModelName, op.Name)}
	}
	if nargs < sig[0] || nargs > sig[1] {
		return &InputError{line, fmt.Sprintf("%s takes %d..%d arguments, got %d", op.Name, sig[0], sig[1], nargs)}
	}
	return nil
}

// parseWord reads an unsigned 64-bit integer, or for the register model a double (stored as its
// bit pattern; "inf", "-inf" and "nan" strings are not needed by JSON numbers and not accepted).
func (h *History) parseWord(n json.Number, line int) (uint64, error) {
	if h.Kind == KindRegister {
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil {
			return 0, &InputError{line, fmt.Sprintf("bad number %q", string(n))}
		}
		return math.Float64bits(f), nil
	}
	w, err := strconv.ParseUint(string(n), 10, 64)
	if err != nil {
		return 0, &InputError{line, fmt.Sprintf("bad unsigned 64-bit integer %q", string(n))}
	}
	return w, nil
}

func (h *History) parseResult(raw json.RawMessage, line int) (Result, error) {
	s := string(bytes.TrimSpace(raw))
	switch s {
	case "", "null":
		return Result{Known: true, IsNull: true}, nil
	case "true", "false":
		return Result{Known: true, IsBool: true, Bool: s == "true"}, nil
	}
	w, err := h.parseWord(json.Number(s), line)
	if err != nil {
		return Result{}, err
	}
	return Result{Known: true, Word: w}, nil
}

// parseState converts an observed state into the canonical form of state.go.
func (h *History) parseState(s *rawState, line int) ([]uint64, error) {
	words := func(ns []json.Number) ([]uint64, error) {
		out := make([]uint64, 0, len(ns))
		for _, n := range ns {
			w, err := h.parseWord(n, line)
			if err != nil {
				return nil, err
			}
			out = append(out, w)
		}
		return out, nil
	}
	switch h.Kind {
	case KindMap:
		type kv struct{ k, v uint64 }
		var kvs []kv
		seen := map[uint64]bool{}
		for _, pair := range s.Keys {
			if len(pair) < 1 || len(pair) > 2 {
				return nil, &InputError{line, "each key is [k] or [k, v]"}
			}
			w, err := words(pair)
			if err != nil {
				return nil, err
			}
			if seen[w[0]] {
				return nil, &InputError{line, fmt.Sprintf("key %d listed twice", w[0])}
			}
			seen[w[0]] = true
			e := kv{k: w[0]}
			if len(w) == 2 {
				e.v = w[1]
			} else {
				h.IgnoreValues = true // a set read back without values: compare presence only
			}
			kvs = append(kvs, e)
		}
		sort.Slice(kvs, func(i, j int) bool { return kvs[i].k < kvs[j].k })
		out := make([]uint64, 0, 2*len(kvs))
		for _, e := range kvs {
			out = append(out, e.k, e.v)
		}
		return out, nil
	case KindQueue, KindStack:
		return words(s.Items)
	case KindPQ:
		w, err := words(s.Items)
		if err != nil {
			return nil, err
		}
		sort.Slice(w, func(i, j int) bool { return w[i] < w[j] })
		return w, nil
	case KindRegister:
		if s.Value == nil {
			return nil, &InputError{line, "register state needs \"value\""}
		}
		w, err := h.parseWord(*s.Value, line)
		if err != nil {
			return nil, err
		}
		return []uint64{w}, nil
	}
	return nil, nil
}
