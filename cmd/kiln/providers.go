package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/sdk/client"
)

// The setting names the set command's dedicated flags write.
const (
	settingAPIKey  = "api_key"
	settingBaseURL = "base_url"
)

// maxSecretInput is the most --api-key-stdin reads.
const maxSecretInput = 64 << 10

func newProvidersCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "providers",
		Aliases: []string{"provider"},
		Short:   "Show and configure the model providers (OpenAI, Anthropic, Ollama, ...)",
		Long: `Model providers give runs their models: OpenAI, Anthropic, Gemini, Bedrock,
OpenRouter, Ollama. A provider is ready once it has credentials, from the
server's environment (such as OPENAI_API_KEY) or from 'kiln providers set'.
Secrets are never shown, only whether each is set and where from.

'kiln models' lists the models of the ready providers.`,
		Example: `  kiln providers ls
  kiln providers show openai
  kiln providers set openai --api-key-env OPENAI_API_KEY
  kiln providers set anthropic --api-key-stdin < ~/.secrets/anthropic
  kiln providers set bedrock --set region=eu-central-1 --set profile=work
  kiln providers reset openai`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newProvidersListCmd(a), newProvidersShowCmd(a), newProvidersSetCmd(a), newProvidersResetCmd(a))
	return cmd
}

func newProvidersListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the model providers, configured or not",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ps, err := c.Providers(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if ps == nil {
					ps = []*client.ProviderStatus{}
				}
				return writeJSON(w, map[string]any{"providers": ps})
			}
			if len(ps) == 0 {
				fmt.Fprintln(w, "No model providers.")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"ID", "NAME", "STATE", "CONFIGURED"}}
			var reasons []string
			for _, p := range ps {
				// Why a provider is in error is said in full below the
				// table rather than cut short in it.
				t.add(p.ID, orDash(p.Name), providerState(st, &client.ProviderStatus{State: p.State}, 0), settingsHint(p, 70))
				if p.State == client.ProviderError && p.Error != "" {
					reasons = append(reasons, p.ID+": "+providerState(st, p, 1000))
				}
			}
			t.render(w)
			if len(reasons) > 0 {
				fmt.Fprintln(w)
				for _, r := range reasons {
					fmt.Fprintln(w, r)
				}
			}
			return nil
		},
	}
}

// providerState colours a provider's state; an error shows why, cut to
// about n characters (not at all when n is 0).
func providerState(st style, p *client.ProviderStatus, n int) string {
	switch p.State {
	case client.ProviderReady:
		return st.green(p.State)
	case client.ProviderNotConfigured, client.ProviderDisabled:
		return st.dim(p.State)
	case client.ProviderError:
		if p.Error == "" || n == 0 {
			return st.red(p.State)
		}
		return st.red(p.State) + ": " + truncate(p.Error, n)
	}
	return orDash(p.State)
}

// settingIsSet reports whether a resolved setting has a value.
func settingIsSet(s client.ProviderSetting) bool {
	if s.Secret {
		return s.Value != "" && s.Value != "not set"
	}
	return s.Value != ""
}

// reSourceRef is the source of a setting stored as an environment
// reference, "config (env ref ${NAME})".
var reSourceRef = regexp.MustCompile(`^config \(env ref \$\{([A-Za-z_][A-Za-z0-9_]*)\}\)$`)

// missingVar returns the variable of a setting stored as an environment
// reference when the variable is not set in the server's environment,
// else "".
func missingVar(s client.ProviderSetting) string {
	if settingIsSet(s) {
		return ""
	}
	if m := reSourceRef.FindStringSubmatch(s.Source); m != nil {
		return m[1]
	}
	return ""
}

