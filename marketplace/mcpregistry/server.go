package mcpregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
)

// Unsigned is a fact about every server.json: the MCP Registry checks
// that a publisher owns a server's namespace and packages, but nothing it
// serves is signed, so a client trusts the registry (or mirror) it reads
// from, and the package pins and sha256 sums the file names.
const Unsigned = true

// MaxServerSize bounds a server.json.
const MaxServerSize = 1 << 20

// Server is a server.json: one version of an MCP server as the MCP
// Registry describes it (its schema's ServerDetail).
type Server struct {
	Schema string `json:"$schema,omitempty"`
	// Name is reverse-DNS: a namespace, "/", a name ("io.github.acme/weather").
	Name        string      `json:"name"`
	Title       string      `json:"title,omitempty"`
	Description string      `json:"description"`
	Version     string      `json:"version"`
	WebsiteURL  string      `json:"websiteUrl,omitempty"`
	Repository  *Repository `json:"repository,omitempty"`
	// Packages are ways to run the server on this machine; Remotes are
	// servers already running somewhere, reached by URL. Either may be
	// empty; they are alternatives, not parts.
	Packages []Package `json:"packages,omitempty"`
	Remotes  []Remote  `json:"remotes,omitempty"`
}

// Repository is where the server's source is.
type Repository struct {
	URL       string `json:"url"`
	Source    string `json:"source"`
	ID        string `json:"id,omitempty"`
	Subfolder string `json:"subfolder,omitempty"`
}

// Registry types a package can have.
const (
	TypeNPM   = "npm"
	TypePyPI  = "pypi"
	TypeOCI   = "oci"
	TypeNuGet = "nuget"
	TypeMCPB  = "mcpb"
)

// Package is one way to run the server: a package of a registry, run by
// a runtime (npx, uvx, docker, dnx), or an MCPB file.
type Package struct {
	RegistryType    string `json:"registryType"`
	RegistryBaseURL string `json:"registryBaseUrl,omitempty"`
	// Identifier is the package's name, or an MCPB file's URL.
	Identifier string `json:"identifier"`
	// Version is the package's exact version.
	Version string `json:"version,omitempty"`
	// FileSHA256 is the sha256 of the package's file (an MCPB file's
	// must be given), 64 lowercase hex digits.
	FileSHA256           string     `json:"fileSha256,omitempty"`
	RuntimeHint          string     `json:"runtimeHint,omitempty"`
	Transport            Transport  `json:"transport"`
	RuntimeArguments     []Argument `json:"runtimeArguments,omitempty"`
	PackageArguments     []Argument `json:"packageArguments,omitempty"`
	EnvironmentVariables []KeyValue `json:"environmentVariables,omitempty"`
}

// Transports.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "streamable-http"
	TransportSSE   = "sse"
)

// Transport is how a client talks to the server.
type Transport struct {
	Type    string     `json:"type"`
	URL     string     `json:"url,omitempty"`
	Headers []KeyValue `json:"headers,omitempty"`
}

// Remote is a running server reached at a URL, which may hold
// {variables}.
type Remote struct {
	Transport
	Variables map[string]Input `json:"variables,omitempty"`
}

// Input is a value a client sets or asks its user for. Value, when
// given, is fixed; its {name}s are replaced by Variables' values.
type Input struct {
	Description string           `json:"description,omitempty"`
	IsRequired  bool             `json:"isRequired,omitempty"`
	Format      string           `json:"format,omitempty"`
	Value       string           `json:"value,omitempty"`
	IsSecret    bool             `json:"isSecret,omitempty"`
	Default     string           `json:"default,omitempty"`
	Placeholder string           `json:"placeholder,omitempty"`
	Choices     []string         `json:"choices,omitempty"`
	Variables   map[string]Input `json:"variables,omitempty"`
}

// Argument is a command-line argument: "positional" (its value, labelled
// ValueHint) or "named" (the flag Name and its value).
type Argument struct {
	Input
	Type       string `json:"type"`
	Name       string `json:"name,omitempty"`
	ValueHint  string `json:"valueHint,omitempty"`
	IsRepeated bool   `json:"isRepeated,omitempty"`
}

// KeyValue is an environment variable or a header.
type KeyValue struct {
	Input
	Name string `json:"name"`
}

var (
	reName   = regexp.MustCompile(`^[a-zA-Z0-9.-]+/[a-zA-Z0-9._-]+$`)
	reSHA256 = regexp.MustCompile(`^[a-f0-9]{64}$`)
	reURL    = regexp.MustCompile(`^(https?://[^\s]+|\{[a-zA-Z_][a-zA-Z0-9_]*\}[^\s]*)$`)
)

// Parse reads a server.json. Fields Kiln does not use are allowed (the
// format grows); the document is one JSON object without duplicate keys
// and what the registry's schema requires holds: a reverse-DNS name with
// one "/", a description of 1 to 100 characters, a version; each package
// with a registry type, an identifier and a transport (stdio,
// streamable-http or sse, the last two with a URL), a fileSha256 of 64
// lowercase hex digits when given; each argument positional (with a
// value or a valueHint) or named (with a name); each remote
// streamable-http or sse with an http(s) URL or one starting with a
// {variable}. Whether a package's version is pinned is Convert's
// question. Errors are EINVALID and name the field.
func Parse(data []byte) (*Server, error) {
	s, err := parse(data)
	if err != nil {
		return nil, core.Errorf(core.EINVALID, "server.json: %v", err)
	}
	return s, nil
}

func parse(data []byte) (*Server, error) {
	if len(data) > MaxServerSize {
		return nil, fmt.Errorf("larger than %d KiB", MaxServerSize>>10)
	}
	if err := plugins.StrictJSON(data); err != nil {
		return nil, err
	}
	var s Server
	if err := decode(data, &s); err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	return &s, nil
}

