package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"path"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/tether-run/tether/hostedtools/mcp"
	"github.com/tether-run/tether/internal/netaddr"
	"github.com/tether-run/tether/internal/profiling"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/runtime/prommetrics"
	"github.com/tether-run/tether/runtime/record"
	"github.com/tether-run/tether/runtime/redisstore"
	"github.com/tether-run/tether/runtime/webtransport"
	"github.com/tether-run/tether/sampler"
)

// serve runs "tether serve": it prints "listening on http://HOST:PORT" once
// the socket is bound, and serves until ctx ends, then drains sessions.
func serve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newCommand("serve", `Usage: tether serve [flags]

Serves the OpenAI Responses API on /v1/responses: HTTP and SSE, WebSocket
(cached-state turns and suspended rollouts), WebTransport with --wt-addr,
and Chat Completions, with the models tether-scripted and replay:NAME (the
embedded traces, and those of --traces), and any the config names. It
prints "listening on http://HOST:PORT" once it serves, and drains on
SIGTERM or SIGINT.`, `tether serve --addr 127.0.0.1:8080 --tps 1000 --ttft 50ms
tether serve --config models.json --traces ./my-traces`, 0)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address; port 0 picks a free port")
	wtAddr := fs.String("wt-addr", "", "also serve WebTransport (and HTTP/3) on this UDP address, such as 127.0.0.1:8443; port 0 picks a free port")
	tlsCert := fs.String("tls-cert", "", "certificate chain (PEM): given, the API listener serves HTTPS and WSS with it (TLS 1.2 and later), and --wt-addr too; reloaded on SIGHUP. Without it the API is plain HTTP, and --wt-addr gets a self-signed ECDSA P-256 certificate valid 13 days, generated at start, whose SHA-256 is printed for pinning")
	tlsKey := fs.String("tls-key", "", "private key (PEM) of --tls-cert")
	origins := fs.String("origin", "", "origins besides the server's own whose pages may connect by WebSocket or WebTransport: host patterns, comma-separated (localhost:*,*.example.com)")
	configPath := fs.String("config", "", "JSON file of per-model settings (timing, upstream servers), MCP servers and a trace directory")
	traceDir := fs.String("traces", "", "directory of trace files (*.jsonl, as tether trace record writes them) to serve as replay:NAME besides the embedded ones (overrides the config's traces)")
	tps := fs.Float64("tps", 0, "output tokens per second; 0 is unpaced. Given, it overrides every model's")
	ttft := fs.Duration("ttft", 0, "fixed time to first token. Given, it overrides every model's")
	prefillRate := fs.Float64("prefill-rate", 0, "uncached prompt tokens read per second before the first token; 0 is free. Given, it overrides every model's")
	recordDir := fs.String("record", "", "keep a traffic log in this directory: every response's request, events and appends, one JSON object a line, in a new file tether-record-TIME-PID.jsonl, rotated and bounded by --record-file-bytes, --record-files and --record-bytes (docs/models.md); tether trace import makes replay traces of it")
	var recordOpts record.Options
	bytesVar(fs.FlagSet, &recordOpts.FileBytes, "record-file-bytes", record.DefaultFileBytes, "with --record: the size at which the log's file is rotated, at the end of a line: renamed tether-record-TIME-PID.N.jsonl (N from 1) and a new one begun; a record larger has a file of its own")
	fs.IntVar(&recordOpts.Files, "record-files", record.DefaultFiles, "with --record: the most files the log keeps, the one being written included; a rotation past it removes the oldest")
	bytesVar(fs.FlagSet, &recordOpts.Bytes, "record-bytes", record.DefaultBytes, "with --record: the most bytes the log's files hold together; past it the oldest are removed, and a record larger on its own is left out (and logged)")
	engineStep := fs.Duration("engine-step", 0, "least time between two steps of the simulated models' engine: tokens that fall due meanwhile go out together at the next step; 0 releases each as it falls due. Not with --engine-model, whose profile times each step")
	servedEngine := declareServedEngineFlags(fs.FlagSet)
	var opts runtime.Options // the flags below set its bounds; the pluggable parts are set once the flags are read
	bytesVar(fs.FlagSet, &opts.Limits.MaxFrame, "max-frame", runtime.DefaultMaxFrame, "largest WebSocket frame or HTTP body accepted: a bigger frame closes the socket with 1009, a bigger body gets 413")
	fs.DurationVar(&opts.Timeouts.WSMaxAge, "ws-max-age", runtime.DefaultWSMaxAge, "WebSocket connection age after which a create gets websocket_connection_limit_reached")
	fs.DurationVar(&opts.Suspension.Timeout, "suspend-timeout", runtime.DefaultSuspendTimeout, "how long a suspended rollout waits for client tool outputs before it fails with client_tool_timeout")
	fs.DurationVar(&opts.Suspension.ResumeWindow, "resume-window", runtime.DefaultResumeWindow, "how long a suspended rollout outlives its connection, waiting for response.resume")
	fs.DurationVar(&opts.Timeouts.Body, "body-timeout", runtime.DefaultBodyTimeout, "how long an HTTP request body may take to arrive (slower: 408)")
	fs.DurationVar(&opts.Timeouts.Write, "write-timeout", runtime.DefaultWriteTimeout, "how long a write to a client that does not read may stall before its stream is cut")
	fs.DurationVar(&opts.Timeouts.SlowClient, "slow-client-timeout", runtime.DefaultSlowClient, "how far behind a client may fall: a frame queued for it longer ago and not yet written closes a WebSocket with 1008 after a client_too_slow error (an SSE stream is cut)")
	fs.BoolVar(&opts.EveryDelta, "every-delta", false, "send every text and argument delta as the model made it, even to a client that is behind (by default those a client has not yet taken are merged)")
	fs.IntVar(&opts.Suspension.Max, "max-suspended", runtime.DefaultMaxSuspended, "most suspended rollouts the server holds at once (running, parked, detached or hibernated); more: 429 too_many_suspended")
	fs.DurationVar(&opts.Suspension.HibernateAfter, "hibernate-after", 0, "with --store redis://: a suspended rollout parked this long at a checkpointed pause leaves memory, and the append, cancel or resume that names it next rebuilds it from Redis, on any server; 0 never, 1ns at once")
	fs.DurationVar(&opts.Suspension.LeaseTTL, "lease-ttl", runtime.DefaultLeaseTTL, "with --store redis://: how long this server's lease on a durable rollout it runs, or whose client it serves, outlives its last renewal (every third of it); meanwhile a resume elsewhere gets response_owned_elsewhere, and a killed server's rollouts are taken over once it runs out")
	fs.IntVar(&opts.Tenant.Suspended, "tenant-suspended", runtime.DefaultTenantSuspended, "most suspended rollouts one tenant holds at once, with --api-keys; more: 429 tenant_suspended_limit")
	fs.IntVar(&opts.Limits.MaxInFlight, "max-inflight", runtime.DefaultMaxInFlight, "most responses running at once on one WebSocket connection; more wait in their lane")
	fs.IntVar(&opts.Limits.MaxLanes, "max-lanes", runtime.DefaultMaxLanes, "most distinct stream_id lanes one WebSocket connection may open (websocket_stream_limit_reached)")
	fs.IntVar(&opts.Limits.MaxQueued, "max-queued", runtime.DefaultMaxQueued, "most creates one WebSocket connection may have accepted and not finished (websocket_queue_full)")
	fs.IntVar(&opts.Limits.MaxConnections, "max-connections", runtime.DefaultMaxConnections, "most WebSocket connections open at once; more are refused before the upgrade (503 too_many_connections)")
	fs.IntVar(&opts.Tenant.Conns, "tenant-connections", runtime.DefaultTenantConns, "most WebSocket connections one tenant holds at once, with --api-keys (429 tenant_connection_limit)")
	fs.IntVar(&opts.Tenant.RPM, "tenant-rpm", 0, "most requests one tenant makes a minute (HTTP requests, WebSocket upgrades, response.create on a WebSocket), with --api-keys; more: 429 rate_limit_exceeded; 0 is no limit")
	fs.IntVar(&opts.Limits.MaxCallsPerStep, "max-calls-per-step", runtime.DefaultMaxCallsPerStep, "most tool calls one sampling step may make; more fail the response (too_many_tool_calls)")
	fs.IntVar(&opts.Limits.MaxOutputItems, "max-output-items", runtime.DefaultMaxOutputItems, "most output items one response may make; one that reaches it ends incomplete before its next step (max_output_items)")
	bytesVar(fs.FlagSet, &opts.Limits.MaxOutputBytes, "max-output-bytes", runtime.DefaultMaxOutputBytes, "most text and arguments one response's model may stream, its compactions' content counted too; one that reaches it ends incomplete before its next step (max_output_bytes)")
	fs.IntVar(&opts.Limits.MaxCompactions, "max-compactions", runtime.DefaultMaxCompactions, "most context compactions (context_management) one response may make; one that would make more ends incomplete (max_compactions)")
	fs.IntVar(&opts.Limits.MaxClientSecrets, "max-client-secrets", runtime.DefaultMaxClientSecrets, "most used client secrets this server remembers, each until it expires (about 60 bytes each), with --api-keys and --store memory; more: a handshake with a fresh secret gets 503 too_many_client_secrets until some expire")
	fs.IntVar(&opts.Background.Workers, "background-workers", runtime.DefaultBackgroundWorkers, "most background responses (background: true over HTTP) running at once; the rest wait, queued: the soonest completion window first, then a request continuing a line seen before (background_options.continuation_id), then in arrival order")
	fs.IntVar(&opts.Background.Queue, "background-queue", runtime.DefaultBackgroundQueue, "most background responses one tenant (the server, without --api-keys) has queued or running at once; more: 429 background_queue_full")
	fs.DurationVar(&opts.Background.Retention, "background-retention", runtime.DefaultBackgroundRetain, "how long an ended background response is kept to poll, stream again (starting_after) or cancel again; past it only a stored one (store: true) is there, to GET")
	apiKeys := fs.String("api-keys", "", "file of accepted API keys, one \"KEY TENANT\" a line, reloaded on SIGHUP (default: $"+keysEnv+" as KEY:TENANT,…; none: any request is served, on loopback only)")
	insecure := fs.Bool("insecure", false, "serve a non-loopback --addr without API keys")
	idleTimeout := fs.Duration("idle-timeout", 2*time.Minute, "how long an idle HTTP keep-alive connection is kept")
	fs.IntVar(&opts.Tenant.InFlight, "tenant-inflight", runtime.DefaultTenantInFlight, "most responses one tenant has in progress at once (suspended rollouts included), with --api-keys; more get 429 tenant_inflight_limit")
	storeURL := fs.String("store", "memory", "where store: true responses are kept: memory (this process), or redis://[:PASSWORD@]HOST:PORT/DB (rediss:// for TLS; unix:///PATH?db=DB for a Redis on this machine's socket), shared by every tether on that database: they read each other's stored responses and conversations, resume each other's suspended rollouts, and poll, stream again, cancel and take over each other's background responses")
	storeTTL := fs.Duration("store-ttl", redisstore.DefaultTTL, "with --store redis://: how long a stored response is kept")
	storeRecord := bytesFlag(fs.FlagSet, "store-record-bytes", redisstore.DefaultMaxRecordBytes, "with --store redis://: the largest response record kept (encoded); a larger one is served but not stored")
	storeConversation := bytesFlag(fs.FlagSet, "store-conversation-bytes", redisstore.DefaultMaxConversationBytes, "with --store redis://: the largest conversation of the Conversations API kept (its object and items, encoded, and its index of their ids); an addition past it, or a response's at its end, gets 413 request_too_large")
	bytesVar(fs.FlagSet, &opts.MemoryStore.MaxBytes, "store-bytes", 0, "with --store memory: bytes of store: true responses kept in all (what they hold in memory: their encoded size and their structs' and indexes' overhead), besides 100,000 records at most, and as many of the Conversations API's conversations (their items and metadata); past it the least recently written go first; 0: a quarter of --max-memory, or 1GiB without a budget")
	bytesVar(fs.FlagSet, &opts.MemoryStore.MaxTenantBytes, "tenant-store-bytes", 0, "with --store memory: bytes of responses one tenant keeps, and as many of its conversations; past it that tenant's own least recently written go first. A response or conversation larger than a bound on its own is not kept (the response is served all the same; the conversation's request gets 413); 0: a quarter of --store-bytes with --api-keys, all of it without. With --store redis://: the bytes of conversations one tenant keeps in Redis (counted as --store-conversation-bytes counts them; 0: 256MiB); an addition past it gets 429 tenant_store_limit")
	bytesVar(fs.FlagSet, &opts.Limits.CacheBytes, "cache-bytes", runtime.DefaultCacheBytes, "bytes one WebSocket connection caches (the latest response of each lane, estimated at 8 bytes a rendered token); past it the least recently cached lanes' go")
	fs.IntVar(&opts.Limits.CacheResponses, "ws-cache-responses", runtime.DefaultCacheResponses, "how many of each lane's latest responses a WebSocket connection caches: previous_response_id may name any of them (1, as OpenAI; more lets cached-state turns branch from an earlier turn)")
	bytesVar(fs.FlagSet, &opts.Limits.MaxMemory, "max-memory", 0, "the server's memory budget for what its clients make it hold: each request while served (a few times its size), its rollout's context as it grows, appended outputs and steering, a woken rollout's state, frames queued for slow readers, the connections' caches; what does not fit is refused server_memory_full (HTTP: 503 with Retry-After). 0: half of what the memory limit leaves beside the server's own state at start, none without a limit")
	bytesVar(fs.FlagSet, &opts.Limits.ConnBytes, "conn-bytes", runtime.DefaultConnBytes, "bytes of requests one WebSocket connection may have in flight (by frame size); past it a create is refused with 429 websocket_bytes_in_flight (one alone is always taken)")
	fs.DurationVar(&opts.Timeouts.Drain, "drain-timeout", runtime.DefaultDrainTimeout, "on SIGTERM or SIGINT, how long running responses may finish before they fail with server_shutting_down")
	searchCorpus := fs.String("search-corpus", "", "directory of documents for web_search (default: the embedded Go standard library docs)")
	searxngURL := fs.String("searxng-url", "", "SearXNG instance for web_search, instead of the local index")
	mcpAllow := fs.String("mcp-allow", "loopback", "which MCP servers a request's mcp tool may name by server_url: loopback (127.0.0.0/8, ::1, localhost), or host patterns, comma-separated (loopback,*.internal.example.com, or * for any); the config's mcp_servers are always allowed")
	mcpTimeout := fs.Duration("mcp-timeout", mcp.DefaultTimeout, "how long an MCP server may take to connect, list its tools, or answer one call")
	mcpMaxOutput := bytesFlag(fs.FlagSet, "mcp-max-output", mcp.DefaultMaxOutput, "largest MCP call output passed to the model, in bytes; the rest is cut")
	prefixCache := fs.String("prefix-cache", "on", "the models' prompt prefix cache: on (shared by content, scoped by prompt_cache_key) or off (every prompt uncached)")
	verbose := fs.Bool("v", false, "log debug messages to stderr (as --log-level debug)")
	logFormat := fs.String("log-format", "text", "logs on stderr: text (key=value) or json (one object a line)")
	logLevel := fs.String("log-level", "info", "least severe log written: debug, info (with an access line per HTTP request and per WebSocket session), warn or error")
	pprofOn := fs.Bool("pprof", false, "serve net/http/pprof's profiles on /debug/pprof/")
	memoryLimit := fs.String("memory-limit", "", "soft limit on the process's resident memory, such as 2GiB or 1500MiB (KB, MB, GB are powers of 1000), or off for none: the Go runtime's limit is what it leaves beside the binary's own pages, and the collector works harder near it instead of letting garbage grow the heap to twice what is live. Not given: $GOMEMLIMIT, else 9/10 of the cgroup's memory limit or 3/4 of the machine's memory, whichever is less")
	cost := costFlags(fs.FlagSet, "off")
	if code, ok := fs.parse(args, stdout, stderr); !ok {
		return code
	}
	flags := timingFlags{timing: sampler.Timing{TPS: *tps, TTFT: *ttft, PrefillRate: *prefillRate}, set: map[string]bool{}}
	fs.Visit(func(f *flag.Flag) { flags.set[f.Name] = true })
	for name, v := range map[string]float64{"tps": *tps, "prefill-rate": *prefillRate} {
		if err := checkRate(v); err != nil {
			fmt.Fprintf(stderr, "tether: --%s %v\n", name, err)
			return 2
		}
	}
	for name, d := range map[string]time.Duration{"ttft": *ttft, "engine-step": *engineStep} {
		if d < 0 {
			fmt.Fprintf(stderr, "tether: --%s %v is negative\n", name, d)
			return 2
		}
	}
	if name, v, ok := negativeFlag(fs.FlagSet); ok { // a bound: the runtime would refuse it by its option's name
		fmt.Fprintf(stderr, "tether: --%s %s: want 0 (the default) or more\n", name, v)
		return 2
	}
	costs, err := cost()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 2
	}

	if *prefixCache != "on" && *prefixCache != "off" {
		fmt.Fprintf(stderr, "tether: --prefix-cache %q: want on or off\n", *prefixCache)
		return 2
	}
	keyMap, err := loadKeys(*apiKeys)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 2
	}
	for name, a := range map[string]string{"addr": *addr, "wt-addr": *wtAddr} {
		if a != "" && keyMap == nil && !loopback(a) && !*insecure {
			fmt.Fprintf(stderr, "tether: --%s %s is not loopback and no API keys are set: give --api-keys FILE (or $%s), or --insecure to serve anyone who can connect\n", name, a, keysEnv)
			return 2
		}
	}
	if (*tlsCert == "") != (*tlsKey == "") {
		fmt.Fprintln(stderr, "tether: --tls-cert and --tls-key go together")
		return 2
	}
	var certs *certFiles
	if *tlsCert != "" {
		if certs, err = loadCertFiles(*tlsCert, *tlsKey); err != nil {
			fmt.Fprintln(stderr, "tether: --tls-cert:", err)
			return 2
		}
	}
	var keys *runtime.Keys
	if keyMap != nil {
		keys = new(runtime.Keys)
		keys.Store(keyMap)
	}
	mem, err := chooseMemory(*memoryLimit, opts.Limits.MaxMemory, systemMemory())
	if err != nil {
		fmt.Fprintln(stderr, "tether: --memory-limit:", err)
		return 2
	}
	if mem.setLimit {
		debug.SetMemoryLimit(cmp.Or(mem.limit, math.MaxInt64))
	}
	var cfg *Config
	if *configPath != "" {
		if cfg, err = LoadConfig(*configPath); err != nil {
			fmt.Fprintln(stderr, "tether:", err)
			return 1
		}
	}
	if *traceDir != "" {
		if cfg == nil {
			cfg = &Config{}
		}
		cfg.Traces = *traceDir
	}
	log, err := newLogger(stderr, *logFormat, *logLevel, *verbose)
	if err != nil {
		fmt.Fprintln(stderr, "tether serve:", err)
		return 2
	}

	renderer, err := sampler.NewRenderer()
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	engine := sampler.NewEngine()
	engine.SetStep(*engineStep)
	model, err := servedEngine.model(flags.set)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 2
	}
	if model != nil {
		engine.SetModel(model)
		log.Info("the local models are paced by a simulated inference engine: a comparison measures the engine effect too, not API overhead alone", "engine", model.Label())
	}
	served, err := models(cfg, flags, renderer, engine)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	if *prefixCache == "off" {
		configureCaches(served, sampler.PrefixCacheOptions{MaxTokens: -1})
	}
	var store runtime.Store
	var checkpoints runtime.Checkpoints     // a shared store makes suspended rollouts durable
	var backgrounds runtime.BackgroundStore // and shares background responses between its servers
	switch {
	case *storeURL == "memory":
	case strings.HasPrefix(*storeURL, "redis://"), strings.HasPrefix(*storeURL, "rediss://"), strings.HasPrefix(*storeURL, "unix://"):
		rs, err := openRedis(ctx, *storeURL, redisstore.Options{TTL: *storeTTL, MaxRecordBytes: *storeRecord,
			MaxConversationBytes: *storeConversation, MaxTenantConversationBytes: opts.MemoryStore.MaxTenantBytes}, &opts, log)
		if err != nil {
			fmt.Fprintln(stderr, "tether: --store:", err)
			return 2
		}
		defer rs.Close()
		store, checkpoints, backgrounds = rs, rs, rs
	default:
		fmt.Fprintf(stderr, "tether: --store %q: want memory, or redis://HOST:PORT/DB\n", *storeURL)
		return 2
	}
	metrics := prommetrics.New()
	metrics.WatchEngine(engine.Stats)
	hooks, err := costs.hooks(metrics.Hop)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	opts.Store, opts.Checkpoints, opts.Backgrounds, opts.Models, opts.Renderer = store, checkpoints, backgrounds, served, renderer
	opts.HostedTools = []runtime.Tool{webSearch(*searxngURL, *searchCorpus)}
	opts.MCP = mcp.NewClient(mcp.Options{Allow: allowHosts(splitList(*mcpAllow)), Timeout: *mcpTimeout,
		MaxOutput: *mcpMaxOutput, Servers: cfg.mcpServers()})
	opts.Observer, opts.Logger, opts.AccessLog, opts.Hooks = metrics, log, true, hooks
	opts.StoreTokens, opts.Keys, opts.OriginPatterns = costs.StoreTokens, keys, splitList(*origins)
	opts.EngineLate = engine.Late // a late step: the server is saturated, and its writers hold their flushes
	if *recordDir != "" {
		// 0 is the default, as in record.Options.
		if fb, b := cmp.Or(recordOpts.FileBytes, record.DefaultFileBytes), cmp.Or(recordOpts.Bytes, record.DefaultBytes); fb > b {
			fmt.Fprintf(stderr, "tether: --record-file-bytes %d is more than --record-bytes %d: a file would not fit in the log\n", fb, b)
			return 2
		}
		// A failed write is logged as it happens (once for a run of them),
		// not only at the end.
		recordOpts.Logger = log
		rec, err := record.Create(*recordDir, &recordOpts)
		if err != nil {
			fmt.Fprintln(stderr, "tether: --record:", err)
			return 1
		}
		// Closed after the server's Shutdown (deferred earlier, run later):
		// the drain's last events are in the log.
		defer func() {
			if err := rec.Close(); err != nil {
				log.Error("the traffic log is incomplete", "file", rec.Name(), "err", err)
			}
		}()
		log.Info("recording traffic", "file", rec.Name(), "file_bytes", recordOpts.FileBytes, "files", recordOpts.Files, "bytes", recordOpts.Bytes)
		opts.Recorder = rec
	}
	if goLimit := mem.settle(ownMemory()); mem.setLimit && goLimit > 0 { // its tokenizer and models loaded
		debug.SetMemoryLimit(goLimit)
	}
	opts.Limits.MaxMemory = mem.budget
	srv, err := runtime.NewServer(opts)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	metrics.WatchFlushHolds(srv.FlushHolds)
	srv.Handle("GET /metrics", metrics.Handler())
	if *pprofOn {
		profiling.Mount(srv)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: *idleTimeout,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)} // failed handshakes, and the like: a client's doing
	scheme := "http"
	if certs != nil {
		hs.TLSConfig, scheme = certs.config(), "https"
		certs.reloadOnHUP(ctx, log)
	}
	var wt *webtransport.Endpoint
	var wtHash string
	if *wtAddr != "" {
		if certs != nil {
			wt, err = webtransport.ListenTLS(srv, *wtAddr, certs.config())
			h := webtransport.CertificateHash(*certs.cur.Load()) // the first's: a renewed one needs no pin
			wtHash = hex.EncodeToString(h[:])
		} else {
			var cert tls.Certificate
			if cert, err = selfSigned(*wtAddr); err == nil {
				wt, err = webtransport.Listen(srv, *wtAddr, cert)
			}
			if err == nil {
				wtHash = wt.CertificateHash()
			}
		}
		if err != nil {
			fmt.Fprintln(stderr, "tether: --wt-addr:", err)
			return 1
		}
		defer wt.Close()
	}
	// An address a client can use: on every interface, loopback is one.
	fmt.Fprintf(stdout, "listening on %s://%s\n", scheme, netaddr.Dialable(ln.Addr()))
	if wt != nil {
		fmt.Fprintln(stdout, webTransportLine(strings.TrimSuffix(wt.URL(), "/v1"), wtHash))
	}
	if host, _, _ := net.SplitHostPort(ln.Addr().String()); net.ParseIP(host).IsUnspecified() {
		log.Info("serving on every interface", "addr", ln.Addr().String())
	}
	if keys == nil {
		log.Warn("no API keys: every request is served (give --api-keys FILE to require them)", "addr", ln.Addr().String())
	} else {
		log.Info("API keys required", "keys", keys.Len())
		if *apiKeys != "" {
			reloadKeys(ctx, *apiKeys, keys, log)
		}
	}
	log.Info("memory limit and budget", "limit", formatSize(mem.limit), "limit_from", mem.limitFrom, "budget", formatSize(mem.budget), "budget_from", mem.budgetFrom)
	if store == nil { // responses and conversations in this process
		bounds := srv.Options().MemoryStore
		log.Info("memory stores", "store_bytes", formatSize(int64(bounds.MaxBytes)), "tenant_store_bytes", formatSize(int64(bounds.MaxTenantBytes)))
	}

	errc := make(chan error, 1)
	go func() {
		if certs != nil {
			errc <- hs.ServeTLS(runtime.TLSListener(ln), "", "") // the certificate is TLSConfig's
			return
		}
		errc <- hs.Serve(ln)
	}()
	select {
	case err := <-errc:
		fmt.Fprintln(stderr, "tether:", err)
		return 1
	case <-ctx.Done():
	}
	// The drain, then time for the close handshakes.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), opts.Timeouts.Drain+10*time.Second)
	defer cancel()
	// Sessions and rollouts first: http.Server.Shutdown waits for handlers,
	// and the server's Shutdown is what ends them.
	srv.Shutdown(shutdownCtx)
	hs.Shutdown(shutdownCtx)
	for _, m := range served {
		if up, ok := m.(interface{ CloseIdleConnections() }); ok {
			up.CloseIdleConnections()
		}
	}
	return 0
}

