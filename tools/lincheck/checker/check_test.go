// Tests for the checker: hand-made good and bad histories for every model and criterion, the
// excerpt, input errors, and random correct histories that must all be accepted.
package checker

import (
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"
)

// history wraps body lines (JSON objects) between a header and an end line.
func history(model, criterion string, body ...string) string {
	return fmt.Sprintf("{\"type\":\"header\",\"model\":%q,\"criterion\":%q}\n%s\n{\"type\":\"end\"}\n",
		model, criterion, strings.Join(body, "\n"))
}

// op is a completed op line; pending(...) one without a response.
func op(thread int, name string, args string, call, ret int64, result string) string {
	return fmt.Sprintf(`{"type":"op","thread":%d,"op":%q,"args":[%s],"call":%d,"ret":%d,"result":%s}`,
		thread, name, args, call, ret, result)
}

func pending(thread int, name string, args string, call int64) string {
	return fmt.Sprintf(`{"type":"op","thread":%d,"op":%q,"args":[%s],"call":%d}`, thread, name, args, call)
}

func crash(t int64) string { return fmt.Sprintf(`{"type":"crash","time":%d}`, t) }

func keys(kv string) string  { return fmt.Sprintf(`{"type":"recovered","state":{"keys":[%s]}}`, kv) }
func items(it string) string { return fmt.Sprintf(`{"type":"recovered","state":{"items":[%s]}}`, it) }
func reportLine(thread int, taken bool, result string) string {
	return fmt.Sprintf(`{"type":"report","thread":%d,"taken":%t,"result":%s}`, thread, taken, result)
}

func checkText(t *testing.T, text string) Verdict {
	t.Helper()
	h, err := NewReader(strings.NewReader(text)).Next()
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	return Check(h, 10*time.Second)
}

func expectOK(t *testing.T, text string) {
	t.Helper()
	if v := checkText(t, text); v.Verdict != "ok" {
		t.Errorf("want ok, got %s [%s] %s: %s\n%s\nhistory:\n%s", v.Verdict, v.Criterion, v.Object, v.Message,
			strings.Join(v.Excerpt, "\n"), text)
	}
}

func expectViolation(t *testing.T, text, criterion, object string) Verdict {
	t.Helper()
	v := checkText(t, text)
	if v.Verdict != "violation" {
		t.Errorf("want violation, got %s\nhistory:\n%s", v.Verdict, text)
		return v
	}
	if v.Criterion != criterion || (object != "" && v.Object != object) {
		t.Errorf("want violation of %s on %q, got %s on %q: %s", criterion, object, v.Criterion, v.Object, v.Message)
	}
	if len(v.Excerpt) == 0 {
		t.Errorf("violation without an excerpt")
	}
	return v
}

// expectOKAfter expects model's history under criterion to be accepted when body is followed by
// each of the recovered states (one history per state): most tests try several states after one
// body.
func expectOKAfter(t *testing.T, model, criterion string, body []string, recovered ...string) {
	t.Helper()
	for _, rec := range recovered {
		expectOK(t, history(model, criterion, append(body, rec)...))
	}
}

// expectViolationAfter is expectOKAfter for states that violate the history's criterion on object.
func expectViolationAfter(t *testing.T, model, criterion string, body []string, object string, recovered ...string) {
	t.Helper()
	for _, rec := range recovered {
		expectViolation(t, history(model, criterion, append(body, rec)...), criterion, object)
	}
}

// ---- durable linearizability, sets and maps ---------------------------------------------------

func TestDurableSetCompletedInsertSurvives(t *testing.T) {
	ins := op(0, "insert", "5,50", 1, 2, "true")
	expectOK(t, history("set", "durable", ins, crash(3), keys("[5,50]")))
	v := expectViolation(t, history("set", "durable", ins, crash(3), keys("")), "durable", "key 5")
	if !strings.Contains(strings.Join(v.Excerpt, "\n"), "insert(5,50)") {
		t.Errorf("excerpt does not show the lost insert: %q", v.Excerpt)
	}
}

func TestDurableSetPendingMayOrMayNotSurvive(t *testing.T) {
	body := []string{op(0, "insert", "5,50", 1, 2, "true"), pending(1, "remove", "5", 3), pending(0, "insert", "6,60", 4), crash(9)}
	expectOKAfter(t, "set", "durable", body, keys("[5,50]"), keys(""), keys("[5,50],[6,60]"), keys("[6,60]"))
	// Key 7 was never inserted; value 51 was never written.
	expectViolationAfter(t, "set", "durable", body, "key 7", keys("[5,50],[7,70]"))
	expectViolationAfter(t, "set", "durable", body, "key 5", keys("[5,51]"))
}

