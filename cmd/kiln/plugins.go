package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/plugins"
	"github.com/kilnhq/kiln/plugins/integrity"
	"github.com/kilnhq/kiln/sdk/client"
)

func newPluginCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "plugin",
		Aliases: []string{"plugins"},
		Short:   "Install, inspect, enable and remove plugins",
		Long: `Plugins add tools, model providers and sandbox runtimes to the server. A
plugin is a folder with a kiln-plugin.json manifest that says what the
plugin is and which permissions it needs. Installing shows those
permissions and asks for your consent; the plugin loads at once, no restart.

Installing another version keeps the one it replaces on disk: 'kiln plugin
rollback' switches back to it in one step. 'kiln plugin pin' holds a plugin
at its version. The server keeps a lock file of what is installed,
<data>/plugins.lock.

PATH arguments name a folder on the server's machine: the server reads it
there. 'kiln plugin checksum' runs locally and needs no server.`,
		Example: `  kiln plugin install ./weather
  kiln plugin ls
  kiln plugin inspect weather
  kiln plugin rollback weather
  kiln plugin pin weather@1.2.0
  kiln plugin disable weather
  kiln plugin checksum ./weather --write`,
	}
	parentCmd(cmd)
	cmd.AddCommand(
		newPluginListCmd(a), newPluginInspectCmd(a), newPluginInstallCmd(a),
		newPluginEnableCmd(a, true), newPluginEnableCmd(a, false), newPluginRemoveCmd(a),
		newPluginRollbackCmd(a), newPluginPinCmd(a), newPluginUnpinCmd(a),
		newPluginSearchCmd(a), newPluginOutdatedCmd(a), newPluginUpgradeCmd(a),
		newPluginChecksumCmd(a),
	)
	return cmd
}

func newPluginListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:     "ls",
		Aliases: []string{"list"},
		Short:   "List plugins, built-ins included",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			ps, err := c.Plugins(cmd.Context())
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				if ps == nil {
					ps = []*client.PluginInfo{}
				}
				return writeJSON(w, map[string]any{"plugins": ps})
			}
			if len(ps) == 0 {
				fmt.Fprintln(w, "No plugins.")
				return nil
			}
			st := styleFor(w)
			t := &table{st: st, header: []string{"ID", "VERSION", "RUNTIME", "STATUS", "TOOLS", "BUILTIN"}}
			for _, p := range ps {
				builtin := ""
				if p.Builtin {
					builtin = "yes"
				}
				t.add(p.ID, orDash(p.Version), orDash(p.Runtime), pluginStatus(st, p, 60), strconv.Itoa(len(p.Tools)), builtin)
			}
			t.render(w)
			return nil
		},
	}
}

// pluginStatus colours a plugin's status; a failed one shows why, cut to
// about n characters.
func pluginStatus(st style, p *client.PluginInfo, n int) string {
	switch p.Status {
	case client.PluginEnabled:
		return st.green(string(p.Status))
	case client.PluginDisabled:
		return st.dim(string(p.Status))
	case client.PluginFailed:
		if p.Error == "" {
			return st.red(string(p.Status))
		}
		return st.red(string(p.Status)) + ": " + truncate(p.Error, n)
	}
	return orDash(string(p.Status))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newPluginInspectCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "inspect ID|PATH",
		Short: "Show an installed plugin, or what installing a plugin folder would do",
		Long: `Show an installed plugin: its status, tools, permissions, approval policy,
folder, checksum and health.

When the argument is an existing folder it is previewed instead, as
'kiln plugin install' would show it, without installing anything.`,
		Args:              needArgs("ID|PATH"),
		ValidArgsFunction: firstArg(a.completePluginsOrDirs),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if fi, err := os.Stat(args[0]); err == nil && fi.IsDir() {
				abs, err := filepath.Abs(args[0])
				if err != nil {
					return err
				}
				pv, err := c.PreviewPlugin(cmd.Context(), abs)
				if err != nil {
					return err
				}
				if a.jsonOutput() {
					return writeJSON(w, pv)
				}
				printPreview(w, styleFor(w), abs, pv)
				return nil
			}
			p, err := c.Plugin(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(w, p)
			}
			printPlugin(w, styleFor(w), p)
			return nil
		},
	}
}

