package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/pluginapi"
	"github.com/kilnhq/kiln/sdk/client"
)

func newMarketplaceCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "marketplace",
		Aliases: []string{"marketplaces"},
		Short:   "Add, list, refresh and publish plugin marketplaces",
		Long: `A marketplace is a signed index of plugins, served as static files. The
server verifies every index it reads: the signature by a key you gave when
adding the marketplace (never a key the marketplace names for itself), the
index's entry in the marketplace's append-only log, and the log's
consistency with the last one it saw. An index older than the last one seen
(rollback), past its expiry (freeze), or inconsistent with the log's history
(a split view or a rewrite) is refused.

Publishing runs locally and needs no server: 'keygen' makes a signing key,
'build' signs an index of plugin folders, 'serve' serves it, 'mirror' makes
a verified offline copy.`,
		Example: `  kiln marketplace add acme https://plugins.acme.dev --key 'acme+1a2b3c4d+AbC...'
  kiln marketplace ls
  kiln plugin search weather
  kiln plugin install weather`,
	}
	parentCmd(cmd)
	cmd.AddCommand(newMarketplaceAddCmd(a), newMarketplaceListCmd(a), newMarketplaceRemoveCmd(a), newMarketplaceRefreshCmd(a))
	cmd.AddCommand(newMarketplacePublishCmds(a)...)
	return cmd
}

// reSCPURL is git's short form of an ssh URL, user@host:path.
var reSCPURL = regexp.MustCompile(`^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:`)

func newMarketplaceAddCmd(a *app) *cobra.Command {
	var req client.AddMarketplaceRequest
	var isClaude bool
	cmd := &cobra.Command{
		Use:   "add [NAME] URL",
		Short: "Add a marketplace and the key to trust for it",
		Long: `Add the marketplace at URL, trusting the verifier key(s) given with --key.
URL is an https:// URL, a file:// URL or a folder on the server's machine
(http:// is accepted for a loopback address only). The server fetches and
verifies the index before adding it. The marketplace is added under the
name its signed index gives; NAME, when given, must be that name.

--quarantine keeps versions younger than the given age out of search,
install and upgrade (they can still be installed by exact version).

--claude adds a Claude Code marketplace under NAME (required: its plugins
are named after it): a folder holding .claude-plugin/marketplace.json (read
as it is, pinned to nothing), or a git repository (https://, ssh://,
user@host:path, or a bare repository here), read at its default branch's
head and pinned to that commit; 'refresh' reads it again. Its skills and
MCP servers install as Kiln bundles named claude.NAME.PLUGIN; what Kiln
does not run (hooks, commands, agents ...) is named when you install. It is
unsigned: nothing vouches that it serves what its authors published. It is
added only with --trust-unsigned, which says that you trust the source
itself.`,
		Example: `  kiln marketplace add https://plugins.acme.dev --key 'acme+1a2b3c4d+AbC...'
  kiln marketplace add acme /srv/marketplace --key "$(cat acme.pub)" --quarantine 72h
  kiln marketplace add team https://github.com/acme/claude-plugins.git --claude --trust-unsigned`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) >= 2 || isClaude {
				return needArgs("NAME", "URL")(cmd, args)
			}
			return needArgs("URL")(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req.URL = args[len(args)-1]
			if len(args) == 2 {
				req.Name = args[0]
			}
			if isClaude {
				req.Kind = pluginapi.MarketplaceClaude
			}
			if !strings.Contains(req.URL, "://") && !(isClaude && reSCPURL.MatchString(req.URL)) {
				abs, err := filepath.Abs(req.URL)
				if err != nil {
					return err
				}
				req.URL = abs
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			m, err := c.AddMarketplace(cmd.Context(), req)
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), m)
			}
			if m.Unsigned {
				fmt.Fprintf(cmd.OutOrStdout(), "Added Claude Code marketplace %s: %d plugins. It is unsigned: you trust it, nothing verifies it.\n", m.Name, m.Plugins)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Added marketplace %s: %d plugins, index version %d, log tree %d, signed by a trusted key.\n", m.Name, m.Plugins, m.Version, m.TreeSize)
			return nil
		},
	}
	cmd.Flags().BoolVar(&isClaude, "claude", false, "add a Claude Code marketplace (unsigned; needs --trust-unsigned)")
	cmd.Flags().BoolVar(&req.TrustUnsigned, "trust-unsigned", false, "trust an unsigned marketplace explicitly")
	cmd.Flags().StringArrayVar(&req.Keys, "key", nil, "a verifier key to trust (repeatable)")
	cmd.Flags().StringVar(&req.Quarantine, "quarantine", "", "offer only versions at least this old, e.g. 72h")
	return cmd
}

func newMarketplaceListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List the marketplaces, their keys and last refresh",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ms, err := c.Marketplaces(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"marketplaces": ms})
			}
			if len(ms) == 0 {
				fmt.Fprintf(w, "No marketplaces. Add one with '%s marketplace add URL --key KEY'.\n", a.kilnCmd())
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"NAME", "PLUGINS", "INDEX", "LOG", "REFRESHED", "URL", "STATUS"}}
			for _, m := range ms {
				status := st.green("verified")
				if m.Unsigned {
					status = st.yellow("unsigned, trusted by you")
				}
				if m.Expired {
					status = st.red("expired") + ": nothing installs from it until a refresh"
				}
				if m.Error != "" {
					status = st.red("refused") + ": " + truncate(m.Error, 80)
				}
				t.add(m.Name, fmt.Sprint(m.Plugins), fmt.Sprint(m.Version), fmt.Sprint(m.TreeSize), ago(m.Refreshed, time.Now()), m.URL, status)
			}
			t.render(w)
			return nil
		},
	}
}

func newMarketplaceRemoveCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "rm NAME",
		Aliases: []string{"remove"},
		Short:   "Forget a marketplace (its installed plugins stay)",
		Args:    needArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			if err := c.RemoveMarketplace(cmd.Context(), args[0]); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Removed marketplace %s. Plugins installed from it stay installed.\n", args[0])
			}
			return nil
		},
	}
}

func newMarketplaceRefreshCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "refresh [NAME]",
		Short: "Fetch and verify marketplace indexes again (all without NAME)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			names := args
			if len(names) == 0 {
				ms, err := c.Marketplaces(cmd.Context())
				if err != nil {
					return err
				}
				for _, m := range ms {
					names = append(names, m.Name)
				}
			}
			var failed error
			var out []*client.Marketplace
			for _, n := range names {
				m, err := c.RefreshMarketplace(cmd.Context(), n)
				if err != nil {
					fmt.Fprintf(cmd.ErrOrStderr(), "error: %s\n", err)
					failed = &exitError{code: exitFailure}
					continue
				}
				out = append(out, m)
				switch {
				case a.jsonOutput():
				case m.Unsigned:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: %d plugins, read again (unsigned: nothing verified).\n", m.Name, m.Plugins)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s: index version %d, %d plugins, log tree %d (consistent with the last one seen).\n", m.Name, m.Version, m.Plugins, m.TreeSize)
				}
			}
			if a.jsonOutput() {
				if err := writeJSON(cmd.OutOrStdout(), map[string]any{"marketplaces": out}); err != nil {
					return err
				}
			}
			return failed
		},
	}
}

func newPluginSearchCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "search [TEXT]",
		Short: "Search every marketplace's plugins",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ps, err := c.SearchPlugins(cmd.Context(), strings.Join(args, " "))
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"plugins": ps})
			}
			if len(ps) == 0 {
				fmt.Fprintln(w, "No plugins found.")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"NAME", "LATEST", "KINDS", "MARKETPLACE", "INSTALLED", "DESCRIPTION"}}
			for _, p := range ps {
				t.add(st.bold(p.Name), orDash(p.Latest), strings.Join(p.Kinds, ","), p.Marketplace, orDash(p.Installed), truncate(p.Description, 60))
			}
			t.render(w)
			return nil
		},
	}
}

func newPluginOutdatedCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "outdated",
		Short: "List installed plugins with a newer version in their marketplace",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ps, err := c.OutdatedPlugins(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"plugins": ps})
			}
			if len(ps) == 0 {
				fmt.Fprintln(w, "Every plugin installed from a marketplace is up to date.")
				return nil
			}
			t := &table{st: styleFor(w), header: []string{"NAME", "INSTALLED", "LATEST", "MARKETPLACE", "PINNED"}}
			for _, p := range ps {
				t.add(p.Name, p.Installed, p.Latest, p.Marketplace, orDash(p.Pinned))
			}
			t.render(w)
			return nil
		},
	}
}

// marketplaceRef reports whether an install argument names a marketplace
// plugin (NAME or NAME@VERSION) rather than a folder. A folder is named
// with a path ("./weather", "/opt/weather", "plugins/weather"), or is a
// plugin folder here by that name; NAME@VERSION is always a plugin.
func marketplaceRef(arg string) (name, version string, ok bool) {
	name, version, at := strings.Cut(arg, "@")
	switch {
	case arg == "" || strings.ContainsAny(arg, `/\`) || strings.HasPrefix(arg, ".") || strings.HasPrefix(arg, "~"):
		return "", "", false
	case at:
		return name, version, true
	}
	if _, err := os.Stat(filepath.Join(arg, plugins.ManifestFile)); err == nil {
		return "", "", false
	}
	return name, "", true
}

// mcpRegistrySource is what kiln plugin install --mcp-registry SOURCE
// [SERVER[@VERSION]] names: with a server, SOURCE is a registry's URL;
// without, a server.json file, read here.
func mcpRegistrySource(source string, args []string, pick string) (*client.MCPRegistrySource, error) {
	isURL := strings.HasPrefix(source, "https://") || strings.HasPrefix(source, "http://")
	switch {
	case len(args) == 1 && isURL:
		name, version, _ := strings.Cut(args[0], "@")
		if name == "" {
			return nil, usageError{fmt.Errorf("%q: name the server, e.g. io.github.acme/weather@1.2.0", args[0])}
		}
		return &client.MCPRegistrySource{Registry: source, Name: name, Version: version, Pick: pick}, nil
	case len(args) == 1:
		return nil, usageError{fmt.Errorf("--mcp-registry %s: with a server name, give the registry's https:// URL", source)}
	case isURL:
		return nil, usageError{fmt.Errorf("--mcp-registry %s: name the server to install from that registry (SERVER[@VERSION]); to install a server.json file, give its path", source)}
	}
	data, err := os.ReadFile(source)
	if err != nil {
		return nil, err
	}
	return &client.MCPRegistrySource{ServerJSON: data, Pick: pick}, nil
}

// installOptions are the flags of kiln plugin install and upgrade.
type installOptions struct {
	yes, allowDowngrade bool
	marketplace         string
}

// installFromMarketplace previews (downloading with a progress bar and
// verifying) then installs a marketplace plugin after the user's
// consent. It returns the installed plugin, or nil when the user said no.
func (a *app) installFromMarketplace(cmd *cobra.Command, req client.MarketplaceInstallRequest, opts installOptions) (*client.PluginInfo, error) {
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	w := cmd.OutOrStdout()
	if a.jsonOutput() {
		w = cmd.ErrOrStderr()
	}
	st := styleFor(w)
	req.Marketplace, req.AllowDowngrade = opts.marketplace, opts.allowDowngrade
	bar := newDownloadBar(w, cmp.Or(req.Name, "server"))
	pv, err := c.PreviewMarketplacePlugin(cmd.Context(), req, func(done, total int64) {
		bar.ChangeMax64(total)
		_ = bar.Set64(done)
	})
	_ = bar.Finish()
	if err != nil {
		return nil, err
	}
	from := "marketplace " + pv.Marketplace
	if req.MCPRegistry != nil {
		from = "an MCP Registry server.json"
	}
	fmt.Fprintf(w, "Plugin %s %s (%s) from %s: %s\n", st.bold(pv.ID), pv.Version, orDash(pv.Runtime), from, pv.Description)
	fmt.Fprintln(w, "Verified:")
	for _, v := range pv.Verified {
		fmt.Fprintf(w, "  %s %s\n", st.green("✓"), v)
	}
	if len(pv.Provides) > 0 {
		fmt.Fprintf(w, "It provides: %s\n", strings.Join(pv.Provides, ", "))
	}
	if len(pv.Skipped) > 0 {
		fmt.Fprintln(w, "Kiln does not run these parts of it:")
		for _, s := range pv.Skipped {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
	if len(pv.Warnings) > 0 {
		fmt.Fprintln(w, "Converting it:")
		for _, s := range pv.Warnings {
			fmt.Fprintf(w, "  - %s\n", s)
		}
	}
	fmt.Fprintln(w, "It asks to:")
	for _, line := range pv.Permissions {
		fmt.Fprintf(w, "  - %s\n", line)
	}
	question := fmt.Sprintf("Install %s %s with these permissions?", pv.ID, pv.Version)
	if pv.Installed != "" {
		fmt.Fprintf(w, "Version %s is installed now.\n", pv.Installed)
		if why := versionRefusal(a, &pv.Preview, opts.allowDowngrade); why != "" {
			return nil, errors.New(why)
		}
		printAdded(w, &pv.Preview)
		printChanges(w, pv.Changes)
		question = fmt.Sprintf("Change %s from %s to %s with the added permissions?", pv.ID, pv.Installed, pv.Version)
	}
	if !opts.yes && pv.NeedsConsent {
		ok, err := confirm(cmd, w, question,
			fmt.Sprintf("installing %s needs your consent to the permissions above, and standard input is not a terminal to ask on: rerun with --yes to consent", pv.ID))
		if err != nil {
			return nil, err
		}
		if !ok {
			fmt.Fprintln(w, "Not installed.")
			return nil, nil
		}
	}
	req.Consent, req.Digest = pv.NeedsConsent, pv.Digest
	switch {
	case req.MCPRegistry != nil && req.MCPRegistry.Registry != "":
		src := *req.MCPRegistry
		src.Version = pv.Version
		req.MCPRegistry = &src
	case req.MCPRegistry == nil:
		req.Version = pv.Version
		if req.Marketplace == "" {
			req.Marketplace = pv.Marketplace
		}
	}
	p, err := c.InstallMarketplacePlugin(cmd.Context(), req)
	if err != nil {
		return nil, a.pluginFailed(cmd, pv.ID, err)
	}
	return p, nil
}

// newDownloadBar is the download's progress bar on w: drawn only on a
// terminal, silent otherwise (scripts and tests read the text).
func newDownloadBar(w io.Writer, name string) *progressbar.ProgressBar {
	f, ok := w.(*os.File)
	if !ok || !stdinIsTerminal(f) {
		return progressbar.DefaultBytesSilent(-1, "download "+name)
	}
	return progressbar.NewOptions64(-1,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription("download "+name),
		progressbar.OptionShowBytes(true), progressbar.OptionThrottle(65*time.Millisecond),
		progressbar.OptionClearOnFinish(), progressbar.OptionSetWidth(30))
}

func newPluginUpgradeCmd(a *app) *cobra.Command {
	var opts installOptions
	cmd := &cobra.Command{
		Use:   "upgrade [NAME]",
		Short: "Upgrade plugins installed from a marketplace (all outdated ones without NAME)",
		Long: `Upgrade a plugin to the newest version its marketplace offers, showing what
changes: the files, and the permissions it asks for beyond the consent you
gave. Any added permission needs your consent again. Pinned plugins are
left alone ('kiln plugin pin'); 'kiln plugin rollback NAME' goes back.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var reqs []client.MarketplaceInstallRequest
			if len(args) == 1 {
				req, err := c.PluginUpgrade(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				reqs = append(reqs, *req)
			} else {
				ps, err := c.OutdatedPlugins(cmd.Context())
				if err != nil {
					return err
				}
				for _, p := range ps {
					if p.Pinned != "" {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s stays at %s: pinned to %s.\n", p.Name, p.Installed, p.Pinned)
						continue
					}
					reqs = append(reqs, client.MarketplaceInstallRequest{Name: p.Name, Version: p.Latest, Marketplace: p.Marketplace})
				}
				if len(reqs) == 0 && !a.jsonOutput() {
					fmt.Fprintln(cmd.OutOrStdout(), "Nothing to upgrade.")
				}
			}
			var done []*client.PluginInfo
			declined := false
			for _, req := range reqs {
				opts.marketplace = req.Marketplace
				p, err := a.installFromMarketplace(cmd, req, opts)
				if err != nil {
					return err
				}
				if p == nil { // declined: the others may still be wanted
					declined = true
					continue
				}
				done = append(done, p)
				if !a.jsonOutput() {
					fmt.Fprintf(cmd.OutOrStdout(), "Upgraded %s to %s. '%s plugin rollback %s' goes back.\n", p.ID, p.Version, a.kilnCmd(), p.ID)
				}
			}
			if a.jsonOutput() {
				if err := writeJSON(cmd.OutOrStdout(), map[string]any{"plugins": done}); err != nil {
					return err
				}
			}
			if declined {
				return &exitError{code: exitFailure}
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&opts.yes, "yes", "y", false, "consent to added permissions without asking")
	return cmd
}

// installLocked reproduces the installation the lock file at path
// records: a dry run first (every plugin downloaded and verified, what
// each asks for shown), one consent for all, then the install.
func (a *app) installLocked(cmd *cobra.Command, path string, yes bool) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if _, err := pluginapi.ParseLock(data); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	if a.jsonOutput() {
		w = cmd.ErrOrStderr()
	}
	plan, err := c.InstallLocked(cmd.Context(), data, false, true)
	if err != nil {
		return err
	}
	consent := false
	for _, r := range plan {
		switch r.Status {
		case pluginapi.LockedUnchanged:
			fmt.Fprintf(w, "%s %s is installed already.\n", r.ID, r.Version)
		case pluginapi.LockedSkipped:
			fmt.Fprintf(w, "%s %s is skipped: %s\n", r.ID, r.Version, r.Reason)
		case pluginapi.LockedWouldInstall:
			from := ""
			if r.Installed != "" {
				from = " (replacing " + r.Installed + ")"
			}
			if len(r.Permissions) == 0 {
				fmt.Fprintf(w, "%s %s from marketplace %s%s, verified; it asks for nothing more.\n", r.ID, r.Version, r.Marketplace, from)
				break
			}
			fmt.Fprintf(w, "%s %s from marketplace %s%s, verified; it asks to:\n", r.ID, r.Version, r.Marketplace, from)
			for _, p := range r.Permissions {
				fmt.Fprintf(w, "  - %s\n", strings.TrimPrefix(p, "adds: "))
			}
			consent = consent || r.NeedsConsent
		}
	}
	if consent && !yes {
		ok, err := confirm(cmd, w, "Install these plugins with these permissions?",
			"installing from the lock file needs your consent to the permissions above, and standard input is not a terminal to ask on: rerun with --yes to consent")
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(w, "Nothing installed.")
			return &exitError{code: exitFailure}
		}
	}
	done, err := c.InstallLocked(cmd.Context(), data, consent, false)
	if a.jsonOutput() {
		if jerr := writeJSON(cmd.OutOrStdout(), map[string]any{"plugins": done}); err == nil {
			return jerr
		}
		return err
	}
	var installed, already, skipped []string
	for _, r := range done {
		switch r.Status {
		case pluginapi.LockedInstalled:
			installed = append(installed, r.ID+" "+r.Version)
		case pluginapi.LockedUnchanged:
			already = append(already, r.ID+" "+r.Version)
		case pluginapi.LockedSkipped:
			skipped = append(skipped, r.ID+" "+r.Version)
		}
	}
	if err != nil {
		if len(installed) > 0 {
			fmt.Fprintf(w, "Installed before the failure (they stay installed): %s.\n", strings.Join(installed, ", "))
		} else {
			fmt.Fprintln(w, "Nothing was installed before the failure.")
		}
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Installed %d plugins from %s; %d were installed already.\n", len(installed), path, len(already))
	if len(skipped) > 0 {
		fmt.Fprintf(cmd.OutOrStdout(), "Skipped %d the lock cannot fetch (installed from a folder): %s.\n", len(skipped), strings.Join(skipped, ", "))
	}
	return nil
}