func TestDurableSetCompletedRemoveSurvives(t *testing.T) {
	h := func(rec string) string {
		return history("set", "durable", op(0, "insert", "5,1", 1, 2, "true"), op(1, "remove", "5", 3, 4, "true"), crash(5), keys(rec))
	}
	expectOK(t, h(""))
	expectViolation(t, h("[5,1]"), "durable", "key 5")
}

func TestDurableSetConcurrentOps(t *testing.T) {
	// insert and remove overlap: either order; contains(5)=false at [3,8] forces remove-before...
	body := []string{
		op(0, "insert", "5,1", 1, 10, "true"),
		op(1, "remove", "5", 2, 9, "true"), // removal succeeded: insert linearized first
		op(2, "contains", "5", 11, 12, "false"),
		crash(13),
	}
	expectOKAfter(t, "set", "durable", body, keys(""))
	expectViolationAfter(t, "set", "durable", body, "key 5", keys("[5,1]"))
}

func TestNotLinearizableBeforeTheCrash(t *testing.T) {
	h := history("set", "durable", op(0, "contains", "5", 1, 2, "true"), crash(3), keys(""))
	expectViolation(t, h, "linearizability", "key 5")
}

func TestSetWithoutValues(t *testing.T) {
	expectOK(t, history("set", "durable", op(0, "insert", "5,50", 1, 2, "true"), crash(3), keys("[5]")))
	expectViolation(t, history("set", "durable", op(0, "insert", "5,50", 1, 2, "true"), crash(3), keys("[6]")), "durable", "")
}

func TestDurableMapPutGet(t *testing.T) {
	body := []string{
		op(0, "put", "3,30", 1, 2, "true"),
		op(1, "put", "3,31", 3, 4, "false"),
		op(0, "get", "3", 5, 6, "31"),
		pending(1, "put", "3,32", 7),
		crash(8),
	}
	expectOKAfter(t, "map", "durable", body, keys("[3,31]"), keys("[3,32]"))
	expectViolationAfter(t, "map", "durable", body, "key 3", keys("[3,30]"))
	bad := []string{op(0, "put", "3,30", 1, 2, "true"), op(0, "get", "3", 3, 4, "31"), crash(5), keys("[3,30]")}
	expectViolation(t, history("map", "durable", bad...), "linearizability", "key 3")
}

func TestInitialContents(t *testing.T) {
	init := `{"type":"init","state":{"keys":[[1,10],[2,20]]}}`
	expectOK(t, history("map", "durable", init, op(0, "remove", "1", 1, 2, "true"), crash(3), keys("[2,20]")))
	expectViolation(t, history("map", "durable", init, op(0, "remove", "1", 1, 2, "true"), crash(3), keys("")), "durable", "key 2")
}

// ---- buffered durable linearizability: one consistent cut ------------------------------------

func TestBufferedPrefix(t *testing.T) {
	body := []string{op(0, "insert", "1,1", 1, 2, "true"), op(1, "insert", "2,2", 3, 4, "true"), crash(5)}
	expectOKAfter(t, "set", "buffered", body, keys(""), keys("[1,1]"), keys("[1,1],[2,2]"))
	// {2} without {1}: each key alone is some prefix, but no single cut gives both.
	expectViolationAfter(t, "set", "buffered", body, "map", keys("[2,2]"))
	// The same recovered state is a durable-linearizability violation (insert(1) completed).
	expectViolationAfter(t, "set", "durable", body, "key 1", keys("[2,2]"))
}

func TestBufferedSync(t *testing.T) {
	body := []string{
		op(0, "insert", "1,1", 1, 2, "true"),
		op(0, "sync", "", 3, 4, "null"),
		op(1, "insert", "2,2", 5, 6, "true"),
		crash(7),
	}
	expectViolationAfter(t, "set", "buffered", body, "map", keys(""))
	expectOKAfter(t, "set", "buffered", body, keys("[1,1]"), keys("[1,1],[2,2]"))
}