// settingsHint says briefly what is set and where from, e.g.
// "api_key set (env OPENAI_API_KEY)"; defaults only when nothing else is
// set. It is cut to about n characters.
func settingsHint(p *client.ProviderStatus, n int) string {
	var parts, defaults []string
	for _, s := range p.Settings {
		switch {
		case missingVar(s) != "":
			parts = append(parts, fmt.Sprintf("%s ${%s} (%s unset)", s.Name, missingVar(s), missingVar(s)))
		case !settingIsSet(s):
		case s.Source == "default":
			defaults = append(defaults, s.Name+"="+s.Value)
		case s.Secret && s.Source != "":
			parts = append(parts, s.Name+" set ("+s.Source+")")
		case s.Secret:
			parts = append(parts, s.Name+" set")
		default:
			parts = append(parts, s.Name+"="+s.Value)
		}
	}
	if len(parts) > 0 {
		return truncate(strings.Join(parts, ", "), n)
	}
	if len(defaults) > 0 {
		return truncate("defaults: "+strings.Join(defaults, ", "), n)
	}
	if len(p.Env) > 0 {
		return truncate("nothing set (reads "+strings.Join(p.Env, ", ")+")", n)
	}
	return "nothing set"
}

func newProvidersShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "show ID",
		Aliases:           []string{"inspect"},
		Short:             "Show a provider's settings, where each comes from, and how to configure it",
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeProviders),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.Provider(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return a.printProviderOrJSON(cmd, p)
		},
	}
}

// printProviderOrJSON writes a provider's details, or its JSON with -o json.
func (a *app) printProviderOrJSON(cmd *cobra.Command, p *client.ProviderStatus) error {
	w := cmd.OutOrStdout()
	if a.jsonOutput() {
		return writeJSON(w, p)
	}
	a.printProvider(w, styleFor(w), p)
	return nil
}

// printProvider shows every setting of a provider with its source, the
// environment variables it reads and how to configure it.
func (a *app) printProvider(w io.Writer, st style, p *client.ProviderStatus) {
	detail(w, "ID", st.bold(p.ID))
	detail(w, "Name", orDash(p.Name))
	detail(w, "State", providerState(st, p, 1000))
	if len(p.Settings) == 0 {
		detail(w, "Settings", "(none)")
	} else {
		fmt.Fprintln(w, "Settings:")
		t := &table{st: st, header: []string{"NAME", "VALUE", "SOURCE"}}
		for _, s := range p.Settings {
			value := orDash(s.Value)
			if s.Secret {
				value = "secret, " + map[bool]string{true: "set", false: "not set"}[settingIsSet(s)]
			}
			if v := missingVar(s); v != "" {
				value = st.red("missing: " + v + " is not set in the server's environment")
				if s.Secret {
					value = "secret, " + value
				}
			}
			t.add(s.Name, value, orDash(s.Source))
		}
		var b bytes.Buffer
		t.render(&b)
		for line := range strings.Lines(b.String()) {
			fmt.Fprint(w, "  "+line)
		}
	}
	env := "(none)"
	if len(p.Env) > 0 {
		env = strings.Join(p.Env, ", ") + " (in the server's environment)"
	}
	detail(w, "Environment", env)
	detailList(w, "Configure", a.configureHints(p), "")
}

// configureHints are the commands that configure provider p.
func (a *app) configureHints(p *client.ProviderStatus) []string {
	set := a.kilnCmd() + " providers set " + shellQuote(p.ID)
	var out []string
	for _, s := range p.Settings {
		if v := missingVar(s); v != "" {
			out = append(out, "set "+v+" where the server runs, and restart it   # "+s.Name+" refers to it")
		}
	}
	for _, s := range p.Settings {
		switch {
		case s.Name == settingAPIKey && s.Secret:
			out = append(out,
				set+" --api-key-env "+keyEnv(p)+"   # the server reads $"+keyEnv(p)+" when it uses the key",
				set+" --api-key-stdin < KEYFILE   # the key is kept in the server's credentials file")
		case s.Secret:
			out = append(out, set+" --set "+s.Name+"='${ENV_NAME}'   # a variable of the server's environment")
		case s.Name == settingBaseURL:
			out = append(out, set+" --base-url URL")
		default:
			out = append(out, set+" --set "+s.Name+"=VALUE")
		}
	}
	if len(p.Env) > 0 {
		out = append(out, "or set "+strings.Join(p.Env, " or ")+" where the server runs, and restart it")
	}
	return append(out, a.kilnCmd()+" providers reset "+shellQuote(p.ID)+"   # forget what was set here")
}

