package runtime

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestOptionsValidate: NewServer refuses a negative bound and the options
// no server can run with, naming the option; zero values pass.
func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts Options
		want []string // substrings of the error; none: valid
	}{
		{name: "zero", opts: Options{}},
		{name: "positive", opts: Options{Limits: Limits{MaxLanes: 3, MaxFrame: 1}, Timeouts: Timeouts{Write: time.Second},
			Suspension: SuspensionOptions{Max: 1}, Tenant: TenantLimits{RPM: 60}, MemoryStore: MemoryStoreOptions{MaxBytes: 1},
			CompactionKey: make([]byte, 32)}},
		{name: "Limits.MaxLanes", opts: Options{Limits: Limits{MaxLanes: -3}},
			want: []string{"runtime: Limits.MaxLanes -3: want 0 (the default) or more"}},
		{name: "Limits.MaxFrame", opts: Options{Limits: Limits{MaxFrame: -1}}, want: []string{"Limits.MaxFrame -1"}},
		{name: "Limits.CacheResponses", opts: Options{Limits: Limits{CacheResponses: -1}}, want: []string{"Limits.CacheResponses -1"}},
		{name: "Limits.MaxClientSecrets", opts: Options{Limits: Limits{MaxClientSecrets: -1}}, want: []string{"Limits.MaxClientSecrets -1"}},
		{name: "Timeouts.Write", opts: Options{Timeouts: Timeouts{Write: -time.Second}},
			want: []string{"runtime: Timeouts.Write -1s: want 0 (the default) or more"}},
		{name: "Timeouts.Drain", opts: Options{Timeouts: Timeouts{Drain: -time.Millisecond}}, want: []string{"Timeouts.Drain -1ms"}},
		{name: "Suspension.Max", opts: Options{Suspension: SuspensionOptions{Max: -1}}, want: []string{"Suspension.Max -1"}},
		{name: "Suspension.ResumeWindow", opts: Options{Suspension: SuspensionOptions{ResumeWindow: -time.Minute}},
			want: []string{"Suspension.ResumeWindow -1m0s"}},
		{name: "Suspension.LeaseTTL", opts: Options{Suspension: SuspensionOptions{LeaseTTL: -time.Second}},
			want: []string{"Suspension.LeaseTTL -1s"}},
		{name: "Tenant.Conns", opts: Options{Tenant: TenantLimits{Conns: -2}}, want: []string{"Tenant.Conns -2"}},
		{name: "Tenant.RPM", opts: Options{Tenant: TenantLimits{RPM: -1}}, want: []string{"Tenant.RPM -1: want 0 (no bound) or more"}},
		{name: "MemoryStore.MaxTenantBytes", opts: Options{MemoryStore: MemoryStoreOptions{MaxTenantBytes: -1}},
			want: []string{"MemoryStore.MaxTenantBytes -1"}},
		{name: "every bad bound", opts: Options{Limits: Limits{MaxQueued: -1}, Tenant: TenantLimits{InFlight: -1}},
			want: []string{"Limits.MaxQueued -1", "Tenant.InFlight -1"}},
		{name: "nil model", opts: Options{Models: map[string]Sampler{"m": nil}}, want: []string{`Models["m"] is nil`}},
		{name: "nil hosted tool", opts: Options{HostedTools: []Tool{nil}}, want: []string{"HostedTools[0] is nil"}},
		{name: "short compaction key", opts: Options{CompactionKey: make([]byte, 16)},
			want: []string{"CompactionKey of 16 bytes: want 32"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.opts.validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("validate: %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate: nil, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("validate: %q, want it to say %q", err, w)
				}
			}
			if srv, err := NewServer(tc.opts); err == nil {
				srv.cancel()
				t.Errorf("NewServer took options validate refuses")
			}
		})
	}
}

