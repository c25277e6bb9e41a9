package claude

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kilnhq/kiln/core"
)

// DefaultGitHub is where "github" sources are cloned from.
const DefaultGitHub = "https://github.com/"

// Fetcher brings plugins of a marketplace onto this machine. The zero
// value fetches pinned sources only, from GitHub, with the git on PATH.
type Fetcher struct {
	// AllowUnpinned fetches a git source that names no commit (sha):
	// then what its ref (or the repository's default branch) points at
	// now, which Fetched.Commit reports so that it can be pinned from
	// then on. Without it such a source is refused: only a commit pin
	// makes what is installed the same on every machine and every day.
	AllowUnpinned bool
	// GitHub is the base URL "github" sources' repositories are under
	// (<GitHub><owner>/<name>.git); "" is DefaultGitHub. Tests and
	// mirrors set it.
	GitHub string
	// Git is the git program; "" is "git" on PATH.
	Git string
	// TempDir holds clones while they are used; "" is os.TempDir().
	TempDir string
}

// Fetched is a plugin's folder on this machine. Close removes what the
// fetch made (a clone); a folder inside a local marketplace stays.
type Fetched struct {
	// Dir is the plugin's folder (absolute).
	Dir    string
	Source Source
	// Commit is the commit a git source was checked out at (40 hex
	// digits), "" for a folder of the marketplace.
	Commit string
	clone  string
}

// Close removes the clone, if any.
func (f *Fetched) Close() error {
	if f == nil || f.clone == "" {
		return nil
	}
	return os.RemoveAll(f.clone)
}

// Fetch makes the folder of plugin p of marketplace m available:
//   - a relative path is the folder inside m.Root (which must be set: a
//     marketplace read from a folder or file:// URL), refused when it is
//     missing, not a folder, or reached through a link out of m.Root;
//   - a github, url or git-subdir source is cloned with git at its
//     commit (sha), from any URL git accepts (https, ssh, git, file),
//     and the checked-out commit is verified; without a sha it is
//     refused unless AllowUnpinned;
//   - an npm or pip source is refused: Kiln does not fetch plugins from
//     package registries.
//
// Refusals are EINVALID (ENOTFOUND for a missing folder) and say why;
// a failing git says what it said, with any password in a URL removed.
func (f Fetcher) Fetch(ctx context.Context, m *Marketplace, p Plugin) (*Fetched, error) {
	s := p.Source
	switch s.Kind {
	case SourcePath:
		return fetchPath(m, p)
	case SourceNPM, SourcePip:
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: its source %s is a %s package; Kiln installs Claude Code plugins from the marketplace's folder or a git repository at a commit, not from package registries", p.Name, s, s.Kind)
	}
	if s.SHA == "" && !f.AllowUnpinned {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: its source %s names no commit (sha): refused, because only a commit pin makes what is installed reproducible (a branch or tag can move); ask the marketplace to pin it, or allow unpinned sources to take the commit it points at now", p.Name, s)
	}
	url := s.URL
	if s.Kind == SourceGitHub {
		url = strings.TrimSuffix(cmp.Or(f.GitHub, DefaultGitHub), "/") + "/" + s.Repo + ".git"
	}
	if err := checkGitURL("url", url); err != nil {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: %v", p.Name, err)
	}
	if s.SHA != "" && !reSHA.MatchString(s.SHA) {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: sha %q: want a full commit id, 40 hex digits", p.Name, s.SHA)
	}
	dir, err := os.MkdirTemp(f.TempDir, "kiln-claude-")
	if err != nil {
		return nil, fmt.Errorf("claude plugin %s: %w", p.Name, err)
	}
	fe := &Fetched{Source: s, clone: dir}
	commit, err := f.clone(ctx, dir, url, s)
	if err != nil {
		fe.Close()
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: fetch %s: %v", p.Name, s, err)
	}
	fe.Commit, fe.Dir = commit, dir
	if s.Kind == SourceGitSubdir {
		if fe.Dir, err = inside(dir, s.Path); err != nil {
			fe.Close()
			return nil, core.Errorf(core.ENOTFOUND, "claude plugin %s: %s at %s: %v", p.Name, s.URL, commit, err)
		}
	}
	return fe, nil
}

// fetchPath resolves a relative source inside the marketplace's folder.
func fetchPath(m *Marketplace, p Plugin) (*Fetched, error) {
	if m.Root == "" {
		return nil, core.Errorf(core.EINVALID, "claude plugin %s: its source %s is a folder of the marketplace, which was not read from a folder (add the marketplace from a folder or a file:// URL, or a git clone of it)", p.Name, p.Source)
	}
	dir, err := inside(m.Root, p.Source.Path)
	if err != nil {
		return nil, core.Errorf(core.ENOTFOUND, "claude plugin %s: %v", p.Name, err)
	}
	return &Fetched{Dir: dir, Source: p.Source, Commit: m.Commit}, nil
}

