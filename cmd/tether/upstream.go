package main

import (
	"fmt"
	"time"

	"github.com/tether-run/tether/sampler"
)

// upstream is the backend of a model that another server samples. Its API
// key is read from the environment variable the config names, so that keys
// stay out of config files; a variable named but unset is an error rather
// than an unauthenticated request. The model's timing settings do not apply:
// the upstream's own latency is the one served.
func upstream(u *UpstreamConfig, getenv func(string) string) (*sampler.Upstream, error) {
	key := ""
	if u.APIKeyEnv != "" {
		if key = getenv(u.APIKeyEnv); key == "" {
			return nil, fmt.Errorf("api_key_env: the environment variable %s is unset or empty", u.APIKeyEnv)
		}
	}
	return sampler.NewUpstream(sampler.UpstreamConfig{
		BaseURL: u.BaseURL,
		API:     sampler.UpstreamAPI(u.API),
		Model:   u.Model,
		APIKey:  key,
		Timeout: time.Duration(u.Timeout),
	})
}