// detail writes one "Name: value" line of a details view.
func detail(w io.Writer, name, value string) { fmt.Fprintf(w, "%-13s %s\n", name+":", value) }

// detailList writes a heading and its items, indented, or "(none)".
func detailList(w io.Writer, name string, items []string, bullet string) {
	if len(items) == 0 {
		detail(w, name, "(none)")
		return
	}
	fmt.Fprintf(w, "%s:\n", name)
	for _, it := range items {
		fmt.Fprintf(w, "  %s%s\n", bullet, it)
	}
}

// printPlugin shows an installed plugin's details.
func printPlugin(w io.Writer, st style, p *client.PluginInfo) {
	detail(w, "ID", st.bold(p.ID))
	detail(w, "Version", orDash(p.Version))
	detail(w, "Status", pluginStatus(st, p, 1000))
	if p.Builtin {
		detail(w, "Built in", "yes (can be disabled, not removed)")
	}
	detail(w, "Runtime", orDash(p.Runtime))
	detail(w, "Provides", orDash(strings.Join(p.Provides, ", ")))
	detail(w, "Description", orDash(p.Description))
	if p.Dir != "" {
		detail(w, "Folder", p.Dir)
	}
	if p.SHA256 != "" {
		detail(w, "SHA256", p.SHA256)
	}
	if p.Digest != "" && p.Digest != p.SHA256 {
		detail(w, "Digest", p.Digest)
	}
	if !p.InstalledAt.IsZero() {
		detail(w, "Installed", fmt.Sprintf("%s (%s)", p.InstalledAt.Local().Format(time.DateTime), ago(p.InstalledAt, time.Now())))
	}
	switch s := p.Source; {
	case s == nil:
	case s.IndexVersion == 0 && s.Commit != "":
		detail(w, "Source", fmt.Sprintf("unsigned marketplace %s, converted at commit %s", s.Marketplace, s.Commit))
	case s.IndexVersion == 0:
		detail(w, "Source", fmt.Sprintf("unsigned marketplace %s, converted from its folder (no commit pins it)", s.Marketplace))
	default:
		detail(w, "Source", fmt.Sprintf("marketplace %s (index version %d, archive sha256 %s)", s.Marketplace, s.IndexVersion, s.ArchiveSHA256))
	}
	if p.Previous != "" {
		detail(w, "Previous", p.Previous+" (kept; 'kiln plugin rollback "+p.ID+"' switches to it)")
	}
	if p.Pinned != "" {
		detail(w, "Pinned", p.Pinned)
	}
	if h := pluginHealth(p); h != "" {
		detail(w, "Health", h)
	}
	if slices.Contains(p.Provides, "toolset") || len(p.Provides) == 0 {
		detailList(w, "Tools", p.Tools, "")
	}
	for _, k := range providedKinds {
		if slices.Contains(p.Provides, k.kind) {
			detailList(w, k.label, p.Provided[k.kind], "")
		}
	}
	detailList(w, "Permissions", p.Permissions, "- ")
	detailList(w, "Interrupt on", policyLines(p.InterruptOn), "")
}

// pluginHealth describes a process plugin's process, or "".
func pluginHealth(p *client.PluginInfo) string {
	var parts []string
	if p.PID != 0 {
		parts = append(parts, "pid "+strconv.Itoa(p.PID))
	}
	if p.Restarts != 0 || p.PID != 0 {
		parts = append(parts, plural(p.Restarts, "restart"))
	}
	return strings.Join(parts, ", ")
}

// policyLines renders an interruptOn policy, one pattern a line, sorted.
func policyLines(p core.Policy) []string {
	pats := make([]string, 0, len(p))
	for pat := range p {
		pats = append(pats, pat)
	}
	slices.Sort(pats)
	var out []string
	for _, pat := range pats {
		r := p[pat]
		switch {
		case !r.Interrupt:
			out = append(out, pat+": never held")
		case len(r.AllowedDecisions) == 0:
			out = append(out, pat+": held for a decision")
		default:
			out = append(out, pat+": held for a decision ("+strings.Join(r.AllowedDecisions, ", ")+")")
		}
	}
	return out
}

