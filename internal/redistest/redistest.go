// Package redistest runs a real redis-server for tests: on a free loopback
// port and a unix socket, with its data in a temporary directory (append-only, fsync on
// every write, so a restart keeps what was written), stopped when the test
// ends. Tests that need it skip, saying why, where the binary is absent;
// .ci/run installs it so that CI never skips them.
package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Server is one redis-server process, which the test may kill and start
// again on the same port and data.
type Server struct {
	tb     testing.TB
	bin    string
	dir    string
	socket string // its unix socket: a short path (a socket's is at most 107 bytes)
	port   int
	cmd    *exec.Cmd
}

// Start starts a redis-server, or skips the test when there is none.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Skip("no redis-server on PATH (.ci/run installs Debian's redis-server): Redis store tests skipped")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	sockDir, err := os.MkdirTemp("", "redis")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(sockDir) })
	s := &Server{tb: tb, bin: bin, dir: tb.TempDir(), socket: filepath.Join(sockDir, "redis.sock"), port: port}
	s.Restart()
	tb.Cleanup(s.Kill)
	return s
}

// URL is the server's address as the store takes it.
func (s *Server) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", s.port) }

// UnixURL is the server's unix socket as the store takes it.
func (s *Server) UnixURL() string { return "unix://" + s.socket + "?db=0" }

// Addr is HOST:PORT.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// Kill stops the server at once (SIGKILL), as a crash would.
func (s *Server) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server (again) on its port and data, and waits until
// it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	s.Kill()
	s.cmd = exec.Command(s.bin, "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--unixsocket", s.socket, "--unixsocketperm", "700", "--dir", s.dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "always", "--protected-mode", "no", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("redis-server did not answer on %s: %v", s.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond) // it is starting; nothing to wait on but its port
	}
}