// TestOptionsDefaults: setDefaults gives every zero bound its default,
// leaves the ones set alone, and leaves Tenant.RPM 0 (no bound); without
// keys, a tenant may hold all of the store.
func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	var o Options
	o.setDefaults()
	want := Options{
		Limits: Limits{MaxFrame: DefaultMaxFrame, MaxConnections: DefaultMaxConnections, MaxInFlight: DefaultMaxInFlight,
			MaxLanes: DefaultMaxLanes, MaxQueued: DefaultMaxQueued, ConnBytes: DefaultConnBytes, CacheBytes: DefaultCacheBytes,
			CacheResponses: DefaultCacheResponses, MaxCallsPerStep: DefaultMaxCallsPerStep,
			MaxOutputItems: DefaultMaxOutputItems, MaxOutputBytes: DefaultMaxOutputBytes, MaxCompactions: DefaultMaxCompactions,
			MaxClientSecrets: DefaultMaxClientSecrets},
		Timeouts: Timeouts{WSMaxAge: DefaultWSMaxAge, Write: DefaultWriteTimeout, SlowClient: DefaultSlowClient,
			Body: DefaultBodyTimeout, Drain: DefaultDrainTimeout},
		Suspension:  SuspensionOptions{Timeout: DefaultSuspendTimeout, ResumeWindow: DefaultResumeWindow, Max: DefaultMaxSuspended, LeaseTTL: DefaultLeaseTTL},
		Tenant:      TenantLimits{InFlight: DefaultTenantInFlight, Suspended: DefaultTenantSuspended, Conns: DefaultTenantConns},
		MemoryStore: MemoryStoreOptions{MaxRecords: DefaultStoreMax, MaxBytes: DefaultStoreBytes, MaxTenantBytes: DefaultStoreBytes},
	}
	groups := func(o Options) []any { return []any{o.Limits, o.Timeouts, o.Suspension, o.Tenant, o.MemoryStore} }
	if got := groups(o); !reflect.DeepEqual(got, groups(want)) {
		t.Errorf("defaults:\n got %+v\nwant %+v", got, groups(want))
	}
	if o.Now == nil || o.Logger == nil || o.Observer == nil || o.Hooks == nil {
		t.Errorf("setDefaults left a nil clock, logger, observer or hooks: %+v", o)
	}

	set := Options{Limits: Limits{MaxLanes: 3}, Timeouts: Timeouts{Write: time.Second}, Suspension: SuspensionOptions{Max: 2},
		Tenant: TenantLimits{RPM: 60}, MemoryStore: MemoryStoreOptions{MaxBytes: 5}}
	set.setDefaults()
	if set.Limits.MaxLanes != 3 || set.Timeouts.Write != time.Second || set.Suspension.Max != 2 || set.Tenant.RPM != 60 || set.MemoryStore.MaxBytes != 5 {
		t.Errorf("setDefaults changed a bound that was set: %+v", set)
	}
	if set.Limits.MaxFrame != DefaultMaxFrame || set.Suspension.ResumeWindow != DefaultResumeWindow {
		t.Errorf("setDefaults left a zero bound beside one set: %+v", set)
	}
}

// TestStoreDefaultsFromBudget: a server's memory stores take a quarter of
// its memory budget each unless their bounds are given, a tenant a
// quarter of that with keys and all of it without; with no budget, the
// fixed defaults.
func TestStoreDefaultsFromBudget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		budget int64
		keys   bool
		given  MemoryStoreOptions
		want   MemoryStoreOptions // MaxRecords aside
	}{
		{name: "no budget, keys", keys: true, want: MemoryStoreOptions{MaxBytes: DefaultStoreBytes, MaxTenantBytes: DefaultTenantStoreBytes}},
		{name: "no budget, no keys", want: MemoryStoreOptions{MaxBytes: DefaultStoreBytes, MaxTenantBytes: DefaultStoreBytes}},
		{name: "budget, keys", budget: 8 << 30, keys: true, want: MemoryStoreOptions{MaxBytes: 2 << 30, MaxTenantBytes: 512 << 20}},
		{name: "budget, no keys", budget: 8 << 30, want: MemoryStoreOptions{MaxBytes: 2 << 30, MaxTenantBytes: 2 << 30}},
		{name: "bytes given", budget: 8 << 30, keys: true, given: MemoryStoreOptions{MaxBytes: 64 << 20},
			want: MemoryStoreOptions{MaxBytes: 64 << 20, MaxTenantBytes: 16 << 20}},
		{name: "tenant given", budget: 8 << 30, given: MemoryStoreOptions{MaxTenantBytes: 1 << 20},
			want: MemoryStoreOptions{MaxBytes: 2 << 30, MaxTenantBytes: 1 << 20}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o := Options{Limits: Limits{MaxMemory: tc.budget}, MemoryStore: tc.given}
			if tc.keys {
				o.Keys = new(Keys)
			}
			o.setDefaults()
			tc.want.MaxRecords = DefaultStoreMax
			if o.MemoryStore != tc.want {
				t.Errorf("got %+v, want %+v", o.MemoryStore, tc.want)
			}
		})
	}
}
