package waits_test

import (
	"bytes"
	"io"
	"net"
	"runtime/trace"
	"sync"
	"testing"
	"time"

	"github.com/tether-run/tether/internal/waits"
)

// TestRead traces loopback connections whose clients write, then block in
// a read that no answer ends but its deadline, and finds those waits as
// network reads, besides the goroutines started.
func TestRead(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	const conns, messages = 8, 20
	var wg sync.WaitGroup
	wg.Go(func() {
		for range conns {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { // a reader: each message wakes it
				defer c.Close()
				io.Copy(io.Discard, c)
			})
		}
	})
	for range conns {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer c.Close()
			for range messages {
				c.Write([]byte("append"))
				var b [1]byte
				c.SetReadDeadline(timeSoon()) // no answer comes: this read blocks until then
				c.Read(b[:])
			}
		})
	}
	wg.Wait()
	trace.Stop()

	rep, err := waits.Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	reads := rep.Kind(waits.ReadByP).N + rep.Kind(waits.ReadByMonitor).N + rep.Kind(waits.ReadOther).N
	if reads < conns || rep.Kind(waits.Started).N < 2*conns {
		t.Errorf("network reads %d (want at least %d), started %d (want at least %d): %+v", reads, conns, rep.Kind(waits.Started).N, 2*conns, rep.Kinds)
	}
	if rep.Span <= 0 || rep.Idle < 0 || rep.Idle > 1 {
		t.Errorf("span %v, idle %v", rep.Span, rep.Idle)
	}
	for _, s := range rep.Kinds {
		if s.N == 0 || s.P50 > s.P90 || s.P90 > s.Max || s.Mean > s.Max || s.Mean < 0 {
			t.Errorf("%s: %+v", s.Kind, s)
		}
	}
}

// TestReadRefuses: what is not a trace is an error, not a report.
func TestReadRefuses(t *testing.T) {
	if _, err := waits.Read(bytes.NewReader([]byte("not a trace"))); err == nil {
		t.Fatal("read a report from no trace")
	}
}

func timeSoon() time.Time { return time.Now().Add(200 * time.Microsecond) }