func TestBufferedSyncConcurrentWithOp(t *testing.T) {
	// The sync overlaps the insert: it may linearize before it, so losing the insert is allowed.
	body := []string{op(0, "insert", "1,1", 1, 10, "true"), op(1, "sync", "", 2, 5, "null"), crash(11)}
	expectOKAfter(t, "set", "buffered", body, keys(""))
	// A sync invoked after the insert returned must keep it.
	body = []string{op(0, "insert", "1,1", 1, 2, "true"), op(1, "sync", "", 3, 5, "null"), crash(11)}
	expectViolationAfter(t, "set", "buffered", body, "map", keys(""))
	// A sync still pending at the crash promises nothing.
	body = []string{op(0, "insert", "1,1", 1, 2, "true"), pending(1, "sync", "", 3), crash(11)}
	expectOKAfter(t, "set", "buffered", body, keys(""))
}

// marked adds "durable":true or "lost":true to an op line.
func marked(line, mark string) string {
	return strings.TrimSuffix(line, "}") + fmt.Sprintf(`,%q:true}`, mark)
}

func TestBufferedEpochBound(t *testing.T) {
	// insert(1) linearized in an epoch the crash cannot lose ("durable"); insert(2) in the epoch
	// the crash undoes ("lost").
	first := op(0, "insert", "1,1", 1, 2, "true")
	second := op(1, "insert", "2,2", 3, 4, "true")
	plain := []string{first, second, crash(5)}
	expectOKAfter(t, "set", "buffered", plain, keys(""))
	bound := []string{marked(first, "durable"), marked(second, "lost"), crash(5)}
	expectOKAfter(t, "set", "buffered", bound, keys("[1,1]"))
	// Losing the durable one, or keeping the lost one, is a violation; without the marks both
	// are a prefix.
	expectViolationAfter(t, "set", "buffered", bound, "map", keys(""), keys("[1,1],[2,2]"))
	expectOKAfter(t, "set", "buffered", plain, keys("[1,1],[2,2]"))
	// The marks belong to buffered histories only.
	h, err := NewReader(strings.NewReader(history("set", "durable", marked(first, "durable"), crash(3), keys("")))).Next()
	var ie *InputError
	if h != nil || !errors.As(err, &ie) {
		t.Errorf("a durable history with an epoch mark was accepted: %v", err)
	}
}

func TestBufferedQueue(t *testing.T) {
	body := []string{
		op(0, "enqueue", "1", 1, 2, "null"),
		op(1, "enqueue", "2", 3, 4, "null"),
		op(0, "dequeue", "", 5, 6, "1"),
		crash(7),
	}
	expectOKAfter(t, "queue", "buffered", body, items(""), items("1"), items("1,2"), items("2"))
	expectViolationAfter(t, "queue", "buffered", body, "queue", items("2,1"))
}

// ---- other models, durable ------------------------------------------------------------------

func TestDurableQueue(t *testing.T) {
	body := []string{
		op(0, "enqueue", "1", 1, 2, "null"),
		op(1, "enqueue", "2", 3, 4, "null"),
		pending(0, "dequeue", "", 5),
		crash(6),
	}
	expectOKAfter(t, "queue", "durable", body, items("1,2"), items("2"))
	expectViolationAfter(t, "queue", "durable", body, "queue", items("1"), items("2,1"), items(""))
}

func TestDurableStack(t *testing.T) {
	body := []string{op(0, "push", "1", 1, 2, "null"), op(1, "push", "2", 3, 4, "null"), op(0, "pop", "", 5, 6, "2"), crash(7)}
	expectOKAfter(t, "stack", "durable", body, items("1"))
	expectViolationAfter(t, "stack", "durable", body, "stack", items("1,2"), items(""))
	bad := []string{op(0, "push", "1", 1, 2, "null"), op(1, "push", "2", 3, 4, "null"), op(0, "pop", "", 5, 6, "1"), crash(7), items("2")}
	expectViolation(t, history("stack", "durable", bad...), "linearizability", "stack")
}

func TestDurablePriorityQueue(t *testing.T) {
	body := []string{
		op(0, "insert", "5", 1, 2, "null"),
		op(1, "insert", "3", 3, 4, "null"),
		op(0, "get_min", "", 5, 6, "3"),
		op(1, "delete_min", "", 7, 8, "3"),
		crash(9),
	}
	expectOKAfter(t, "pq", "durable", body, items("5"))
	expectViolationAfter(t, "pq", "durable", body, "priority queue", items("3"), items("5,3"))
}