// printPreview shows what installing the folder at path would do.
func printPreview(w io.Writer, st style, path string, pv *client.PluginPreview) {
	detail(w, "Folder", path)
	detail(w, "ID", st.bold(pv.ID))
	version := pv.Version
	if pv.Installed != "" {
		version += st.yellow(" (installed: " + pv.Installed + ")")
	}
	detail(w, "Version", version)
	detail(w, "Runtime", orDash(pv.Runtime))
	detail(w, "Provides", orDash(strings.Join(pv.Provides, ", ")))
	detail(w, "Description", orDash(pv.Description))
	detail(w, "SHA256", pv.SHA256)
	if len(pv.InterruptOn) > 0 {
		detailList(w, "Interrupt on", policyLines(pv.InterruptOn), "")
	}
	fmt.Fprintln(w, "It asks to:")
	for _, line := range pv.Permissions {
		fmt.Fprintf(w, "  - %s\n", line)
	}
	if pv.Installed != "" {
		printAdded(w, pv)
		printChanges(w, pv.Changes)
	}
}

// maxChangeLines is how many changed files the CLI names; -o json has
// them all.
const maxChangeLines = 20

// printChanges says which files an upgrade changes: the summary, then
// each file, "~" changed, "+" added, "-" removed.
func printChanges(w io.Writer, c *client.PluginChanges) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "Files: %s.\n", c.Summary)
	var lines []string
	for _, f := range []struct {
		mark  string
		paths []string
	}{{"~", c.Changed}, {"+", c.Added}, {"-", c.Removed}} {
		for _, p := range f.paths {
			lines = append(lines, "  "+f.mark+" "+p)
		}
	}
	if len(lines) > maxChangeLines {
		lines = append(lines[:maxChangeLines], fmt.Sprintf("  ... and %d more (-o json lists them all)", len(lines)-maxChangeLines))
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// versionRefusal is why installing pv over the installed version is
// refused before anything is asked: the plugin is pinned, or pv is older
// and allowDowngrade is not set. "" when it is not.
func versionRefusal(a *app, pv *client.PluginPreview, allowDowngrade bool) string {
	switch {
	case pv.Pinned != "":
		return fmt.Sprintf("plugin %s is pinned at %s, so installing %s is refused; unpin it first ('%s plugin unpin %s')", pv.ID, pv.Pinned, pv.Version, a.kilnCmd(), pv.ID)
	case pv.Downgrade && !allowDowngrade:
		return fmt.Sprintf("plugin %s %s is older than the installed %s; rerun with --allow-downgrade to install it anyway", pv.ID, pv.Version, pv.Installed)
	}
	return ""
}

// printAdded says what an upgrade asks for beyond the consent given to
// the installed version.
func printAdded(w io.Writer, pv *client.PluginPreview) {
	if len(pv.Added) == 0 {
		fmt.Fprintf(w, "It asks for nothing beyond what was consented to for %s.\n", pv.Installed)
		return
	}
	fmt.Fprintf(w, "Beyond what was consented to for %s, it asks to:\n", pv.Installed)
	for _, line := range pv.Added {
		fmt.Fprintf(w, "  + %s\n", strings.TrimPrefix(line, "adds: "))
	}
}

// pluginFailed prints the error of a plugin that is installed or enabled
// but did not start, with what to do, and returns the exit error.
func (a *app) pluginFailed(cmd *cobra.Command, id string, err error) error {
	if !client.IsUnavailable(err) {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "error: %s\n", err)
	fmt.Fprintf(cmd.ErrOrStderr(), "The plugin is installed but not running. See '%s plugin inspect %s'; once it is fixed, '%s plugin enable %s'.\n",
		a.kilnCmd(), id, a.kilnCmd(), id)
	return &exitError{code: exitFailure}
}

func newPluginInstallCmd(a *app) *cobra.Command {
	var yes, disabled, allowDowngrade, locked bool
	var from, mcpRegistry, pick string
	cmd := &cobra.Command{
		Use:   "install NAME[@VERSION] | PATH | --locked [LOCKFILE] | --mcp-registry SERVER.JSON | --mcp-registry URL SERVER[@VERSION]",
		Short: "Install a plugin from a marketplace or a folder, after consenting to its permissions",
		Long: `Install NAME from the marketplaces added ('kiln marketplace add'): VERSION is
an exact version, a range such as ^1.2 or ~1.2, or the newest offered when
left out. Only an exact version installs one still in the marketplace's
quarantine or yanked. The server downloads the archive (with a progress
bar here) and verifies its size, sha256 and unpacked folder digest against
the marketplace's signed index before anything is installed.

A PATH names a plugin folder instead: anything with a slash or starting
with a dot ("./weather", "/opt/weather"), on the server's machine (a
relative path is resolved here first).

--locked installs exactly what a lock file records (LOCKFILE, default
./plugins.lock: copy <data root>/plugins.lock from another server): every
plugin at its version from its marketplace, refused when the marketplace
now publishes other bytes. The plugin's identity and the permissions it asks
for are shown first and you are asked to consent; --yes consents without
asking, which is needed when standard input is not a terminal. The consent
is bound to the previewed files: if the plugin's entry changes before the
install, the install fails. Installing a new version of an installed
plugin shows what it asks for beyond the consent given before, and asks
only when it asks for more; it also lists the files that change. The
version it replaces is kept on disk ('kiln plugin rollback' switches back).
A version older than the installed one needs --allow-downgrade; a pinned
plugin must be unpinned first.

The plugin is enabled at once unless --disabled is given. If it fails to
start the command fails, and the plugin stays installed, listed as failed.

--mcp-registry installs an MCP server an MCP Registry describes, as an
mcp-servers bundle: from a server.json file (read here), or from the
registry (or mirror) at URL by the server's name, at VERSION or the version
the registry marks latest. The package runs at the exact version the
server.json names; one at "latest", without a version or at a range is
refused, and an MCPB file is installed only when its sha256 is the
fileSha256 named. --pick packages[N] or remotes[N] chooses what to run.
Nothing in a registry is signed: you trust the file or the registry.`,
		Example: `  kiln plugin install weather
  kiln plugin install weather@^1.2 --marketplace acme
  kiln plugin install ./weather
  kiln plugin install /opt/kiln-plugins/weather --yes
  kiln plugin install --locked plugins.lock --yes
  kiln plugin install --mcp-registry ./server.json
  kiln plugin install --mcp-registry https://registry.modelcontextprotocol.io io.github.acme/weather@1.2.0`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: firstArg(completeDirs),
		RunE: func(cmd *cobra.Command, args []string) error {
			if mcpRegistry != "" {
				if locked || from != "" || disabled {
					return usageError{errors.New("--mcp-registry does not go with --locked, --marketplace or --disabled")}
				}
				src, err := mcpRegistrySource(mcpRegistry, args, pick)
				if err != nil {
					return err
				}
				p, err := a.installFromMarketplace(cmd, client.MarketplaceInstallRequest{MCPRegistry: src},
					installOptions{yes: yes, allowDowngrade: allowDowngrade})
				if err != nil || p == nil {
					if err == nil {
						err = &exitError{code: exitFailure}
					}
					return err
				}
				return a.printInstalled(cmd, p)
			}
			if pick != "" {
				return usageError{errors.New("--pick goes with --mcp-registry")}
			}
			if locked {
				file := "plugins.lock"
				if len(args) == 1 {
					file = args[0]
				}
				return a.installLocked(cmd, file, yes)
			}
			if len(args) == 0 {
				return usageError{errors.New("missing NAME[@VERSION] or PATH: the plugin to install from a marketplace, or its folder (or --locked)")}
			}
			if name, version, ok := marketplaceRef(args[0]); ok {
				if disabled {
					return usageError{errors.New("--disabled applies to a folder; a marketplace plugin is enabled once installed (disable it after with 'kiln plugin disable')")}
				}
				p, err := a.installFromMarketplace(cmd, client.MarketplaceInstallRequest{Name: name, Version: version},
					installOptions{yes: yes, allowDowngrade: allowDowngrade, marketplace: from})
				if err != nil || p == nil {
					if err == nil {
						err = &exitError{code: exitFailure}
					}
					return err
				}
				return a.printInstalled(cmd, p)
			}
			path, err := filepath.Abs(args[0])
			if err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			pv, err := c.PreviewPlugin(cmd.Context(), path)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			// Human text goes to standard error when standard output is JSON.
			w := out
			if a.jsonOutput() {
				w = cmd.ErrOrStderr()
			}
			st := styleFor(w)
			fmt.Fprintf(w, "Plugin %s %s (%s): %s\n", st.bold(pv.ID), pv.Version, orDash(pv.Runtime), pv.Description)
			if pv.Installed != "" {
				fmt.Fprintf(w, "Version %s is installed now.\n", pv.Installed)
				if why := versionRefusal(a, pv, allowDowngrade); why != "" {
					return errors.New(why)
				}
			}
			if len(pv.InterruptOn) > 0 {
				fmt.Fprintln(w, "Its tools ask for your approval by default:")
				for _, line := range policyLines(pv.InterruptOn) {
					fmt.Fprintf(w, "  %s\n", line)
				}
			}
			fmt.Fprintln(w, "It asks to:")
			for _, line := range pv.Permissions {
				fmt.Fprintf(w, "  - %s\n", line)
			}
			question := fmt.Sprintf("Install %s %s with these permissions?", pv.ID, pv.Version)
			if pv.Installed != "" {
				printAdded(w, pv)
				printChanges(w, pv.Changes)
				question = fmt.Sprintf("Upgrade %s to %s with the added permissions?", pv.ID, pv.Version)
				if pv.Downgrade {
					question = fmt.Sprintf("Downgrade %s to %s with the added permissions?", pv.ID, pv.Version)
				}
			}
			if !yes && pv.NeedsConsent {
				ok, err := confirm(cmd, w, question,
					fmt.Sprintf("installing %s needs your consent to the permissions above, and standard input is not a terminal to ask on: rerun with --yes to consent", pv.ID))
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(w, "Not installed.")
					return &exitError{code: exitFailure}
				}
			}
			p, err := c.InstallPlugin(cmd.Context(), client.InstallPluginRequest{
				Path: path, Consent: pv.NeedsConsent, SHA256: pv.SHA256, Disabled: disabled, AllowDowngrade: allowDowngrade,
			})
			if err != nil {
				return a.pluginFailed(cmd, pv.ID, err)
			}
			return a.printInstalled(cmd, p)
		},
	}
	cmd.Flags().BoolVarP(&yes, "yes", "y", false, "consent to the plugin's permissions without asking")
	cmd.Flags().BoolVar(&disabled, "disabled", false, "install a folder without enabling it")
	cmd.Flags().BoolVar(&allowDowngrade, "allow-downgrade", false, "allow installing a version older than the installed one")
	cmd.Flags().BoolVar(&locked, "locked", false, "install exactly what a lock file records")
	cmd.Flags().StringVar(&from, "marketplace", "", "the marketplace to install from, when several offer NAME")
	cmd.Flags().StringVar(&mcpRegistry, "mcp-registry", "", "install an MCP server from a server.json file, or from the MCP registry at this URL (then name the server)")
	cmd.Flags().StringVar(&pick, "pick", "", "with --mcp-registry: what to run, packages[N] or remotes[N]")
	return cmd
}