// check checks s against the schema's rules.
func (s *Server) check() error {
	switch n := utf8.RuneCountInString(s.Description); {
	case s.Name == "":
		return errors.New("name: required")
	case len(s.Name) < 3 || len(s.Name) > 200 || !reName.MatchString(s.Name):
		return fmt.Errorf("name: %q must be reverse-DNS with one \"/\" (io.github.owner/server), 3 to 200 characters", s.Name)
	case n == 0:
		return errors.New("description: required")
	case n > 100:
		return fmt.Errorf("description: %d characters, at most 100", n)
	case s.Version == "":
		return errors.New("version: required")
	case len(s.Version) > 255:
		return errors.New("version: longer than 255 characters")
	case utf8.RuneCountInString(s.Title) > 100:
		return errors.New("title: longer than 100 characters")
	}
	for i, p := range s.Packages {
		if err := p.check(fmt.Sprintf("packages[%d]", i)); err != nil {
			return err
		}
	}
	for i, r := range s.Remotes {
		at := fmt.Sprintf("remotes[%d]", i)
		if r.Type != TransportHTTP && r.Type != TransportSSE {
			return fmt.Errorf(`%s.type: %q: want "streamable-http" or "sse"`, at, r.Type)
		}
		if err := r.Transport.check(at); err != nil {
			return err
		}
		if err := checkInputs(at+".variables", r.Variables); err != nil {
			return err
		}
	}
	return nil
}

func (p Package) check(at string) error {
	switch {
	case p.RegistryType == "":
		return fmt.Errorf("%s.registryType: required", at)
	case p.Identifier == "":
		return fmt.Errorf("%s.identifier: required", at)
	case len(p.Version) > 255:
		return fmt.Errorf("%s.version: longer than 255 characters", at)
	case p.FileSHA256 != "" && !reSHA256.MatchString(p.FileSHA256):
		return fmt.Errorf("%s.fileSha256: %q: want 64 lowercase hex digits", at, p.FileSHA256)
	case p.Transport.Type == "":
		return fmt.Errorf("%s.transport: required, with a type", at)
	}
	switch p.Transport.Type {
	case TransportStdio, TransportHTTP, TransportSSE:
	default:
		return fmt.Errorf(`%s.transport.type: %q: want "stdio", "streamable-http" or "sse"`, at, p.Transport.Type)
	}
	if err := p.Transport.check(at + ".transport"); err != nil {
		return err
	}
	for _, list := range []struct {
		name string
		args []Argument
	}{{"runtimeArguments", p.RuntimeArguments}, {"packageArguments", p.PackageArguments}} {
		for j, a := range list.args {
			if err := a.check(fmt.Sprintf("%s.%s[%d]", at, list.name, j)); err != nil {
				return err
			}
		}
	}
	for j, kv := range p.EnvironmentVariables {
		if err := kv.check(fmt.Sprintf("%s.environmentVariables[%d]", at, j)); err != nil {
			return err
		}
	}
	return nil
}

func (t Transport) check(at string) error {
	if t.Type == TransportStdio {
		if t.URL != "" || len(t.Headers) > 0 {
			return fmt.Errorf("%s: a stdio transport has no url or headers", at)
		}
		return nil
	}
	if !reURL.MatchString(t.URL) {
		return fmt.Errorf("%s.url: %q: want an http(s) URL, or one that starts with a {variable}", at, t.URL)
	}
	for j, kv := range t.Headers {
		if err := kv.check(fmt.Sprintf("%s.headers[%d]", at, j)); err != nil {
			return err
		}
	}
	return nil
}

func (a Argument) check(at string) error {
	switch a.Type {
	case "positional":
		if a.Value == "" && a.ValueHint == "" {
			return fmt.Errorf("%s: a positional argument needs a value or a valueHint", at)
		}
	case "named":
		if a.Name == "" {
			return fmt.Errorf("%s.name: required for a named argument", at)
		}
	default:
		return fmt.Errorf(`%s.type: %q: want "positional" or "named"`, at, a.Type)
	}
	return a.Input.check(at)
}

func (kv KeyValue) check(at string) error {
	if kv.Name == "" {
		return fmt.Errorf("%s.name: required", at)
	}
	return kv.Input.check(at)
}

func (in Input) check(at string) error {
	switch in.Format {
	case "", "string", "number", "boolean", "filepath":
	default:
		return fmt.Errorf(`%s.format: %q: want "string", "number", "boolean" or "filepath"`, at, in.Format)
	}
	return checkInputs(at+".variables", in.Variables)
}

func checkInputs(at string, vars map[string]Input) error {
	for name, v := range vars {
		if v.Variables != nil {
			return fmt.Errorf("%s[%q]: a variable has no variables of its own", at, name)
		}
		if err := v.check(fmt.Sprintf("%s[%q]", at, name)); err != nil {
			return err
		}
	}
	return nil
}

// decode decodes data into v and words a value of the wrong type in
// JSON's terms.
func decode(data []byte, v any) error {
	err := json.Unmarshal(data, v)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		if te.Field == "" {
			return fmt.Errorf("want an object, not %s", article(te.Value))
		}
		return fmt.Errorf("%s: want %s, not %s", te.Field, article(jsonKind(te.Type)), article(te.Value))
	}
	return err
}

// jsonKind names the JSON value that decodes into t.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Map, reflect.Struct, reflect.Pointer:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "bool"
	default:
		return "number"
	}
}

// article puts "a" or "an" before a JSON kind ("an array", "a string").
func article(kind string) string {
	if kind != "" && strings.ContainsRune("aeiou", rune(kind[0])) {
		return "an " + kind
	}
	return "a " + kind
}