// LoadGit clones the marketplace in the git repository at url (any URL
// git accepts: https, ssh, git, file) and reads it (LoadMarketplace). ref
// is a commit id (40 hex digits), a branch or a tag; "" is the default
// branch. A marketplace is followed, not pinned: what it lists changes
// as it publishes, and each plugin's own source carries its pin; the
// commit read is the result's Commit, which also pins the plugins in
// the marketplace's own folders. Close the Fetched when done with the
// marketplace's folder. Errors are those of Fetch and LoadMarketplace.
func (f Fetcher) LoadGit(ctx context.Context, url, ref string) (*Marketplace, *Fetched, error) {
	if err := checkGitURL("url", url); err != nil {
		return nil, nil, core.Errorf(core.EINVALID, "claude marketplace: %v", err)
	}
	s := Source{Kind: SourceURL, URL: url, Ref: ref}
	if reSHA.MatchString(ref) {
		s.Ref, s.SHA = "", strings.ToLower(ref)
	} else if ref != "" && (strings.HasPrefix(ref, "-") || strings.ContainsFunc(ref, badRefRune) || strings.Contains(ref, "..")) {
		return nil, nil, core.Errorf(core.EINVALID, "claude marketplace: %q is not a branch or tag name", ref)
	}
	dir, err := os.MkdirTemp(f.TempDir, "kiln-claude-")
	if err != nil {
		return nil, nil, err
	}
	fe := &Fetched{Dir: dir, Source: s, clone: dir}
	if fe.Commit, err = f.clone(ctx, dir, url, s); err != nil {
		fe.Close()
		return nil, nil, core.Errorf(core.EINVALID, "claude marketplace: fetch %s: %v", s, err)
	}
	m, err := LoadMarketplace(dir)
	if err != nil {
		fe.Close()
		return nil, nil, err
	}
	m.Commit = fe.Commit
	return m, fe, nil
}

// inside returns the folder rel inside root, refusing one that is
// missing, not a folder, or reached through a link out of root.
func inside(root, rel string) (string, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	fi, err := r.Stat(rel) // follows links inside root only
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("folder %s: %v (a link out of the marketplace is refused)", rel, err)
	case err != nil:
		return "", fmt.Errorf("folder %s does not exist", rel)
	case !fi.IsDir():
		return "", fmt.Errorf("%s is not a folder", rel)
	}
	return filepath.Join(root, filepath.FromSlash(rel)), nil
}

// clone checks out url at s's commit (or, unpinned, at s's ref or the
// default branch) into the empty folder dir, and returns the commit.
func (f Fetcher) clone(ctx context.Context, dir, url string, s Source) (string, error) {
	want := cmp.Or(s.SHA, s.Ref, "HEAD")
	if err := f.git(ctx, dir, "init", "-q"); err != nil {
		return "", err
	}
	if err := f.git(ctx, dir, "fetch", "-q", "--depth=1", "--no-tags", "--", url, want); err != nil {
		if s.SHA == "" {
			return "", err
		}
		// A server that does not serve a commit by its id: fetch its
		// branches and tags, then look for the commit among them.
		if err := f.git(ctx, dir, "fetch", "-q", "--no-tags", "--", url, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"); err != nil {
			return "", err
		}
		want = s.SHA
	} else {
		want = "FETCH_HEAD"
	}
	if err := f.git(ctx, dir, "-c", "advice.detachedHead=false", "checkout", "-q", "--detach", want+"^{commit}", "--"); err != nil {
		if s.SHA != "" {
			return "", fmt.Errorf("commit %s is not in the repository", s.SHA)
		}
		return "", err
	}
	out, err := f.gitOut(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return "", err
	}
	commit := strings.TrimSpace(out)
	if s.SHA != "" && commit != s.SHA {
		return "", fmt.Errorf("checked out commit %s, not the pinned %s", commit, s.SHA)
	}
	return commit, nil
}

func (f Fetcher) git(ctx context.Context, dir string, args ...string) error {
	_, err := f.gitOut(ctx, dir, args...)
	return err
}

// gitOut runs git in dir, without prompts and without remote helpers
// that run programs ("ext::"), and returns its output. An error carries
// git's last line of complaint, with passwords in URLs removed.
func (f Fetcher) gitOut(ctx context.Context, dir string, args ...string) (string, error) {
	verb := args[0]
	for i := 0; i < len(args) && args[i] == "-c"; i += 2 {
		verb = args[min(i+2, len(args)-1)]
	}
	args = append([]string{"-c", "protocol.ext.allow=never", "-c", "core.hooksPath=" + os.DevNull, "-C", dir}, args...)
	cmd := exec.CommandContext(ctx, cmp.Or(f.Git, "git"), args...)
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_ASKPASS=", "SSH_ASKPASS=", "GCM_INTERACTIVE=never")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return "", fmt.Errorf("git %s: %s", verb, cmp.Or(redact(msg), err.Error()))
	}
	return stdout.String(), nil
}

var reUserInfo = regexp.MustCompile(`(://[^/@\s:]*):[^/@\s]*@`)

// redact removes passwords from URLs in s.
func redact(s string) string { return reUserInfo.ReplaceAllString(s, "$1:***@") }

// Convert fetches the plugin named name of m (Fetch) and converts its
// folder into the new Kiln bundle folder out (Converter.Convert), then
// removes what the fetch made. c's ID and Version, when set, are the
// bundle's; its entry and origin are filled in from m. The bundle's id is
// "claude.<marketplace>.<plugin>" unless c.ID is set.
func (f Fetcher) Convert(ctx context.Context, m *Marketplace, name, out string, c Converter) (Result, error) {
	p, err := m.Plugin(name)
	if err != nil {
		return Result{}, err
	}
	fe, err := f.Fetch(ctx, m, p)
	if err != nil {
		return Result{}, err
	}
	defer fe.Close()
	c.Entry = &p
	c.Origin = Origin{Marketplace: m.Name, Plugin: p.Name, Source: p.Source.String(), Commit: fe.Commit}
	if c.ID == "" {
		c.ID = "claude." + m.Name + "." + p.Name
		if len(c.ID) > 64 {
			return Result{}, core.Errorf(core.EINVALID, "claude plugin %s: its bundle id %q would be longer than 64 characters; give the bundle an id", p.Name, c.ID)
		}
	}
	return c.Convert(ctx, fe.Dir, out)
}