func TestDurableRegister(t *testing.T) {
	init := `{"type":"init","state":{"value":1.5}}`
	body := []string{init, op(0, "fetch_multiply", "2", 1, 2, "1.5"), pending(1, "fetch_multiply", "0.5", 3), crash(4)}
	value := func(x string) string { return fmt.Sprintf(`{"type":"recovered","state":{"value":%s}}`, x) }
	expectOKAfter(t, "register", "durable", body, value("3"), value("1.5"))
	expectViolationAfter(t, "register", "durable", body, "register", value("0.75"))
}

// ---- detectable recoverability --------------------------------------------------------------

func TestDetectableReports(t *testing.T) {
	body := []string{op(0, "insert", "1,1", 1, 2, "true"), pending(1, "insert", "5,5", 3), crash(4)}
	expectOK(t, history("set", "detectable", append(body, keys("[1,1],[5,5]"), reportLine(1, true, "true"))...))
	expectOK(t, history("set", "detectable", append(body, keys("[1,1]"), reportLine(1, false, "null"))...))
	// The report says taken but the key is gone, or not taken but the key is there.
	expectViolation(t, history("set", "detectable", append(body, keys("[1,1]"), reportLine(1, true, "true"))...), "detectable", "key 5")
	expectViolation(t, history("set", "detectable", append(body, keys("[1,1],[5,5]"), reportLine(1, false, "null"))...), "detectable", "key 5")
	// Taken with the wrong response.
	expectViolation(t, history("set", "detectable", append(body, keys("[1,1],[5,5]"), reportLine(1, true, "false"))...), "detectable", "key 5")
	// No report for the pending op.
	expectViolation(t, history("set", "detectable", append(body, keys("[1,1],[5,5]"))...), "detectable", "thread 1")
	// A completed op reported as not taken.
	expectViolation(t, history("set", "detectable", append(body, keys("[1,1],[5,5]"), reportLine(0, false, "null"), reportLine(1, true, "true"))...), "detectable", "thread 0")
	// The same pending op without reports is fine for plain durable linearizability.
	expectOK(t, history("set", "durable", append(body, keys("[1,1],[5,5]"))...))
}

func TestDetectableQueueResponse(t *testing.T) {
	body := []string{op(0, "enqueue", "1", 1, 2, "null"), op(0, "enqueue", "2", 3, 4, "null"), pending(1, "dequeue", "", 5), crash(6)}
	expectOK(t, history("queue", "detectable", append(body, items("2"), reportLine(1, true, "1"))...))
	expectViolation(t, history("queue", "detectable", append(body, items("2"), reportLine(1, true, "2"))...), "detectable", "queue")
	expectViolation(t, history("queue", "detectable", append(body, items("2"), reportLine(1, false, "null"))...), "detectable", "queue")
}

// ---- excerpts ----------------------------------------------------------------------------------

func TestExcerptIsShortForALongHistory(t *testing.T) {
	// 200 sequential ops on one queue, then a lost completed enqueue at the very end.
	var body []string
	var ts int64 = 1
	for i := 0; i < 100; i++ {
		body = append(body, op(i%2, "enqueue", fmt.Sprint(i+1), ts, ts+1, "null"))
		body = append(body, op(1-i%2, "dequeue", "", ts+2, ts+3, fmt.Sprint(i+1)))
		ts += 4
	}
	body = append(body, op(0, "enqueue", "1000", ts, ts+1, "null"), crash(ts+2), items(""))
	v := expectViolation(t, history("queue", "durable", body...), "durable", "queue")
	if len(v.Excerpt) > 5 {
		t.Errorf("excerpt of %d lines for one lost op:\n%s", len(v.Excerpt), strings.Join(v.Excerpt, "\n"))
	}
	if !strings.Contains(strings.Join(v.Excerpt, "\n"), "enqueue(1000)") {
		t.Errorf("excerpt misses the lost enqueue:\n%s", strings.Join(v.Excerpt, "\n"))
	}
}

// ---- input handling ----------------------------------------------------------------------------