// printInstalled reports an installed plugin: what it made available and
// the version kept to roll back to.
func (a *app) printInstalled(cmd *cobra.Command, p *client.PluginInfo) error {
	out := cmd.OutOrStdout()
	if a.jsonOutput() {
		return writeJSON(out, p)
	}
	switch {
	case p.Status == client.PluginDisabled:
		fmt.Fprintf(out, "Installed %s %s, disabled. Enable it with '%s plugin enable %s'.\n", p.ID, p.Version, a.kilnCmd(), p.ID)
	default:
		fmt.Fprintf(out, "Installed %s %s. %s\n", p.ID, p.Version, toolsSentence(p))
	}
	if p.Previous != "" {
		fmt.Fprintf(out, "%s is kept: '%s plugin rollback %s' switches back to it.\n", p.Previous, a.kilnCmd(), p.ID)
	}
	return nil
}

func newPluginRollbackCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "rollback ID",
		Short: "Switch a plugin back to the version installed before, kept on disk",
		Long: `Switch a plugin to the version it had before its last upgrade, in one
step, with the consent given to that version. Its folder is checked against
the digest recorded when it was installed before anything changes; if it
changed, nothing is rolled back. The version rolled back from is kept in
turn, so rolling back again rolls forward. A pinned plugin must be unpinned
first. If the previous version does not start, the current one is started
again and the command fails.`,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completePlugins),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.RollbackPlugin(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, p)
			}
			fmt.Fprintf(w, "Rolled %s back from %s to %s (%s). '%s plugin rollback %s' rolls forward again.\n",
				p.ID, p.Previous, p.Version, p.Status, a.kilnCmd(), p.ID)
			return nil
		},
	}
}

func newPluginPinCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "pin ID[@VERSION]",
		Short: "Hold a plugin at its installed version",
		Long: `Pin a plugin at its installed version: 'kiln plugin upgrade' leaves it
alone, and installing another version of it or rolling it back is refused
until 'kiln plugin unpin'. VERSION, when given, must be the installed
version; the lock file records the pin.`,
		Example: `  kiln plugin pin weather
  kiln plugin pin weather@1.2.0`,
		Args:              needArgs("ID[@VERSION]"),
		ValidArgsFunction: firstArg(a.completePlugins),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			id, version, hasVersion := strings.Cut(args[0], "@")
			if hasVersion && version == "" {
				return fmt.Errorf("%q names no version after the @: write ID@VERSION, or ID to pin the installed version", args[0])
			}
			if !hasVersion {
				p, err := c.Plugin(cmd.Context(), id)
				if err != nil {
					return err
				}
				version = p.Version
			}
			p, err := c.PinPlugin(cmd.Context(), id, version)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, p)
			}
			fmt.Fprintf(w, "Pinned %s at %s.\n", p.ID, p.Pinned)
			return nil
		},
	}
}

func newPluginUnpinCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:               "unpin ID",
		Short:             "Let a pinned plugin be upgraded again",
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completePlugins),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.UnpinPlugin(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, p)
			}
			fmt.Fprintf(w, "Unpinned %s (at %s).\n", p.ID, p.Version)
			return nil
		},
	}
}