// keyEnv is the environment variable that most likely holds p's API key:
// the one it is set from, else the first that names an API key, a key or a
// token; "NAME" when none does.
func keyEnv(p *client.ProviderStatus) string {
	for _, s := range p.Settings {
		if env, ok := strings.CutPrefix(s.Source, "env "); ok && s.Name == settingAPIKey {
			return env
		}
	}
	for _, words := range [][]string{{"API_KEY"}, {"KEY", "TOKEN"}} {
		for _, e := range p.Env {
			for _, w := range words {
				if strings.Contains(e, w) {
					return e
				}
			}
		}
	}
	return "NAME"
}

// reEnvName is an environment variable name.
var reEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reEnvRef is a whole value that references an environment variable.
var reEnvRef = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// looksSecret reports whether a setting name suggests a secret, for the
// settings the server does not describe.
func looksSecret(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "secret", "token", "password", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func newProvidersSetCmd(a *app) *cobra.Command {
	var (
		keyEnvName string
		keyStdin   bool
		baseURL    string
		sets       []string
	)
	cmd := &cobra.Command{
		Use:   "set ID [--api-key-env NAME | --api-key-stdin] [--base-url URL] [--set name=value]...",
		Short: "Configure a provider: its API key, base URL and other settings",
		Long: `Set some of a provider's settings; the others are kept. The new status is
printed.

An API key is never taken as a command-line argument: it would land in
your shell history and in the process list. Either name an environment
variable of the server that holds it, with --api-key-env (the reference
"${NAME}" is stored, the server reads the variable when it uses the key),
or pipe the key in with --api-key-stdin (the server keeps it in its
credentials file, mode 0600, never in its database).

--set name=value sets any other setting, for example api=responses,
region=eu-central-1, profile=work or auth=bearer. A secret setting given
with --set must be an environment reference, name='${NAME}' (quoted, so
that your shell leaves it alone); a literal secret is refused. An empty
value (name=) removes a setting. 'kiln providers show ID' lists a
provider's settings.`,
		Example: `  kiln providers set openai --api-key-env OPENAI_API_KEY
  kiln providers set anthropic --api-key-stdin < ~/.secrets/anthropic
  pass show openai | kiln providers set openai --api-key-stdin --set api=responses
  kiln providers set ollama --base-url http://gpu-box:11434
  kiln providers set bedrock --set region=eu-central-1 --set profile=work
  kiln providers set openrouter --set api_key='${OPENROUTER_KEY}'`,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeProviders),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			if keyStdin && f.Changed("api-key-env") {
				return usageError{errors.New("--api-key-env and --api-key-stdin both set the API key: give one")}
			}
			if !keyStdin && !f.Changed("api-key-env") && !f.Changed("base-url") && len(sets) == 0 {
				return usageError{errors.New("nothing to set: give --api-key-env, --api-key-stdin, --base-url or --set name=value")}
			}
			settings := map[string]string{}
			for _, kv := range sets {
				name, value, ok := strings.Cut(kv, "=")
				if !ok || name == "" {
					return usageError{fmt.Errorf("--set %q: expected name=value", truncate(kv, 40))}
				}
				if _, dup := settings[name]; dup {
					return usageError{fmt.Errorf("--set %s is given twice", name)}
				}
				settings[name] = value
			}
			if f.Changed("api-key-env") {
				if !reEnvName.MatchString(keyEnvName) {
					return usageError{fmt.Errorf("--api-key-env takes the name of an environment variable, such as OPENAI_API_KEY, not %q", truncate(keyEnvName, 40))}
				}
				if _, dup := settings[settingAPIKey]; dup {
					return usageError{errors.New("--api-key-env and --set api_key=... both set the API key: give one")}
				}
				settings[settingAPIKey] = "${" + keyEnvName + "}"
			}
			if keyStdin {
				if _, dup := settings[settingAPIKey]; dup {
					return usageError{errors.New("--api-key-stdin and --set api_key=... both set the API key: give one")}
				}
			}
			if f.Changed("base-url") {
				if _, dup := settings[settingBaseURL]; dup {
					return usageError{errors.New("--base-url and --set base_url=... both set the base URL: give one")}
				}
				settings[settingBaseURL] = baseURL
			}

			c, err := a.client()
			if err != nil {
				return err
			}
			// The provider's description says which settings are secret;
			// asking first also reports an unknown provider before any
			// secret is read.
			p, err := c.Provider(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			for _, kv := range sets {
				name, value, _ := strings.Cut(kv, "=")
				if value == "" || reEnvRef.MatchString(value) || !isSecretSetting(p, name) {
					continue
				}
				msg := fmt.Sprintf("--set %s: %s is a secret and is never taken on the command line (it would land in your shell history and the process list)", name, name)
				if name == settingAPIKey {
					return usageError{fmt.Errorf("%s: pipe it in with --api-key-stdin, or name a variable of the server's environment with --api-key-env NAME", msg)}
				}
				return usageError{fmt.Errorf("%s: reference a variable of the server's environment instead, --set %s='${NAME}'", msg, name)}
			}
			if keyStdin {
				key, err := readSecret(cmd)
				if err != nil {
					return err
				}
				settings[settingAPIKey] = key
			}
			p, err = c.ConfigureProvider(cmd.Context(), p.ID, client.ProviderConfig{Settings: settings})
			if err != nil {
				return err
			}
			return a.printProviderOrJSON(cmd, p)
		},
	}
	f := cmd.Flags()
	f.StringVar(&keyEnvName, "api-key-env", "", `store the API key as a reference to the server's environment variable NAME ("${NAME}")`)
	f.BoolVar(&keyStdin, "api-key-stdin", false, "read the API key from standard input (never pass a key as an argument: shell history, ps)")
	f.StringVar(&baseURL, "base-url", "", "the provider's API base URL (empty: the default)")
	f.StringArrayVar(&sets, "set", nil, "set a setting, name=value (repeatable); a secret only as name='${ENV_NAME}'")
	_ = cmd.RegisterFlagCompletionFunc("api-key-env", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("base-url", cobra.NoFileCompletions)
	_ = cmd.RegisterFlagCompletionFunc("set", a.completeProviderSettings)
	return cmd
}

// isSecretSetting reports whether setting name of p is a secret: the
// server says so, or, for a setting it does not list, the name suggests it.
func isSecretSetting(p *client.ProviderStatus, name string) bool {
	if i := slices.IndexFunc(p.Settings, func(s client.ProviderSetting) bool { return s.Name == name }); i >= 0 {
		return p.Settings[i].Secret || name == settingAPIKey
	}
	return looksSecret(name)
}

// readSecret reads an API key from the command's standard input: all of
// it when piped, one line from a terminal (after a prompt). Surrounding
// whitespace is dropped; an empty key is an error.
func readSecret(cmd *cobra.Command) (string, error) {
	in := cmd.InOrStdin()
	var (
		b   []byte
		err error
	)
	if stdinIsTerminal(in) {
		fmt.Fprint(cmd.ErrOrStderr(), "API key (shown as you type; pipe it in to keep it off the screen), then Enter: ")
		var line string
		line, err = bufio.NewReader(io.LimitReader(in, maxSecretInput)).ReadString('\n')
		b = []byte(line)
		if errors.Is(err, io.EOF) {
			err = nil
		}
	} else {
		b, err = io.ReadAll(io.LimitReader(in, maxSecretInput+1))
	}
	if err != nil {
		return "", fmt.Errorf("reading the API key from standard input: %w", err)
	}
	if len(b) > maxSecretInput {
		return "", fmt.Errorf("standard input holds more than %d KiB: that is not an API key", maxSecretInput>>10)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", usageError{errors.New("--api-key-stdin read no key: standard input is empty")}
	case strings.ContainsAny(key, "\r\n"):
		return "", usageError{errors.New("--api-key-stdin read several lines: give the key alone")}
	}
	return key, nil
}

func newProvidersResetCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "reset ID",
		Short: "Forget what was set for a provider; its environment settings still apply",
		Long: `Forget the configuration stored for a provider by 'kiln providers set',
its API key in the server's credentials file included; a pasted key cannot
be recovered. Settings from the server's environment (such as
OPENAI_API_KEY) still apply. You are asked to confirm when something is
stored, unless --yes is given, which is needed when standard input is not
a terminal. The provider's status after the reset is printed.`,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completeProviders),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			err = confirmDestructive(cmd, yes, destructive{
				action: "resetting provider " + args[0] + " (forgetting its stored settings)",
				question: func() (string, error) {
					p, err := c.Provider(cmd.Context(), args[0])
					if err != nil {
						return "", err
					}
					stored, pasted := storedSettings(p)
					if len(stored) == 0 {
						return "", nil // nothing to forget
					}
					q := fmt.Sprintf("Forget the settings stored for %s (%s)?", p.ID, strings.Join(stored, ", "))
					if len(pasted) > 0 {
						q += fmt.Sprintf(" The pasted %s cannot be recovered.", strings.Join(pasted, " and "))
					}
					return q, nil
				},
				declined: "Not reset.",
			})
			if err != nil {
				return err
			}
			p, err := c.ResetProvider(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Forgot the stored configuration of %s.\n", p.ID)
			}
			return a.printProviderOrJSON(cmd, p)
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}