// configureCaches empties (and bounds anew) the prefix cache of every model
// that keeps one.
func configureCaches(models map[string]runtime.Sampler, opts sampler.PrefixCacheOptions) {
	for _, m := range models {
		if c, ok := m.(interface{ Cache() *sampler.PrefixCache }); ok {
			c.Cache().Configure(opts)
		}
	}
}

// selfSigned is the WebTransport endpoint's certificate without
// --tls-cert: a self-signed one for the address's host (and localhost)
// that browsers accept by its hash.
func selfSigned(addr string) (tls.Certificate, error) {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, _, err := net.SplitHostPort(addr); err == nil && h != "" && !slices.Contains(hosts, h) {
		hosts = append(hosts, h)
	}
	return webtransport.SelfSignedCertificate(13*24*time.Hour, hosts...)
}

// newLogger is the server's logger: text or JSON lines on w, from level on
// (debug with verbose).
func newLogger(w io.Writer, format, level string, verbose bool) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	if verbose {
		l = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// allowHosts allows the URLs whose host matches a pattern (path.Match:
// *.example.com), or, for "loopback", is this machine.
func allowHosts(patterns []string) func(*url.URL) bool {
	return func(u *url.URL) bool {
		for _, p := range patterns {
			if p == "loopback" && mcp.Loopback(u) {
				return true
			}
			if ok, _ := path.Match(p, u.Hostname()); ok {
				return true
			}
		}
		return false
	}
}

// splitList splits a comma-separated flag value, dropping empty entries.
func splitList(s string) []string {
	var out []string
	for part := range strings.SplitSeq(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// negativeFlag is the first flag set to a negative number or duration: every
// bound serve takes is 0 (its default) or more.
func negativeFlag(fs *flag.FlagSet) (name, value string, ok bool) {
	fs.Visit(func(f *flag.Flag) {
		if ok {
			return
		}
		g, isGetter := f.Value.(flag.Getter)
		if !isGetter {
			return
		}
		switch v := g.Get().(type) {
		case int:
			ok = v < 0
		case int64:
			ok = v < 0
		case float64:
			ok = v < 0
		case time.Duration:
			ok = v < 0
		}
		if ok {
			name, value = f.Name, f.Value.String()
		}
	})
	return name, value, ok
}

// webTransportLine is the line serve prints for its WebTransport endpoint:
// its URL, and the SHA-256 of its certificate, which clients pin.
func webTransportLine(url, hash string) string {
	return fmt.Sprintf("webtransport on %s sha256=%s", url, hash)
}