// providedKinds are the kinds besides toolset whose items inspect lists.
var providedKinds = []struct{ kind, label string }{
	{"model-provider", "Models"}, {"skills", "Skills"}, {"mcp-servers", "MCP servers"}, {"sandbox-runtime", "Sandbox runtimes"},
}

// toolsSentence says what an enabled plugin made available: its tools,
// its models, its skills and MCP servers.
func toolsSentence(p *client.PluginInfo) string {
	var parts []string
	if len(p.Tools) > 0 {
		parts = append(parts, "Its tools are now callable as "+strings.Join(p.Tools, ", ")+".")
	}
	if slices.Contains(p.Provides, "model-provider") {
		parts = append(parts, "Its models are available as "+p.ID+":<model> (kiln models).")
	}
	if s := p.Provided["skills"]; len(s) > 0 {
		parts = append(parts, "Its skills: "+strings.Join(s, ", ")+".")
	}
	if s := p.Provided["mcp-servers"]; len(s) > 0 {
		parts = append(parts, "Its MCP servers: "+strings.Join(s, ", ")+".")
	}
	if len(parts) == 0 {
		return "It provides no tools."
	}
	return strings.Join(parts, " ")
}

func newPluginEnableCmd(a *app, enable bool) *cobra.Command {
	use, short := "disable ID", "Unload a plugin; it stays installed"
	if enable {
		use, short = "enable ID", "Load a plugin and make its tools callable"
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completePlugins),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			var p *client.PluginInfo
			if enable {
				p, err = c.EnablePlugin(cmd.Context(), args[0])
			} else {
				p, err = c.DisablePlugin(cmd.Context(), args[0])
			}
			if err != nil {
				return a.pluginFailed(cmd, args[0], err)
			}
			w := cmd.OutOrStdout()
			if a.jsonOutput() {
				return writeJSON(w, p)
			}
			if enable {
				fmt.Fprintf(w, "Enabled %s %s. %s\n", p.ID, p.Version, toolsSentence(p))
			} else {
				what := "its tools are"
				if slices.Contains(p.Provides, "model-provider") {
					what = "its models are"
				}
				fmt.Fprintf(w, "Disabled %s %s; %s not available until it is enabled again.\n", p.ID, p.Version, what)
			}
			return nil
		},
	}
}

