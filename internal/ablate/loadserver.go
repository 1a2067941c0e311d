package ablate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// server is the load run's target: a child process of ours, or a URL.
type server struct {
	base string
	pid  int          // 0 for a URL: its CPU and memory are not measured
	hc   *http.Client // its clients' and the run's requests' (over TLS, trusting its certificate); nil: the default
	stop func()
}

// client is the HTTP client for s: its clients', and the run's requests'.
func (s *server) client() *http.Client {
	if s.hc == nil {
		return http.DefaultClient
	}
	return s.hc
}

// tls reports whether the server serves HTTPS (its address says so).
func (s *server) tls() bool { return strings.HasPrefix(s.base, "https://") }

// httpClient is the client of a server that cfg.ClientTLS is for; nil
// without one (server.client: the default).
func (cfg LoadConfig) httpClient() *http.Client {
	if cfg.ClientTLS == nil {
		return nil
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg.ClientTLS}}
}

// startServer starts cfg.Server and waits for its "listening on" line, or
// points at cfg.URL.
func startServer(ctx context.Context, cfg LoadConfig) (*server, error) {
	if cfg.URL != "" {
		return &server{base: cfg.URL, hc: cfg.httpClient(), stop: func() {}}, nil
	}
	if len(cfg.Server) == 0 {
		return nil, errors.New("ablate: a load run needs a server command or a URL")
	}
	cmd := exec.Command(cfg.Server[0], cfg.Server[1:]...)
	if len(cfg.ServerEnv) > 0 {
		cmd.Env = append(os.Environ(), cfg.ServerEnv...)
	}
	tail := &lastBytes{max: 4 << 10}
	cmd.Stderr = tail
	if cfg.ServerLog != nil {
		cmd.Stderr = io.MultiWriter(cfg.ServerLog, tail)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ablate: starting the server: %w", err)
	}
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	go io.Copy(io.Discard, out)
	url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		stop()
		return nil, fmt.Errorf("ablate: the server printed %q, not its address (%v); its log ends:\n%s", line, err, tail)
	}
	return &server{base: url + "/v1", pid: cmd.Process.Pid, hc: cfg.httpClient(), stop: stop}, nil
}

// lastBytes keeps the last max bytes written to it. It is safe for
// concurrent use (a child process's stderr is copied on a goroutine).
type lastBytes struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (l *lastBytes) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b = append(l.b, p...)
	if over := len(l.b) - l.max; over > 0 {
		l.b = append(l.b[:0], l.b[over:]...)
	}
	return len(p), nil
}

func (l *lastBytes) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.b)
}
