package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/trace"
	"strings"
	"testing"
	"time"
)

// TestAblateWaits: a trace of a loopback read that blocks is read and its
// waits printed; what is not a trace fails with the file named.
func TestAblateWaits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(io.Discard, c)
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("hello"))
	c.SetReadDeadline(time.Now().Add(time.Millisecond)) // no answer comes: the read blocks until then
	c.Read(make([]byte, 1))
	c.Close()
	<-done
	trace.Stop()

	dir := t.TempDir()
	good, bad := filepath.Join(dir, "server.trace"), filepath.Join(dir, "not.trace")
	os.WriteFile(good, buf.Bytes(), 0o644)
	os.WriteFile(bad, []byte("not a trace"), 0o644)

	var out, errOut bytes.Buffer
	if code := ablateWaits([]string{good}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{good + ": ", "Ps idle", "runnable by", "started", "network read"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
	out.Reset()
	errOut.Reset()
	if code := ablateWaits([]string{bad}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), bad) {
		t.Errorf("a file that is no trace: exit %d, %q", code, errOut.String())
	}
	if code := ablateWaits(nil, &out, &errOut); code != 2 {
		t.Errorf("no file: exit %d", code)
	}
}
