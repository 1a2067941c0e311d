package ablate

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"time"

	"github.com/tether-run/tether/clienttools"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/cost"
	"github.com/tether-run/tether/runtime/prommetrics"
	"github.com/tether-run/tether/runtime/redisstore"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// target is the server the trials of one speed run against.
type target struct {
	base    string
	durable string                 // the base URL of the in-process server that checkpoints (suspend+durable)
	journal *countedJournal        // that server's store
	wt      wtTarget               // its WebTransport endpoint, when a design needs it
	caches  []*sampler.PrefixCache // reset before each trial; none with URL
	srv     *runtime.Server        // nil with URL
	metrics *prommetrics.Metrics   // srv's; nil with URL
	stop    func()
}

// startTarget starts an in-process tether at timing on loopback, or points
// at cfg.URL.
func startTarget(cfg Config, timing sampler.Timing) (*target, error) {
	needWT := slices.ContainsFunc(cfg.Modes, Design.webTransport)
	needDurable := slices.ContainsFunc(cfg.Modes, func(d Design) bool { return d.Durable })
	if cfg.URL != "" {
		if needDurable {
			return nil, errors.New("ablate: suspend+durable runs against the in-process servers (one of them checkpoints), not --url: run it without --url, or compare two servers of your own as suspend")
		}
		if needWT && cfg.WTURL == "" {
			return nil, errors.New("ablate: the WebTransport designs against --url need the server's WebTransport address (--wt-url) too")
		}
		return &target{base: cfg.URL, wt: wtTarget{base: cfg.WTURL, hash: cfg.CertHash}, stop: func() {}}, nil
	}
	r, err := sampler.NewRenderer()
	if err != nil {
		return nil, err
	}
	traces := cfg.Traces
	if traces == nil {
		if traces, err = sampler.LoadTraces(); err != nil {
			return nil, err
		}
	}
	engine := sampler.NewEngine() // one batch for every backend, as in tether serve
	scripted := sampler.NewScripted(r, timing)
	scripted.SetEngine(engine)
	models := map[string]runtime.Sampler{sampler.ScriptedModel: scripted}
	caches := []*sampler.PrefixCache{scripted.Cache()}
	for _, tr := range traces {
		m := sampler.NewReplay(r, timing, tr)
		m.SetEngine(engine)
		models[sampler.ReplayPrefix+tr.Name] = m
		caches = append(caches, m.Cache())
	}
	metrics := prommetrics.New() // paths reads it
	costOpts := cfg.Cost
	costOpts.OnHop = metrics.Hop
	hooks, err := cost.New(costOpts)
	if err != nil {
		return nil, err
	}
	opts := runtime.Options{Models: models, Renderer: r, Hooks: hooks, StoreTokens: cfg.StoreTokens, Observer: metrics,
		EngineLate: engine.Late}
	var closeStore func() error
	var checkpoints runtime.Checkpoints = runtime.NewMemoryCheckpoints()
	if cfg.Store != "" && cfg.Store != "memory" {
		rs, err := redisstore.New(cfg.Store, redisstore.Options{})
		if err != nil {
			return nil, err
		}
		if err := rs.Ping(context.Background()); err != nil {
			rs.Close()
			return nil, fmt.Errorf("ablate: the store: %w", err)
		}
		opts.Store, checkpoints, closeStore = rs, rs, rs.Close
	}
	srv, base, stopSrv, err := serveInProcess(opts, metrics)
	if err != nil {
		return nil, err
	}
	tg := &target{base: base, caches: caches, srv: srv, metrics: metrics}
	var stopDurable func(context.Context)
	if needDurable {
		// The same models (and caches) and options, and checkpoints: one
		// server cannot checkpoint one design's rollouts and not another's.
		tg.journal = &countedJournal{Checkpoints: checkpoints}
		opts.Checkpoints = tg.journal
		if _, tg.durable, stopDurable, err = serveInProcess(opts, metrics); err != nil {
			stopSrv(context.Background())
			return nil, err
		}
	}
	var wt *webtransport.Endpoint
	if needWT {
		if wt, tg.wt, err = serveWebTransport(srv); err != nil {
			stopSrv(context.Background())
			return nil, err
		}
	}
	tg.stop = func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		stopSrv(ctx)
		if stopDurable != nil {
			stopDurable(ctx)
		}
		if wt != nil {
			wt.Close()
		}
		if closeStore != nil {
			closeStore()
		}
	}
	return tg, nil
}

// serveInProcess serves a tether with opts on a loopback port, its metrics
// on /metrics: its base URL, and how to stop it.
func serveInProcess(opts runtime.Options, metrics *prommetrics.Metrics) (*runtime.Server, string, func(context.Context), error) {
	srv, err := runtime.NewServer(opts)
	if err != nil {
		return nil, "", nil, err
	}
	srv.Handle("GET /metrics", metrics.Handler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return srv, "http://" + ln.Addr().String() + "/v1", func(ctx context.Context) {
		srv.Shutdown(ctx)
		hs.Shutdown(ctx)
	}, nil
}

// wtTarget is a server's WebTransport endpoint: its base URL and the hash
// of its certificate.
type wtTarget struct{ base, hash string }

// serveWebTransport serves srv over WebTransport on a loopback UDP port,
// with a self-signed certificate.
func serveWebTransport(srv *runtime.Server) (*webtransport.Endpoint, wtTarget, error) {
	cert, err := webtransport.SelfSignedCertificate(24*time.Hour, "127.0.0.1")
	if err != nil {
		return nil, wtTarget{}, err
	}
	wt, err := webtransport.Listen(srv, "127.0.0.1:0", cert)
	if err != nil {
		return nil, wtTarget{}, err
	}
	return wt, wtTarget{base: wt.URL(), hash: wt.CertificateHash()}, nil
}

// client is a client kit for design d against the target.
func (tg *target) client(cfg Config, d Design) *clienttools.Client {
	c := &clienttools.Client{BaseURL: tg.base, APIKey: cfg.APIKey, Encoding: d.Encoding}
	if d.Durable {
		c.BaseURL = tg.durable
	}
	if d.webTransport() {
		c.BaseURL, c.Transport, c.CertHash = tg.wt.base, clienttools.TransportWebTransport, tg.wt.hash
	}
	return c
}
