// Package hub runs the model providers of a Kiln server: it knows each
// provider's settings and the environment variables its vendor's SDKs
// read, stores what the user configures (environment references, or
// secrets in a file only the server's user can read — never in the
// database), resolves "<provider>:<model>" references to core.Models with
// retries, and lists models (live, cached) and each provider's state.
// Every provider gets an HTTP client that reaches only its own API host or
// configured base URL (netguard).
//
// The built-in providers' vendors (plugins/providers/openai, ...) each
// register their Def from init (Register, through
// modelprovider.RegisterBuiltin); a plugin's provider reaches the hub
// through the "model-provider" kind (plugins/providers/modelprovider).
package hub

import (
	"cmp"
	"fmt"
	"maps"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/kilnhq/kiln/plugins/providers"
)

// Def describes a model provider to the hub: its settings, how to tell
// whether they are enough to call its API, the hosts it may reach and
// how to make it. A built-in vendor's package registers its Def from
// init (Register); a plugin's provider gets one from its description
// (plugins/providers/modelprovider).
type Def struct {
	// ID is the provider's ID, the plugin's ("openai"): models are
	// referenced as "<ID>:<model>". Name is shown to users ("OpenAI").
	ID, Name string
	// Order places a built-in provider in lists (kiln providers, the web
	// UI, the built-in plugins' start): lowest first, then by ID.
	Order    int
	Settings []SettingDef
	// Configured reports whether resolved settings are enough to call the
	// API; nil means every Required setting is set.
	Configured func(values map[string]string) bool
	// Hosts returns the host:port patterns the provider may reach, given
	// its resolved settings; nil means the base URL's host. The hub
	// lowercases them (host names are case-insensitive, and a network
	// permission is spelled in lowercase).
	Hosts func(values map[string]string) []string
	// New makes the provider.
	New providers.Factory
	// Models lists well-known models, offered when the API has no list
	// or it fails; may be nil.
	Models []string
	// BarePort is the port of a base URL given as a bare host without
	// scheme or port (OLLAMA_HOST=example.com means port 11434).
	BarePort string
}

// SettingDef is one setting of a provider.
type SettingDef struct {
	Name   string
	Secret bool
	// Required settings must be set before the provider is configured
	// (unless Def.Configured says otherwise).
	Required bool
	// Env are the environment variables that supply the setting when the
	// user configured none, first set wins.
	Env     []string
	Default string
	// Values, when set, are the only values allowed.
	Values []string
	Help   string
}

var (
	regMu      sync.Mutex
	registered = map[string]Def{}
)

// Register makes a built-in provider known, from the init function of its
// vendor's package (plugins/providers/openai, ...); the kiln binary links
// the vendors in cmd/kiln/imports.go. It panics, as a programming error,
// when d lacks an ID, a Name, its factory (New) or its settings, or its
// ID is registered already: a provider without a factory cannot exist.
func Register(d Def) {
	regMu.Lock()
	defer regMu.Unlock()
	switch {
	case d.ID == "" || d.Name == "" || d.New == nil || len(d.Settings) == 0:
		panic(fmt.Sprintf("hub.Register: provider %q lacks an ID, a Name, New or Settings", d.ID))
	case strings.ContainsAny(d.ID, ": "):
		panic(fmt.Sprintf("hub.Register: provider ID %q: want a plugin ID", d.ID))
	}
	if _, dup := registered[d.ID]; dup {
		panic(fmt.Sprintf("hub.Register: provider %q registered twice", d.ID))
	}
	registered[d.ID] = d
}

// Registered returns the registered providers' definitions, by Order then
// ID.
func Registered() []Def {
	regMu.Lock()
	defer regMu.Unlock()
	out := slices.Collect(maps.Values(registered))
	slices.SortFunc(out, func(a, b Def) int { return cmp.Or(cmp.Compare(a.Order, b.Order), strings.Compare(a.ID, b.ID)) })
	return out
}

func (d *Def) setting(name string) *SettingDef {
	for i := range d.Settings {
		if d.Settings[i].Name == name {
			return &d.Settings[i]
		}
	}
	return nil
}

func (d *Def) configured(v map[string]string) bool {
	if d.Configured != nil {
		return d.Configured(v)
	}
	for _, s := range d.Settings {
		if s.Required && v[s.Name] == "" {
			return false
		}
	}
	return true
}

// hosts returns the host:port patterns d may reach with the resolved
// settings v, in lowercase, as a network permission takes them: a base
// URL or a region the user spelled with capitals names the same host.
func (d *Def) hosts(v map[string]string) []string {
	var hosts []string
	if d.Hosts != nil {
		hosts = d.Hosts(v)
	} else {
		hosts = URLHosts(v["base_url"])
	}
	for i, h := range hosts {
		hosts[i] = strings.ToLower(h)
	}
	return hosts
}

// normalize returns a base URL setting in its canonical form.
func (d *Def) normalize(raw string) string { return NormalizeURL(raw, d.BarePort) }

// NormalizeURL returns a base URL with a scheme ("host:port" becomes
// "http://host:port", as OLLAMA_HOST allows, and a bare host gets
// barePort when it is set) and "localhost" spelled 127.0.0.1, so the
// network permission can name the address.
func NormalizeURL(raw, barePort string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	bare := !strings.Contains(raw, "://")
	if bare {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	if bare && u.Port() == "" && barePort != "" {
		u.Host = net.JoinHostPort(u.Hostname(), barePort)
	}
	if strings.EqualFold(u.Hostname(), "localhost") {
		if p := u.Port(); p != "" {
			u.Host = net.JoinHostPort("127.0.0.1", p)
		} else {
			u.Host = "127.0.0.1"
		}
	}
	return strings.TrimSuffix(u.String(), "/")
}

// URLHosts is the host:port pattern of a base URL: its port, else 443
// for https and 80 for http; none when it names no host.
func URLHosts(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return nil
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return []string{net.JoinHostPort(u.Hostname(), port)}
}