func newPluginRemoveCmd(a *app) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:     "rm ID",
		Aliases: []string{"remove", "uninstall"},
		Short:   "Disable and delete a plugin",
		Long: `Disable and delete an installed plugin. You are asked to confirm unless
--yes is given, which is needed when standard input is not a terminal.
Built-in plugins cannot be removed, only disabled.`,
		Args:              needArgs("ID"),
		ValidArgsFunction: firstArg(a.completePlugins),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client()
			if err != nil {
				return err
			}
			p, err := c.Plugin(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			// A built-in cannot be removed: the server refuses and says why.
			if !p.Builtin {
				err := confirmDestructive(cmd, yes, destructive{
					action: "removing plugin " + p.ID,
					question: func() (string, error) {
						if len(p.Tools) > 0 {
							return fmt.Sprintf("Remove plugin %s %s and its %s?", p.ID, p.Version, plural(len(p.Tools), "tool")), nil
						}
						return fmt.Sprintf("Remove plugin %s %s?", p.ID, p.Version), nil
					},
					declined: "Not removed.",
				})
				if err != nil {
					return err
				}
			}
			if err := c.RemovePlugin(cmd.Context(), p.ID); err != nil {
				return err
			}
			if !a.jsonOutput() {
				fmt.Fprintf(cmd.OutOrStdout(), "Removed plugin %s %s.\n", p.ID, p.Version)
			}
			return nil
		},
	}
	addYesFlag(cmd, &yes)
	return cmd
}

func newPluginChecksumCmd(a *app) *cobra.Command {
	var write bool
	cmd := &cobra.Command{
		Use:   "checksum DIR",
		Short: "Compute a plugin's entry sha256, and with --write store it in kiln-plugin.json",
		Long: `Compute the sha256 of the entry file named by DIR/kiln-plugin.json, for
plugin authors after building the entry. The entry must lie inside DIR.
This runs locally and needs no server.

With --write the digest is stored in the manifest's "sha256" field (the
other fields are kept, in order; the file is rewritten with two-space
indentation) and the manifest is then checked as the server would check
it; any problems are listed and the command fails.`,
		Example: `  kiln plugin checksum ./weather
  kiln plugin checksum ./weather --write`,
		Args:              needArgs("DIR"),
		ValidArgsFunction: firstArg(completeDirs),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir := args[0]
			sum, entry, current, err := entryChecksum(dir)
			if err != nil {
				return err
			}
			manifest := filepath.Join(dir, plugins.ManifestFile)
			w := cmd.OutOrStdout()
			if write && current != sum {
				if err := writeManifestSHA256(dir, sum); err != nil {
					return err
				}
			}
			if write {
				if _, err := plugins.LoadManifest(dir); err != nil {
					return fmt.Errorf("the sha256 is written, but the manifest has problems: %w", err)
				}
			}
			if a.jsonOutput() {
				return writeJSON(w, map[string]any{"manifest": manifest, "entry": entry, "sha256": sum, "written": write && current != sum})
			}
			switch {
			case !write:
				fmt.Fprintln(w, sum)
				if current != sum {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %s has sha256 %q; rerun with --write to store this one.\n", manifest, current)
				}
			case current == sum:
				fmt.Fprintf(w, "%s already has the sha256 of %s: %s\nThe manifest is valid.\n", manifest, entry, sum)
			default:
				fmt.Fprintf(w, "Wrote the sha256 of %s to %s: %s\nThe manifest is valid.\n", entry, manifest, sum)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&write, "write", false, `store the digest in kiln-plugin.json's "sha256" field and check the manifest`)
	return cmd
}

// manifestObject is a JSON object's members in the order of the document.
type manifestObject struct {
	keys   []string
	values []json.RawMessage
}

// readManifestObject reads dir's kiln-plugin.json as a JSON object,
// without interpreting it beyond that.
func readManifestObject(root *os.Root) (*manifestObject, error) {
	fi, err := root.Stat(plugins.ManifestFile)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", plugins.ManifestFile)
	}
	if fi.Size() > plugins.MaxManifestSize {
		return nil, fmt.Errorf("%s is larger than %d KiB", plugins.ManifestFile, plugins.MaxManifestSize>>10)
	}
	data, err := root.ReadFile(plugins.ManifestFile)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	notObject := fmt.Errorf("%s is not a JSON object", plugins.ManifestFile)
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, notObject
	}
	obj := &manifestObject{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", plugins.ManifestFile, err)
		}
		key, ok := tok.(string)
		if !ok {
			return nil, notObject
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%s: field %q: %w", plugins.ManifestFile, key, err)
		}
		obj.keys, obj.values = append(obj.keys, key), append(obj.values, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%s: %w", plugins.ManifestFile, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%s: unexpected data after the JSON object", plugins.ManifestFile)
	}
	return obj, nil
}

