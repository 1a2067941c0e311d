// Package prommetrics exports what a tether server measures to Prometheus:
// a runtime.Observer whose collectors live on a registry of its own (two
// servers in one process do not share counters), and the handler that
// serves it. It is an optional layer: package runtime does not import
// Prometheus.
//
//	m := prommetrics.New()
//	srv, _ := runtime.NewServer(runtime.Options{Observer: m})
//	srv.Handle("GET /metrics", m.Handler())
package prommetrics

import (
	"net/http"
	"regexp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tether-run/tether/protocol"
	"github.com/tether-run/tether/runtime"
	"github.com/tether-run/tether/sampler"
)

// Metrics is a server's Prometheus collectors. It is safe for concurrent
// use, and its observations never block.
type Metrics struct {
	reg       *prometheus.Registry
	phase     *prometheus.HistogramVec // per response: tether_phase_seconds
	step      *prometheus.HistogramVec // per sampling step: tether_step_seconds
	frame     *prometheus.HistogramVec // per frame: tether_frame_seconds
	responses *prometheus.CounterVec   // tether_responses_total
	pauses    prometheus.Counter       // tether_pauses_total
	tokens    *prometheus.CounterVec   // tether_render_tokens_total
	safety    prometheus.Counter       // tether_safety_flags_total
	hops      *prometheus.CounterVec   // tether_simulated_hops_total

	// Looked up once: they are observed per frame and per step.
	outboxObs, writeObs                 prometheus.Observer
	stepFirst, stepSample, stepToolsObs prometheus.Observer
	rendered, cached                    prometheus.Counter
}

var _ runtime.Observer = (*Metrics)(nil)

// latencyBuckets span 5 µs to 80 s: a frame's write to a whole rollout.
var latencyBuckets = prometheus.ExponentialBuckets(5e-6, 4, 13)

// New returns a server's collectors, registered on a registry of their own
// with the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	pathLabels := []string{"transport", "design", "state"}
	m.phase = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tether_phase_seconds",
		Help:    "Time a response spent in each phase (see protocol.Timings): decode, queue, load, validate, safety, render, first_token, sample, tools, store, hop (simulated), encode, outbox, write, total.",
		Buckets: latencyBuckets,
	}, append([]string{"phase"}, pathLabels...))
	m.step = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tether_step_seconds",
		Help:    "Time one sampling step spent in each phase: first_token, sample, tools.",
		Buckets: latencyBuckets,
	}, []string{"phase"})
	m.frame = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "tether_frame_seconds",
		Help:    "Time one outgoing frame waited in its connection's queue (outbox) and took to write (write).",
		Buckets: latencyBuckets,
	}, []string{"stage"})
	m.responses = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_responses_total",
		Help: "Responses ended, by path and status (abandoned: ended with nobody to tell, its client gone, the server shutting down, or a detached rollout not resumed in time).",
	}, append(pathLabels, "status"))
	m.pauses = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tether_pauses_total",
		Help: "Pauses of suspended rollouts for client tool outputs (response.done).",
	})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_render_tokens_total",
		Help: "Prompt tokens rendered (tokenized) or taken from a cache without rendering.",
	}, []string{"source"})
	m.safety = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "tether_safety_flags_total",
		Help: "Patterns the lexical safety classifier found in request text.",
	})
	m.hops = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tether_simulated_hops_total",
		Help: "Simulated service calls made (a deliberate wait of cost.Options.HopLatency each), by name.",
	}, []string{"hop"})
	m.reg.MustRegister(m.phase, m.step, m.frame, m.responses, m.pauses, m.tokens, m.safety, m.hops,
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(gcCPU)), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.outboxObs, m.writeObs = m.frame.WithLabelValues("outbox"), m.frame.WithLabelValues("write")
	m.stepFirst, m.stepSample, m.stepToolsObs = m.step.WithLabelValues("first_token"), m.step.WithLabelValues("sample"), m.step.WithLabelValues("tools")
	m.rendered, m.cached = m.tokens.WithLabelValues("rendered"), m.tokens.WithLabelValues("cached")
	return m
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Registry is the collectors' registry, for an embedder that serves it
// elsewhere or adds its own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ResponseEnded records a response that ended with status, and its phases.
func (m *Metrics) ResponseEnded(p runtime.ServePath, status protocol.ResponseStatus, tm protocol.Timings) {
	m.responses.WithLabelValues(p.Transport, p.Design, p.State, string(status)).Inc()
	for _, ph := range []struct {
		name string
		us   int64
	}{
		{"decode", tm.DecodeMicros}, {"queue", tm.QueueMicros}, {"load", tm.LoadMicros},
		{"validate", tm.ValidateMicros}, {"safety", tm.SafetyMicros}, {"render", tm.RenderMicros},
		{"first_token", tm.FirstTokenMicros}, {"sample", tm.SampleMicros}, {"tools", tm.ToolsMicros},
		{"store", tm.StoreMicros}, {"hop", tm.HopMicros}, {"encode", tm.EncodeMicros},
		{"outbox", tm.OutboxMicros}, {"write", tm.WriteMicros}, {"total", tm.TotalMicros},
	} {
		m.phase.WithLabelValues(ph.name, p.Transport, p.Design, p.State).Observe(float64(ph.us) / 1e6)
	}
	m.rendered.Add(float64(tm.RenderedTokens))
	m.cached.Add(float64(tm.CachedTokens))
	m.safety.Add(float64(tm.SafetyFlags))
}