func TestInputErrors(t *testing.T) {
	bad := map[string]string{
		"unknown model":      `{"type":"header","model":"tree","criterion":"durable"}`,
		"unknown criterion":  `{"type":"header","model":"set","criterion":"strict"}`,
		"unknown op":         history("set", "durable", op(0, "push", "1", 1, 2, "null"), crash(3), keys("")),
		"ret before call":    history("set", "durable", op(0, "insert", "1", 5, 2, "true"), crash(6), keys("")),
		"crash too early":    history("set", "durable", op(0, "insert", "1", 1, 2, "true"), crash(1), keys("")),
		"op after pending":   history("set", "durable", pending(0, "insert", "1", 1), op(0, "insert", "2", 2, 3, "true"), crash(4), keys("")),
		"no observation":     history("set", "durable", op(0, "insert", "1", 1, 2, "true"), crash(3)),
		"negative key":       history("set", "durable", op(0, "insert", "-1", 1, 2, "true"), crash(3), keys("")),
		"duplicate key":      history("set", "durable", crash(3), keys("[1,1],[1,2]")),
		"not json":           history("set", "durable", "insert 1"),
		"values for get/put": history("map", "durable", op(0, "get", "1", 1, 2, "null"), crash(3), keys("[1]")),
	}
	for name, text := range bad {
		_, err := NewReader(strings.NewReader(text)).Next()
		if err == nil {
			t.Errorf("%s: accepted", name)
		} else if _, ok := err.(*InputError); !ok {
			t.Errorf("%s: %T %v, want *InputError", name, err, err)
		}
	}
}

func TestStreamOfHistoriesRecoversFromABadOne(t *testing.T) {
	text := history("set", "durable", op(0, "insert", "1", 1, 2, "true"), crash(3), keys("[1]")) +
		history("set", "durable", "garbage") +
		history("set", "durable", op(0, "insert", "1", 1, 2, "true"), crash(3), keys(""))
	rd := NewReader(strings.NewReader(text))
	var got []string
	for {
		h, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			got = append(got, "error")
			continue
		}
		got = append(got, Check(h, time.Second).Verdict)
	}
	if strings.Join(got, ",") != "ok,error,violation" {
		t.Errorf("got %v", got)
	}
}

// ---- random correct histories are accepted ---------------------------------------------------

// simulate runs a random concurrent execution with explicit linearization points and returns a
// history that is correct by construction for the criterion (durable: the recovered state is the
// state at the crash; buffered: at a random earlier cut after the last completed sync).
func simulate(rng *rand.Rand, kind string, criterion string) string {
	type event struct {
		thread         int
		name, args     string
		call, lin, ret int64
		result         string
	}
	threads := 1 + rng.Intn(4)
	var evs []event
	for t := 0; t < threads; t++ {
		var ts int64 = int64(rng.Intn(5))
		for i := 0; i < 5+rng.Intn(15); i++ {
			call := ts + 1 + int64(rng.Intn(3))
			lin := call + 1 + int64(rng.Intn(6))
			ret := lin + 1 + int64(rng.Intn(6))
			e := event{thread: t, call: 2*call*int64(threads) + int64(t), lin: 2*lin*int64(threads) + int64(t), ret: 2*ret*int64(threads) + int64(t)}
			k := 1 + rng.Intn(4)
			switch kind {
			case "set":
				e.name = []string{"insert", "remove", "contains", "sync"}[rng.Intn(4)]
				if e.name == "insert" {
					e.args = fmt.Sprintf("%d,%d", k, rng.Intn(3))
				} else if e.name != "sync" {
					e.args = fmt.Sprint(k)
				}
			case "queue", "stack":
				add, remove := "enqueue", "dequeue"
				if kind == "stack" {
					add, remove = "push", "pop"
				}
				e.name = []string{add, remove, "sync"}[rng.Intn(3)]
				if e.name == add {
					e.args = fmt.Sprint(t*1000 + i) // unique values, as the lab's workloads
				}
			}
			evs = append(evs, e)
			ts = ret
		}
	}
	// The crash: after some linearization point.
	sort.Slice(evs, func(i, j int) bool { return evs[i].lin < evs[j].lin })
	crashAt := evs[rng.Intn(len(evs))].lin + 1
	// The cut: durable = crash; buffered = any lin point after the last completed sync's lin point.
	cut := crashAt
	if criterion == "buffered" {
		var floor int64
		for _, e := range evs {
			if e.name == "sync" && e.ret < crashAt && e.lin > floor {
				floor = e.lin
			}
		}
		var candidates []int64
		for _, e := range evs {
			if e.lin > floor && e.lin < crashAt {
				candidates = append(candidates, e.lin)
			}
		}
		candidates = append(candidates, crashAt)
		cut = candidates[rng.Intn(len(candidates))]
		if cut != crashAt {
			cut++ // just after that lin point
		}
	}
	m := map[int]int{}
	var q []int
	var observed string
	for i := range evs {
		e := &evs[i]
		if e.lin >= cut && observed == "" {
			observed = stateText(kind, m, q)
		}
		switch e.name {
		case "insert":
			var k, v int
			fmt.Sscanf(e.args, "%d,%d", &k, &v)
			_, present := m[k]
			if !present {
				m[k] = v
			}
			e.result = fmt.Sprint(!present)
		case "remove":
			var k int
			fmt.Sscan(e.args, &k)
			_, present := m[k]
			delete(m, k)
			e.result = fmt.Sprint(present)
		case "contains":
			var k int
			fmt.Sscan(e.args, &k)
			_, present := m[k]
			e.result = fmt.Sprint(present)
		case "enqueue", "push": // q holds the queue front first, the stack bottom first
			var v int
			fmt.Sscan(e.args, &v)
			q = append(q, v)
			e.result = "null"
		case "dequeue":
			if len(q) == 0 {
				e.result = "null"
			} else {
				e.result = fmt.Sprint(q[0])
				q = q[1:]
			}
		case "pop":
			if len(q) == 0 {
				e.result = "null"
			} else {
				e.result = fmt.Sprint(q[len(q)-1])
				q = q[:len(q)-1]
			}
		case "sync":
			e.result = "null"
		}
	}
	if observed == "" {
		observed = stateText(kind, m, q)
	}
	// Emit: ops invoked before the crash; those returning after it are pending; and no thread
	// invokes anything after a pending op.
	sort.Slice(evs, func(i, j int) bool { return evs[i].call < evs[j].call })
	var body []string
	var maxTs int64
	for _, e := range evs {
		if e.call >= crashAt {
			continue
		}
		if e.ret < crashAt {
			body = append(body, op(e.thread, e.name, e.args, e.call, e.ret, e.result))
			if e.ret > maxTs {
				maxTs = e.ret
			}
		} else {
			body = append(body, pending(e.thread, e.name, e.args, e.call))
		}
		if e.call > maxTs {
			maxTs = e.call
		}
	}
	body = append(body, crash(maxTs+1), observed)
	model := kind
	return history(model, criterion, body...)
}