// str returns the string value of member key, if it is one.
func (o *manifestObject) str(key string) (string, bool) {
	i := slices.Index(o.keys, key)
	if i < 0 {
		return "", false
	}
	var s string
	if json.Unmarshal(o.values[i], &s) != nil {
		return "", false
	}
	return s, true
}

// set replaces member key's value, or appends the member.
func (o *manifestObject) set(key string, v json.RawMessage) {
	if i := slices.Index(o.keys, key); i >= 0 {
		o.values[i] = v
		return
	}
	o.keys, o.values = append(o.keys, key), append(o.values, v)
}

// marshal writes the object with two-space indentation and a final newline.
func (o *manifestObject) marshal() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o.values[i])
	}
	b.WriteByte('}')
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		return nil, err
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// entryChecksum returns the sha256 of the entry file of the plugin in
// dir, the entry's path and the sha256 the manifest states now ("" when
// it states none). The entry is read through an os.Root, so that
// neither ".." nor a symlink can take it outside dir.
func entryChecksum(dir string) (sum, entry, current string, err error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", "", "", err
	}
	defer root.Close()
	obj, err := readManifestObject(root)
	if err != nil {
		return "", "", "", err
	}
	entry, ok := obj.str("entry")
	if !ok || entry == "" {
		_, hasRuntime := obj.str("runtime")
		_, hasSum := obj.str("sha256")
		if slices.Contains(obj.keys, "provides") && !slices.Contains(obj.keys, "entry") && !hasRuntime && !hasSum {
			t, err := integrity.Tree(dir)
			if err != nil {
				return "", "", "", err
			}
			return "", "", "", fmt.Errorf("%s has no entry: it is a data-only bundle, whose install records the digest of the whole folder, %s (over %d files); nothing needs to be written", dir, t.Digest, t.Files)
		}
		return "", "", "", fmt.Errorf("%s has no \"entry\" string naming the plugin's entry file", filepath.Join(dir, plugins.ManifestFile))
	}
	current, _ = obj.str("sha256")
	if strings.ContainsRune(entry, '\\') || filepath.IsAbs(entry) || strings.HasPrefix(entry, "/") {
		return "", "", "", fmt.Errorf("entry %q: must be a slash-separated path relative to the plugin folder", entry)
	}
	if sum, err = integrity.FileSum(dir, entry); err != nil {
		return "", "", "", fmt.Errorf("entry %q: %w", entry, err)
	}
	return sum, entry, current, nil
}

// writeManifestSHA256 sets the "sha256" field of dir's manifest, keeping
// the other fields. The file is replaced atomically and keeps its mode.
func writeManifestSHA256(dir, sum string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	obj, err := readManifestObject(root)
	if err != nil {
		return err
	}
	v, _ := json.Marshal(sum)
	obj.set("sha256", v)
	data, err := obj.marshal()
	if err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if fi, err := root.Stat(plugins.ManifestFile); err == nil {
		mode = fi.Mode().Perm()
	}
	tmp := "." + plugins.ManifestFile + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := root.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	_ = root.Chmod(tmp, mode) // WriteFile's mode is subject to the umask
	if err := root.Rename(tmp, plugins.ManifestFile); err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return nil
}