// StepSampled records one sampling step's model time.
func (m *Metrics) StepSampled(firstToken, sample time.Duration) {
	m.stepFirst.Observe(firstToken.Seconds())
	m.stepSample.Observe(sample.Seconds())
}

// StepDispatched records one step's tool dispatch.
func (m *Metrics) StepDispatched(d time.Duration) { m.stepToolsObs.Observe(d.Seconds()) }

// Paused counts a suspended rollout's pause.
func (m *Metrics) Paused() { m.pauses.Inc() }

// FrameWritten records a frame's time in its outbox and its write.
func (m *Metrics) FrameWritten(queued, write time.Duration) {
	m.outboxObs.Observe(queued.Seconds())
	m.writeObs.Observe(write.Seconds())
}

// Hop counts a simulated service call.
func (m *Metrics) Hop(name string) { m.hops.WithLabelValues(name).Inc() }

// WatchEngine exports the batch of the engine that stats reads (see
// sampler.Engine): the sequences in it now, its wake-ups, the sequences
// they stepped and the tokens they handed out; stepped over wake-ups is the
// mean batch. Read at each scrape, nothing is recorded per token.
func (m *Metrics) WatchEngine(stats func() sampler.EngineStats) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tether_engine_sequences",
			Help: "Samples of the simulated models in the engine's batch now.",
		}, func() float64 { return float64(stats().Active) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tether_engine_wakes_total",
			Help: "Wake-ups of the simulated models' engine that stepped at least one sample.",
		}, func() float64 { return float64(stats().Wakes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tether_engine_stepped_total",
			Help: "Samples stepped by the engine, summed over its wake-ups (over tether_engine_wakes_total: the mean batch).",
		}, func() float64 { return float64(stats().Stepped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "tether_engine_tokens_total",
			Help: "Output tokens the engine handed out on schedule (hidden reasoning tokens included).",
		}, func() float64 { return float64(stats().Tokens) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tether_engine_late_seconds",
			Help: "How late the engine's latest step woke past its earliest due token (0 while it is idle): a server saturated steps late.",
		}, func() float64 { return stats().Late.Seconds() }),
	)
}

// WatchFlushHolds exports the count holds reads (runtime.Server.FlushHolds):
// the flushes a connection's writer held, the server being saturated, to
// take the next frames with it. Read at each scrape.
func (m *Metrics) WatchFlushHolds(holds func() uint64) {
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "tether_flush_holds_total",
		Help: "Flushes a connection's writer held (at most 1 ms each) while the server was saturated, to take its next frames in the same write.",
	}, func() float64 { return float64(holds()) }))
}

// gcCPU adds Go's estimates of the garbage collector's CPU time, of the
// time the Ps had, and of their idle time to the Go collector's metrics
// (go_cpu_classes_gc_total_cpu_seconds_total, _total_cpu_seconds_total,
// _idle_cpu_seconds_total): the collector's share of the busy time is
// gc / (total − idle), which a load run reports.
var gcCPU = collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/(gc/total|total|idle):cpu-seconds$`)}