func stateText(kind string, m map[int]int, q []int) string {
	if kind == "queue" || kind == "stack" {
		var parts []string
		for _, v := range q {
			parts = append(parts, fmt.Sprint(v))
		}
		return items(strings.Join(parts, ","))
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("[%d,%d]", k, v))
	}
	return keys(strings.Join(parts, ","))
}

// eachRandomHistory calls f with n histories of simulate, from a generator seeded with seed,
// cycling through the kinds and the criteria.
func eachRandomHistory(seed int64, n int, f func(i int, kind, criterion, text string)) {
	rng := rand.New(rand.NewSource(seed))
	for i := 0; i < n; i++ {
		kind := []string{"set", "queue", "stack"}[i%3]
		criterion := []string{"durable", "buffered"}[(i/3)%2]
		f(i, kind, criterion, simulate(rng, kind, criterion))
	}
}

func TestRandomCorrectHistoriesAreAccepted(t *testing.T) {
	eachRandomHistory(1, 600, func(i int, kind, criterion, text string) {
		if v := checkText(t, text); v.Verdict != "ok" {
			t.Fatalf("history %d (%s, %s): %s %s %s\n%s\n%s", i, kind, criterion, v.Verdict, v.Object, v.Message,
				strings.Join(v.Excerpt, "\n"), text)
		}
	})
}

// ---- pending operations resolved before the search (resolve.go) -------------------------------

func TestPendingRemoveResolvedToAMissingValue(t *testing.T) {
	// A dequeue pending since the start while 100 other ops ran: it took value 1 (missing from
	// both the recovered queue and every completed dequeue), or nothing.
	body := []string{pending(0, "dequeue", "", 1)}
	var ts int64 = 2
	body = append(body, op(1, "enqueue", "1", ts, ts+1, "null"))
	ts += 2
	for i := 2; i < 52; i++ {
		body = append(body, op(1, "enqueue", fmt.Sprint(i), ts, ts+1, "null"))
		body = append(body, op(2, "dequeue", "", ts+2, ts+3, fmt.Sprint(i)))
		ts += 4
	}
	// The pending dequeue took 1 before thread 2's first dequeue: recovered empty.
	expectOK(t, history("queue", "durable", append(body, crash(ts), items(""))...))
	// Without the pending dequeue, thread 2's first dequeue skips value 1: not linearizable.
	expectViolation(t, history("queue", "durable", append(body[1:], crash(ts), items(""))...), "linearizability", "queue")
	// Value 1 cannot be both taken by the pending dequeue and still present.
	expectViolation(t, history("queue", "durable", append(body, crash(ts), items("1,7"))...), "durable", "queue")
}

