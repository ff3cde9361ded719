// lincheck — checks crash-lab histories (JSON lines, format in checker/history.go) for durable,
// buffered durable or detectable linearizability with porcupine, and prints one verdict per
// history: a JSON line (default) or a readable report (-text).
//
//	lincheck [-timeout 30s] [-text] [FILE...]    (no FILE: standard input)
//
// -timeout is porcupine's time limit for each partition of a history (one key of a map, or the
// whole object) of up to 100 operations, and as much more per further 100; a partition it does
// not decide is searched once more with 4 times its limit, and only then is the history
// undecided ("unknown"). Every partition gets its own limit, so a violation in one is reported
// whatever another does (checker.PartitionLimit).
//
// Several histories may follow each other in one stream; each verdict is printed (and flushed)
// as soon as its history's "end" line is read, so a program can keep one lincheck running and
// feed it history after history through a pipe. Exit status: 0 every history ok, 1 some
// violation, 2 malformed input, 3 some history undecided within the timeout.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"pmds/lincheck/checker"
)

func main() {
	// The crash lab keeps one lincheck per workload process and feeds it one small history at a
	// time; at Go's default GOGC (100) its few-MiB heap is collected every few histories. 400,
	// unless GOGC is set: 1,414 lab histories through a pipe, one at a time, took 0.90 s of
	// lincheck's CPU at 100 and 0.65 s at 400 (2-core AMD EPYC), for a few MiB more heap.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	// One OS thread runs Go code, unless GOMAXPROCS is set: the lab's histories are small, and
	// porcupine's goroutine per partition only woke idle threads (futex wake-ups, an IPI each on
	// a KVM guest) while the lab's own processes kept the cores busy. `pmds crashtest
	// --structure hash/linkfree --crashes 200 --process-crashes 0 --seed 7`, 3 alternating
	// rounds on a 2-core AMD EPYC: 8.3-9.1 s wall and 7.7-8.2 s CPU with the default, 7.7-8.7 s
	// and 6.9-7.7 s with 1.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	timeout := flag.Duration("timeout", 30*time.Second,
		"time limit per partition of up to 100 ops, retried once at 4x (0: none)")
	text := flag.Bool("text", false, "print a readable report instead of JSON lines")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: lincheck [-timeout D] [-text] [FILE...]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	status := 0
	worse := func(s int) {
		// violation (1) outranks unknown (3) and bad input (2) in the exit status
		if status == 0 || s == 1 {
			status = s
		}
	}
	process := func(r io.Reader, name string) {
		rd := checker.NewReader(r)
		for {
			h, err := rd.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			var v checker.Verdict
			if err != nil {
				var ie *checker.InputError
				if !errors.As(err, &ie) {
					fmt.Fprintf(os.Stderr, "lincheck: %s: %v\n", name, err)
					worse(2)
					return
				}
				v = checker.Verdict{Verdict: "error", Message: name + ": " + err.Error()}
				if h != nil {
					v.Meta = h.Meta
				}
			} else {
				v = checker.Check(h, *timeout)
			}
			switch v.Verdict {
			case "violation":
				worse(1)
			case "error":
				worse(2)
			case "unknown":
				worse(3)
			}
			if *text {
				printText(out, &v)
			} else {
				b, _ := json.Marshal(&v)
				out.Write(append(b, '\n'))
			}
			out.Flush()
		}
	}
	if flag.NArg() == 0 {
		process(os.Stdin, "stdin")
	}
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "lincheck: %v\n", err)
			worse(2)
			continue
		}
		process(f, name)
		f.Close()
	}
	out.Flush()
	os.Exit(status)
}

func printText(w io.Writer, v *checker.Verdict) {
	fmt.Fprintf(w, "%s", strings.ToUpper(v.Verdict))
	if v.Criterion != "" {
		fmt.Fprintf(w, " [%s]", v.Criterion)
	}
	if v.Object != "" {
		fmt.Fprintf(w, " %s", v.Object)
	}
	fmt.Fprintf(w, " (%d ops, %d pending, %d objects, %.1f ms)\n", v.Ops, v.Pending, v.Partitions, v.ElapsedMs)
	if v.Message != "" {
		fmt.Fprintf(w, "  %s\n", v.Message)
	}
	for _, l := range v.Excerpt {
		fmt.Fprintf(w, "    %s\n", l)
	}
	if len(v.Meta) > 2 {
		fmt.Fprintf(w, "  meta: %s\n", v.Meta)
	}
}
