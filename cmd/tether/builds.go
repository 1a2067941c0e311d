package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/internal/ablate"
)

// runBuilds runs `tether ablate --builds A,B,…`: the comparison against a
// tether serve of each build at once, interleaved round by round, every
// build's server a child process, the first's included; each build's
// results.json, and each later build against the first.
func runBuilds(ctx context.Context, cfg ablate.Config, costs costSettings, list, out string, stdout, stderr io.Writer) int {
	bins := splitList(list)
	if len(bins) < 2 || len(cfg.Speeds) != 1 || cfg.URL != "" {
		fmt.Fprintln(stderr, "tether: ablate: --builds takes two tether binaries or more, comma-separated, one --tps, and no --url")
		return 2
	}
	for _, d := range cfg.Modes {
		if d.Durable || d.Transport == clienttools.TransportWebTransport {
			fmt.Fprintf(stderr, "tether: ablate: --builds: %s runs against the in-process servers only; the builds' servers take the WebSocket and HTTP designs\n", d)
			return 2
		}
	}
	copies, err := os.MkdirTemp("", "tether-builds-")
	if err != nil {
		fmt.Fprintln(stderr, "tether: ablate: --builds:", err)
		return 1
	}
	defer os.RemoveAll(copies)
	servers := make([][]string, len(bins))
	for i, bin := range bins {
		abs, err := filepath.Abs(bin)
		var served string
		if err == nil {
			served, err = copyBuild(abs, filepath.Join(copies, strconv.Itoa(i+1)))
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate: --builds:", err)
			return 2
		}
		bins[i] = abs
		servers[i] = append([]string{served, "serve", "--addr", "127.0.0.1:0", "--tps", strconv.FormatFloat(cfg.Speeds[0], 'f', -1, 64),
			"--ttft", cfg.TTFT.String(), "--prefill-rate", strconv.FormatFloat(cfg.PrefillRate, 'f', -1, 64)}, costs.args()...)
		if cfg.TraceDir != "" {
			servers[i] = append(servers[i], "--traces", cfg.TraceDir)
		}
	}
	bar := newProgress(stderr)
	cfg.Progress = bar.update
	runs, err := ablate.RunBuilds(ctx, cfg, servers, serverEnv())
	bar.end()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	for i, r := range runs {
		dir := filepath.Join(out, fmt.Sprintf("build-%d", i+1))
		if err := writeResults(dir, r); err != nil {
			fmt.Fprintln(stderr, "tether: ablate:", err)
			return 1
		}
		fmt.Fprintf(stdout, "%c: %s → %s\n", 'A'+i, bins[i], filepath.Join(dir, "results.json"))
	}
	for i := 1; i < len(runs); i++ {
		changes, err := ablate.Compare(runs[0], runs[i])
		if err != nil {
			fmt.Fprintln(stderr, "tether: ablate:", err)
			return 1
		}
		fmt.Fprintf(stdout, "\n%c against A, %s interleaved round by round:\n", 'A'+i, ablate.Count(cfg.Reps, "round"))
		printChanges(stdout, changes)
	}
	return 0
}

// copyBuild copies the build at path into dir, as an executable of the same
// name, and returns the copy's path. Each build serves from a copy of its
// own, so that no build's code shares its pages with another's, nor with
// the clients' process: the usual "this one against mine" runs ablate from
// the first build. Against a copy of itself, that first build came out
// ahead in most rounds, in two runs of three (docs/measuring.md). A wrapper
// script (#!) runs where it is, as it may find what it runs beside itself:
// where that lies is its own to say.
func copyBuild(path, dir string) (string, error) {
	src, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer src.Close()
	var magic [2]byte
	if _, err := io.ReadFull(src, magic[:]); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if string(magic[:]) == "#!" {
		return path, nil
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	to := filepath.Join(dir, filepath.Base(path))
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return "", err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return to, err
}

// writeResults writes r to dir/results.json.
func writeResults(dir string, r *ablate.Results) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	err = r.WriteJSON(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