func TestPendingAddAndRemoveTogether(t *testing.T) {
	body := []string{
		op(0, "push", "1", 1, 2, "null"),
		pending(1, "push", "2", 3),
		pending(0, "pop", "", 4),
		crash(10),
	}
	// [1]: nothing pending took effect (or push 2 and pop of 2); [1 2]: push 2 only; []: pop of
	// 1; [2]: pop of 1, then push 2.
	expectOKAfter(t, "stack", "durable", body, items("1"), items("1,2"), items(""), items("2"))
	expectViolationAfter(t, "stack", "durable", body, "stack", items("2,1"), items("3"))
}

func TestDuplicateValuesAreCheckedWithoutTheReduction(t *testing.T) {
	body := []string{
		op(0, "enqueue", "5", 1, 2, "null"),
		op(0, "enqueue", "5", 3, 4, "null"),
		pending(1, "dequeue", "", 5),
		crash(6),
	}
	expectOKAfter(t, "queue", "durable", body, items("5"), items("5,5"))
	expectViolationAfter(t, "queue", "durable", body, "queue", items(""))
}

func TestPendingReadsAreDropped(t *testing.T) {
	body := []string{op(0, "insert", "5,1", 1, 2, "true"), pending(1, "contains", "5", 3), pending(0, "sync", "", 4), crash(5)}
	expectOKAfter(t, "set", "buffered", body, keys("[5,1]"), keys(""))
	expectOKAfter(t, "set", "durable", body, keys("[5,1]"))
}

func TestRandomHistoriesWithAnInventedElementAreRejected(t *testing.T) {
	eachRandomHistory(2, 300, func(i int, kind, criterion, text string) {
		// The recovered state gains an element no operation ever added.
		bad := strings.Replace(text, `"items":[`, `"items":[999999,`, 1)
		bad = strings.Replace(bad, `"keys":[`, `"keys":[[99,0],`, 1)
		bad = strings.Replace(bad, `999999,]`, `999999]`, 1)
		bad = strings.Replace(bad, `[99,0],]`, `[99,0]]`, 1)
		if v := checkText(t, bad); v.Verdict != "violation" {
			t.Fatalf("history %d (%s, %s): %s, want a violation\n%s", i, kind, criterion, v.Verdict, bad)
		}
	})
}

func TestOnlyAlternativesTakingEveryLostValueAreSearched(t *testing.T) {
	// Values 1 and 2 were enqueued by completed ops and are neither dequeued nor recovered: the
	// two pending dequeues took them (in some order); value 3's enqueue is pending and absent.
	body := []string{
		op(0, "enqueue", "1", 1, 2, "null"),
		op(0, "enqueue", "2", 3, 4, "null"),
		pending(1, "dequeue", "", 5),
		pending(2, "dequeue", "", 6),
		pending(0, "enqueue", "3", 7),
		crash(8),
	}
	text := history("queue", "durable", append(body, items(""))...)
	h, err := NewReader(strings.NewReader(text)).Next()
	if err != nil {
		t.Fatal(err)
	}
	ops := make([]*Op, 0, len(h.Ops))
	for i := range h.Ops {
		ops = append(ops, &h.Ops[i])
	}
	alternatives := resolvePending(h, ops)
	if len(alternatives) != 2 { // dequeue 1 takes 1 and dequeue 2 takes 2, or the reverse
		t.Fatalf("%d alternatives, want 2", len(alternatives))
	}
	for _, alt := range alternatives {
		taken := 0
		for _, op := range alt {
			if op.Name == "dequeue" && op.Forced && !op.Result.IsNull {
				taken++
			}
		}
		if taken != 2 {
			t.Fatalf("an alternative takes %d values, want 2", taken)
		}
	}
	expectOK(t, text)
	// One pending dequeue cannot take two lost values: a violation, whatever it did.
	expectViolation(t, history("queue", "durable", append(append([]string{}, body[0], body[1], body[2]), crash(8), items(""))...), "durable", "queue")
}

