package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/marketplace"
)

// The publishing commands run locally: they read and write folders on
// this machine and need no server.
func newMarketplacePublishCmds(a *app) []*cobra.Command {
	return []*cobra.Command{
		newMarketplaceKeygenCmd(a), newMarketplaceBuildCmd(a), newMarketplaceServeCmd(a),
		newMarketplaceMirrorCmd(a), newMarketplaceRotateCmd(a),
	}
}

func newMarketplaceKeygenCmd(a *app) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen NAME",
		Short: "Make a marketplace signing key (runs locally)",
		Long: `Make an Ed25519 signing key named NAME. The signer key is written to --out
(default NAME.key, mode 0600; keep it secret, e.g. in your CI's secret
store) and the verifier key to the same path with .pub; the verifier key is
printed: users give it to 'kiln marketplace add --key'.`,
		Example: `  kiln marketplace keygen acme
  kiln marketplace keygen acme --out ~/.config/kiln/acme.key`,
		Args: needArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = args[0] + ".key"
			}
			signer, verifier, err := marketplace.GenerateKey(args[0])
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				if errors.Is(err, os.ErrExist) {
					return fmt.Errorf("%s exists: a signing key is never overwritten; choose another --out", out)
				}
				return err
			}
			if _, err := f.WriteString(signer + "\n"); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			if err := os.WriteFile(out+".pub", []byte(verifier+"\n"), 0o644); err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), map[string]string{"signer_file": out, "verifier": verifier})
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "Signer key written to %s (keep it secret); verifier key to %s.pub:\n", out, out)
			fmt.Fprintln(cmd.OutOrStdout(), verifier)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the signer key's file (default NAME.key)")
	return cmd
}

// readSigner reads a signer key file made by keygen.
func readSigner(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// buildTime is the build's time: --time, else SOURCE_DATE_EPOCH (the
// reproducible-builds convention), else now.
func buildTime(flag string) (time.Time, error) {
	if flag != "" {
		t, err := time.Parse(time.RFC3339, flag)
		if err != nil {
			return time.Time{}, fmt.Errorf("--time %q: use RFC 3339, e.g. 2026-12-06T10:00:00Z", flag)
		}
		return t, nil
	}
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q: not a number of seconds", s)
		}
		return time.Unix(n, 0).UTC(), nil
	}
	return time.Now().UTC(), nil
}

func newMarketplaceBuildCmd(a *app) *cobra.Command {
	var sign, at string
	cmd := &cobra.Command{
		Use:   "build DIR --sign KEYFILE",
		Short: "Publish the plugin folders publish.json lists as a signed index (runs locally)",
		Long: `Build the marketplace in DIR: DIR/publish.json names the marketplace, its
owner and the plugin folders to publish. Each folder's version is packed
into plugins/<name>/, the versions published before stay, and the next
index version is signed with KEYFILE and appended to the marketplace's log.
Published versions are immutable: a folder whose version was published
with other bytes is refused.

The same DIR, key and time give the same bytes: the time is --time, or
SOURCE_DATE_EPOCH, or now. Serve DIR with any static host or with
'kiln marketplace serve DIR'.`,
		Example: `  kiln marketplace build ./acme-market --sign acme.key
  SOURCE_DATE_EPOCH=1765000000 kiln marketplace build ./acme-market --sign acme.key`,
		Args: needArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if sign == "" {
				return errors.New("--sign KEYFILE is required: the signer key made by 'kiln marketplace keygen'")
			}
			signer, err := readSigner(sign)
			if err != nil {
				return err
			}
			now, err := buildTime(at)
			if err != nil {
				return err
			}
			b, err := marketplace.Build(marketplace.BuildOptions{Dir: args[0], Signer: signer, Now: now})
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), b)
			}
			w := cmd.OutOrStdout()
			fmt.Fprintf(w, "Built %s index version %d: %d plugins, log entry %d, tree %d, expires %s.\n",
				b.Index.Name, b.Index.Version, len(b.Index.Plugins), b.Index.Log.Index, b.Statement.Tree.Size, b.Index.Expires.Format(time.RFC3339))
			for _, v := range b.Added {
				fmt.Fprintf(w, "  + %s\n", v)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&sign, "sign", "", "the signer key file (kiln marketplace keygen)")
	cmd.Flags().StringVar(&at, "time", "", "the build's time, RFC 3339 (default SOURCE_DATE_EPOCH or now)")
	return cmd
}