// storedSettings lists the settings of p that 'kiln providers set'
// stored, and which of them are secrets kept in the credentials file.
func storedSettings(p *client.ProviderStatus) (stored, pasted []string) {
	for _, s := range p.Settings {
		switch {
		case s.Source == "credentials file":
			stored, pasted = append(stored, s.Name), append(pasted, s.Name)
		case strings.HasPrefix(s.Source, "config"):
			stored = append(stored, s.Name)
		}
	}
	return stored, pasted
}

func newModelsCmd(a *app) *cobra.Command {
	var provider string
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models of the configured providers",
		Long: `List the models the ready providers offer, with their context size; runs
take a model by its REF. The server's default model is marked with *.
Providers that are not ready are listed after the table with the reason.`,
		Example: `  kiln models
  kiln models --provider ollama
  kiln run "Hello" --model openai:gpt-4o`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.Models(cmd.Context())
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("provider") {
				if !slices.ContainsFunc(m.Providers, func(p client.ProviderStatus) bool { return p.ID == provider }) {
					return fmt.Errorf("no provider %q; see '%s providers ls'", provider, a.kilnCmd())
				}
				m.Models = slices.DeleteFunc(m.Models, func(x client.Model) bool { return x.Provider != provider })
				m.Providers = slices.DeleteFunc(m.Providers, func(p client.ProviderStatus) bool { return p.ID != provider })
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if m.Models == nil {
					m.Models = []client.Model{}
				}
				if m.Providers == nil {
					m.Providers = []client.ProviderStatus{}
				}
				return writeJSON(w, m)
			}
			a.printModels(w, styleFor(w), m)
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", "", "only the models of this provider")
	_ = cmd.RegisterFlagCompletionFunc("provider", a.completeProviders)
	return cmd
}