func TestAddsOrderedByTheRecoveredContents(t *testing.T) {
	// Two concurrent enqueues: either order may be recovered; a later one cannot precede them.
	body := []string{
		op(0, "enqueue", "1", 1, 4, "null"),
		op(1, "enqueue", "2", 2, 3, "null"),
		op(0, "enqueue", "3", 5, 6, "null"),
		crash(7),
	}
	expectOKAfter(t, "queue", "durable", body, items("1,2,3"), items("2,1,3"))
	expectViolationAfter(t, "queue", "durable", body, "queue", items("3,1,2"), items("1,2"))
	// A value dequeued before the crash was added before every recovered one.
	withDequeue := append(append([]string{}, body[:3]...), op(1, "dequeue", "", 8, 9, "2"), crash(10))
	expectOKAfter(t, "queue", "durable", withDequeue, items("1,3"))
	expectViolationAfter(t, "queue", "durable", withDequeue, "queue", items("3,1"))
	// A stack: the recovered bottom-to-top order is the order of the pushes.
	stack := []string{op(0, "push", "1", 1, 4, "null"), op(1, "push", "2", 2, 3, "null"), crash(5)}
	expectOKAfter(t, "stack", "durable", stack, items("2,1"), items("1,2"))
	expectViolationAfter(t, "stack", "durable", stack, "stack", items("1"))
}

// ---- time limits ---------------------------------------------------------------------------------

// hardKey is a partition porcupine cannot decide in milliseconds: 22 overlapping puts on key 1,
// then a get of a value none of them wrote (illegal, but only after every order of the puts,
// n*2^(n-1) states, is tried).
func hardKey() []string {
	body := []string{`{"type":"init","state":{"keys":[[1,1]]}}`}
	for i := 0; i < 22; i++ {
		body = append(body, op(i, "put", fmt.Sprintf("1,%d", 100+i), 1, 1000, "false"))
	}
	return append(body, op(0, "get", "1", 1001, 1002, "999"))
}

func TestAnUndecidedKeyDoesNotHideAnotherKeysViolation(t *testing.T) {
	// Key 2: a completed insert the recovery lost. Key 1 is checked first and not decided in the
	// limit; key 2 still gets its own limit and is reported.
	body := append(hardKey(), op(30, "put", "2,20", 1003, 1004, "true"), crash(1005), keys("[1,121]"))
	h, err := NewReader(strings.NewReader(history("map", "durable", body...))).Next()
	if err != nil {
		t.Fatal(err)
	}
	v := Check(h, 5*time.Millisecond)
	if v.Verdict != "violation" || v.Object != "key 2" {
		t.Errorf("want a violation on key 2, got %s on %q: %s", v.Verdict, v.Object, v.Message)
	}
}

func TestAPartitionNotDecidedTwiceIsUnknown(t *testing.T) {
	body := append(hardKey(), crash(1005), keys("[1,121]"))
	h, err := NewReader(strings.NewReader(history("map", "durable", body...))).Next()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	v := Check(h, 5*time.Millisecond)
	if v.Verdict != "unknown" || v.Object != "key 1" || !strings.Contains(v.Message, "neither within 5ms nor within 20ms") {
		t.Errorf("want unknown on key 1 after a retry, got %s on %q: %s", v.Verdict, v.Object, v.Message)
	}
	if elapsed := time.Since(start); elapsed < 25*time.Millisecond {
		t.Errorf("decided %s in %v: the limit and its retry were not both spent", v.Verdict, elapsed)
	}
}

func TestThePartitionLimitGrowsWithItsOperations(t *testing.T) {
	for _, c := range []struct {
		ops  int
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {100, time.Second}, {101, 2 * time.Second}, {250, 3 * time.Second}} {
		if got := PartitionLimit(time.Second, c.ops); got != c.want {
			t.Errorf("PartitionLimit(1s, %d) = %v, want %v", c.ops, got, c.want)
		}
	}
	if got := PartitionLimit(0, 500); got != 0 {
		t.Errorf("no limit gave %v", got)
	}
}

// porcupine caches states by stateHash (then compares them with statesEqual): states that differ
// in order, in one word, or only in the crash cut should not share a hash.
func TestStateHashSeparatesNeighbouringStates(t *testing.T) {
	states := []state{
		{},
		{observed: true},
		{items: []uint64{0}},
		{items: []uint64{1, 2}},
		{items: []uint64{2, 1}},
		{items: []uint64{1, 2}, observed: true},
		{items: []uint64{1, 3}},
		{items: []uint64{1 << 63, 2}},
	}
	seen := map[uint64]int{}
	for i, s := range states {
		h := stateHash(s)
		if j, ok := seen[h]; ok {
			t.Errorf("states %v and %v share the hash %#x", states[j], s, h)
		}
		seen[h] = i
		if stateHash(state{items: append([]uint64(nil), s.items...), observed: s.observed}) != h {
			t.Errorf("equal states %v hash differently", s)
		}
	}
}