func newMarketplaceServeCmd(a *app) *cobra.Command {
	addr := "127.0.0.1:8480"
	cmd := &cobra.Command{
		Use:   "serve DIR",
		Short: "Serve a built marketplace's static files (runs locally)",
		Long: `Serve DIR, a folder 'kiln marketplace build' or 'mirror' wrote, over HTTP:
the index and its signature revalidated on every read, archives and log
tiles cached for good. Any static host serves the same files as well.`,
		Args: needArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := os.Stat(filepath.Join(args[0], marketplace.IndexFile)); err != nil {
				return fmt.Errorf("%s has no %s: build it first (kiln marketplace build %s --sign KEYFILE)", args[0], marketplace.IndexFile, args[0])
			}
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return listenError(addr, err)
			}
			srv := &http.Server{Handler: marketplace.Handler(args[0]), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(cmd.ErrOrStderr(), "Serving marketplace %s on http://%s\n", args[0], ln.Addr())
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ln) }()
			select {
			case err := <-errc:
				return err
			case <-cmd.Context().Done():
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			return srv.Shutdown(ctx)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", addr, "the address to listen on")
	return cmd
}

func newMarketplaceMirrorCmd(a *app) *cobra.Command {
	var keys []string
	var name string
	cmd := &cobra.Command{
		Use:   "mirror URL DIR --key KEY",
		Short: "Copy a marketplace for offline use, verified (runs locally)",
		Long: `Copy the marketplace at URL into DIR after verifying it as a client does:
the index's signature by KEY, its log entry and every archive's size and
sha256. Run it again to update the copy. Serve DIR, or add it as a
marketplace with the same key: clients verify the copy exactly as the
original.`,
		Args: needArgs("URL", "DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(keys) == 0 {
				return errors.New("--key is required: the marketplace's verifier key")
			}
			if err := marketplace.CheckVerifierKeys(keys); err != nil {
				return fmt.Errorf("--key: %w", err)
			}
			src := args[0]
			if !strings.Contains(src, "://") {
				abs, err := filepath.Abs(src)
				if err != nil {
					return err
				}
				src = abs
			}
			f, err := marketplace.NewFetcher(src, marketplace.NewHTTPClient())
			if err != nil {
				return err
			}
			if name == "" {
				if name, err = marketplace.PeekName(cmd.Context(), f); err != nil {
					return err
				}
			}
			m, err := marketplace.Mirror(cmd.Context(), f, name, marketplace.Trust{Keys: keys}, args[1], time.Now())
			if err != nil {
				return err
			}
			if a.jsonOutput() {
				return writeJSON(cmd.OutOrStdout(), m)
			}
			ix := m.Verified.Index
			fmt.Fprintf(cmd.OutOrStdout(), "Mirrored %s index version %d into %s: %d archives verified (%d downloaded).\n", ix.Name, ix.Version, args[1], m.Archives, m.Fetched)
			for _, u := range m.Upstream {
				fmt.Fprintf(cmd.OutOrStdout(), "  still points upstream: %s\n", u)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&keys, "key", nil, "a verifier key to trust (repeatable)")
	cmd.Flags().StringVar(&name, "name", "", "the marketplace's name (default: the name its index gives)")
	return cmd
}

func newMarketplaceRotateCmd(a *app) *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "rotate-key DIR --from OLDKEYFILE --to NEWKEYFILE",
		Short: "Hand a marketplace over to a new signing key (runs locally)",
		Long: `Record in DIR/keys/rotations.json that the marketplace's key changes from
the one in OLDKEYFILE to the one in NEWKEYFILE, signed with the old key.
Clients that trust the old key follow the rotation on their next refresh
and from then on trust only the new key. Build with the new key after.`,
		Args: needArgs("DIR"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return errors.New("--from and --to are required: the old and the new signer key files")
			}
			oldSigner, err := readSigner(from)
			if err != nil {
				return err
			}
			newSigner, err := readSigner(to)
			if err != nil {
				return err
			}
			newVerifier, err := marketplace.VerifierKey(newSigner)
			if err != nil {
				return err
			}
			if err := marketplace.Rotate(args[0], oldSigner, newVerifier); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Rotation to %s recorded; build with --sign %s from now on.\n", newVerifier, to)
			return nil
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "the current signer key file")
	cmd.Flags().StringVar(&to, "to", "", "the new signer key file")
	return cmd
}