// printModels writes the models table, the providers that are not ready
// and the default model.
func (a *app) printModels(w io.Writer, st style, m *client.Models) {
	if len(m.Models) == 0 {
		fmt.Fprintln(w, "No models.")
	} else {
		t := &table{st: st, header: []string{"REF", "PROVIDER", "NAME", "CONTEXT"}}
		for _, x := range m.Models {
			ref := x.Ref
			if ref == m.Default {
				ref += " *"
			}
			t.add(ref, x.Provider, orDash(x.Name), contextSize(x.ContextSize))
		}
		t.render(w)
	}
	var notReady []client.ProviderStatus
	for _, p := range m.Providers {
		if p.State != client.ProviderReady {
			notReady = append(notReady, p)
		}
	}
	if len(notReady) > 0 {
		fmt.Fprintln(w)
		for _, p := range notReady {
			line := p.ID + ": " + providerState(st, &p, 200)
			if p.State == client.ProviderNotConfigured {
				line += fmt.Sprintf(" (see '%s providers show %s')", a.kilnCmd(), p.ID)
			}
			fmt.Fprintln(w, line)
		}
	}
	if m.Default != "" {
		listed := slices.ContainsFunc(m.Models, func(x client.Model) bool { return x.Ref == m.Default })
		suffix := ""
		if !listed {
			suffix = " (not in the list above)"
		}
		fmt.Fprintf(w, "\n* default model: %s%s\n", m.Default, suffix)
	}
}

// contextSize formats a context window in tokens: "8k", "128k", "1M",
// "1.5M"; "-" when unknown.
func contextSize(n int) string {
	switch {
	case n <= 0:
		return "-"
	case n >= 1_000_000:
		return strings.TrimSuffix(strconv.FormatFloat(float64(n)/1_000_000, 'f', 1, 64), ".0") + "M"
	case n >= 1000:
		return strconv.Itoa((n+500)/1000) + "k"
	}
	return strconv.Itoa(n)
}
