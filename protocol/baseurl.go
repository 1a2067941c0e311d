package protocol

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// APIBase is the API base URL that raw means, by the one rule every base
// URL in tether follows: as OpenAI clients take it, with or without the
// version. http://HOST:PORT and http://HOST:PORT/ are http://HOST:PORT/v1;
// a URL with a path (http://HOST:PORT/v1, http://HOST/openai/v1) is taken
// as given, without a trailing slash. The scheme must be one of schemes
// (http and https when none are given). Paths are appended to the result:
// APIBase(raw) + "/responses".
func APIBase(raw string, schemes ...string) (string, error) {
	if len(schemes) == 0 {
		schemes = []string{"http", "https"}
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || !slices.Contains(schemes, u.Scheme) || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("base URL %q: want %s://HOST:PORT, with or without /v1", raw, strings.Join(schemes, ":// or "))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	if u.Path == "" {
		u.Path = "/v1"
	}
	return u.String(), nil
}
