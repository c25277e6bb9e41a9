package claude

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/kilnhq/kiln/plugins/mcp/mcpservers"
)

// A commit pin fixes the bytes of a plugin, but an MCP server started
// with "npx -y pkg" or "uvx pkg" downloads whatever the package registry
// serves on the day it starts. CheckPinned holds such runtime fetches to
// the same rule: every package a server's command fetches is named at an
// exact version (or commit, or image digest).

var (
	// reSemverExact is one exact npm version (npm accepts a leading "v"
	// and "=").
	reSemverExact = regexp.MustCompile(`^[=v]?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// rePEP440Exact is one exact Python package version (PEP 440's
	// public versions and local labels, no wildcard).
	rePEP440Exact = regexp.MustCompile(`(?i)^v?([0-9]+!)?[0-9]+(\.[0-9]+)*((a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?([-_.]?(post|rev|r)[-_.]?[0-9]*)?([-_.]?dev[-_.]?[0-9]*)?(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$`)
	// reNuGetExact is one exact NuGet version (up to four numbers and a
	// pre-release label).
	reNuGetExact = regexp.MustCompile(`^[0-9]+(\.[0-9]+){1,3}(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$`)
	// reCommitPin ends a git package spec pinned to a full commit id.
	reCommitPin = regexp.MustCompile(`[#@][0-9a-fA-F]{40}$`)
	// reImageDigest pins a container image.
	reImageDigest = regexp.MustCompile(`@sha256:[0-9a-f]{64}$`)
	// reArbitrary is PEP 440's arbitrary equality (===): any one string.
	reArbitrary = regexp.MustCompile(`^\S+$`)
)

// CheckPinned checks that the command of an MCP server fetches nothing
// unpinned when it starts. It knows the package runners npx, npm exec,
// pnpm dlx, yarn dlx, bunx, uvx, uv tool run, pipx run, dnx and docker
// (or podman) run; any other command fetches nothing it can see. A
// package named without a version, at "latest" or another tag, at a
// version range, or from a git URL without a full commit id is an error
// naming it and saying why. A container image with a tag but no digest
// passes with a warning (a tag can be moved); one without a tag, or at
// "latest", is an error.
func CheckPinned(s mcpservers.Server) (warnings []string, err error) {
	if s.Command == "" {
		return nil, nil
	}
	name := strings.ToLower(filepath.Base(filepath.ToSlash(s.Command)))
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".cmd"), ".exe")
	args := s.Args
	sub := func(words ...string) bool {
		if len(args) < len(words) {
			return false
		}
		for i, w := range words {
			if args[i] != w {
				return false
			}
		}
		args = args[len(words):]
		return true
	}
	switch {
	case name == "npx" || name == "bunx" || name == "npm" && (sub("exec") || sub("x")) ||
		(name == "pnpm" || name == "yarn") && sub("dlx") || name == "bun" && sub("x"):
		return nil, checkNPMRun(name, args)
	case name == "uvx" || name == "uv" && sub("tool", "run"):
		return nil, checkUVRun(args)
	case name == "pipx" && sub("run"):
		return nil, checkPipxRun(args)
	case name == "dnx" || name == "dotnet" && sub("dnx"):
		return nil, checkDNX(args)
	case (name == "docker" || name == "podman") && (sub("run") || sub("container", "run")):
		return checkDockerRun(name, args)
	}
	return nil, nil
}

// runArgs splits a runner's arguments into its flags' values and its
// positional arguments, up to "--". valued lists the flags that take a
// value as the next argument (a "--flag=value" form is also read).
func runArgs(args []string, valued map[string]bool) (values map[string][]string, positional []string) {
	values = map[string][]string{}
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			positional = append(positional, a)
			continue
		}
		if k, v, ok := strings.Cut(a, "="); ok {
			values[k] = append(values[k], v)
			continue
		}
		if valued[a] && i+1 < len(args) {
			values[a] = append(values[a], args[i+1])
			i++
			continue
		}
		values[a] = append(values[a], "")
	}
	return values, positional
}

var npmValued = map[string]bool{"-p": true, "--package": true, "-c": true, "--call": true, "--registry": true,
	"--cache": true, "--userconfig": true, "--prefix": true, "-w": true, "--workspace": true}

// checkNPMRun checks the arguments of an npm package runner.
func checkNPMRun(runner string, args []string) error {
	values, pos := runArgs(args, npmValued)
	if len(values["-c"])+len(values["--call"]) > 0 {
		return fmt.Errorf("%s --call runs a shell command, whose downloads Kiln cannot check; name the package at an exact version instead", runner)
	}
	specs := append(values["-p"], values["--package"]...)
	if len(specs) == 0 {
		if len(pos) == 0 {
			return fmt.Errorf("%s names no package", runner)
		}
		specs = pos[:1] // the others are the package's own arguments
	}
	for _, spec := range specs {
		if err := npmPinned(spec); err != nil {
			return fmt.Errorf("%s package %q %w", runner, spec, err)
		}
	}
	return nil
}

// npmPinned says why an npm package spec is not pinned, or nil.
func npmPinned(spec string) error {
	switch {
	case spec == "":
		return fmt.Errorf("is empty")
	case strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, "file:"):
		return nil // a folder on the machine: nothing is fetched
	case strings.HasPrefix(spec, "npm:"):
		return npmPinned(strings.TrimPrefix(spec, "npm:"))
	case strings.Contains(spec, "://") || strings.HasPrefix(spec, "git+") || strings.HasPrefix(spec, "github:") ||
		strings.HasPrefix(spec, "gitlab:") || strings.HasPrefix(spec, "bitbucket:") || isGitHubShorthand(spec):
		if reCommitPin.MatchString(spec) && !strings.HasPrefix(spec, "http") {
			return nil
		}
		return fmt.Errorf("comes from a git repository or a URL without a full commit id (#<40 hex digits>), so what it fetches can change")
	}
	name, version := spec, ""
	if i := strings.LastIndexByte(spec, '@'); i > 0 {
		name, version = spec[:i], spec[i+1:]
	}
	return exactVersion(name, version, reSemverExact)
}

// isGitHubShorthand reports an npm spec "user/repo" (a GitHub repository),
// as opposed to "@scope/name".
func isGitHubShorthand(spec string) bool {
	return !strings.HasPrefix(spec, "@") && strings.Contains(spec, "/")
}

// exactVersion says why version, of the package name, is not one exact
// version by exact, or nil.
func exactVersion(name, version string, exact *regexp.Regexp) error {
	switch {
	case version == "":
		return fmt.Errorf("has no version, so the newest is fetched each time the server starts; name an exact version (%s@1.2.3)", name)
	case strings.EqualFold(version, "latest"):
		return fmt.Errorf("asks for @latest, so the newest is fetched each time the server starts; name an exact version")
	case !exact.MatchString(version):
		return fmt.Errorf("version %q is a range or a tag, not one exact version", version)
	}
	return nil
}

var uvValued = map[string]bool{"--from": true, "--with": true, "-w": true, "--with-editable": true, "--with-requirements": true,
	"--python": true, "-p": true, "--index": true, "--index-url": true, "-i": true, "--extra-index-url": true,
	"--default-index": true, "--find-links": true, "-f": true, "--directory": true, "--project": true,
	"--cache-dir": true, "--config-file": true, "-c": true, "--constraints": true, "--overrides": true}

// checkUVRun checks the arguments of uvx (uv tool run).
func checkUVRun(args []string) error {
	values, pos := runArgs(args, uvValued)
	if len(values["--with-requirements"])+len(values["-c"])+len(values["--constraints"])+len(values["--overrides"]) > 0 {
		return fmt.Errorf("uvx reads its packages from a file here, which Kiln cannot check; name each package at an exact version instead")
	}
	var specs []string
	if from := values["--from"]; len(from) > 0 {
		specs = from
	} else if len(pos) > 0 {
		specs = pos[:1]
	} else {
		return fmt.Errorf("uvx names no package")
	}
	specs = append(specs, values["--with"]...)
	specs = append(specs, values["-w"]...)
	for _, spec := range specs {
		if err := pythonPinned(spec); err != nil {
			return fmt.Errorf("uvx package %q %w", spec, err)
		}
	}
	return nil
}

var pipxValued = map[string]bool{"--spec": true, "--python": true, "--index-url": true, "-i": true, "--pip-args": true}

// checkPipxRun checks the arguments of pipx run.
func checkPipxRun(args []string) error {
	values, pos := runArgs(args, pipxValued)
	specs := values["--spec"]
	if len(specs) == 0 {
		if len(pos) == 0 {
			return fmt.Errorf("pipx run names no package")
		}
		specs = pos[:1]
	}
	for _, spec := range specs {
		if err := pythonPinned(spec); err != nil {
			return fmt.Errorf("pipx package %q %w", spec, err)
		}
	}
	return nil
}

// pythonPinned says why a Python package spec is not pinned, or nil:
// "name==1.2.3", "name[extra]===1.2.3" and uv's "name@1.2.3" are.
func pythonPinned(spec string) error {
	switch {
	case spec == "":
		return fmt.Errorf("is empty")
	case strings.HasPrefix(spec, ".") || strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, "file:"):
		return nil
	case strings.HasPrefix(spec, "git+") || strings.Contains(spec, "://") || strings.Contains(spec, " @ "):
		if reCommitPin.MatchString(spec) && strings.HasPrefix(spec, "git+") {
			return nil
		}
		return fmt.Errorf("comes from a git repository or a URL without a full commit id (@<40 hex digits>), so what it fetches can change")
	}
	if name, version, ok := strings.Cut(spec, "==="); ok {
		return exactVersion(name, version, reArbitrary)
	}
	if name, version, ok := strings.Cut(spec, "=="); ok {
		return exactVersion(name, version, rePEP440Exact)
	}
	if strings.ContainsAny(spec, "<>=!~,;") {
		return fmt.Errorf("is a version range, not one exact version (name==1.2.3)")
	}
	name, version, _ := strings.Cut(spec, "@")
	return exactVersion(name, version, rePEP440Exact)
}

var dnxValued = map[string]bool{"--version": true, "--source": true, "--add-source": true, "--configfile": true}

// checkDNX checks the arguments of dnx (dotnet dnx).
func checkDNX(args []string) error {
	values, pos := runArgs(args, dnxValued)
	if len(pos) == 0 {
		return fmt.Errorf("dnx names no package")
	}
	spec := pos[0]
	name, version, _ := strings.Cut(spec, "@")
	if v := values["--version"]; len(v) > 0 {
		version = v[0]
	}
	if err := exactVersion(name, version, reNuGetExact); err != nil {
		return fmt.Errorf("dnx package %q %w", spec, err)
	}
	return nil
}

var dockerValued = map[string]bool{"-e": true, "--env": true, "--env-file": true, "-v": true, "--volume": true,
	"--mount": true, "--name": true, "--network": true, "--net": true, "-p": true, "--publish": true,
	"--entrypoint": true, "-w": true, "--workdir": true, "-u": true, "--user": true, "--platform": true,
	"-l": true, "--label": true, "--add-host": true, "-m": true, "--memory": true, "--cpus": true,
	"--pull": true, "--tmpfs": true, "--cap-add": true, "--cap-drop": true, "--security-opt": true,
	"-h": true, "--hostname": true, "--device": true, "--ulimit": true, "--log-driver": true, "--runtime": true}

// checkDockerRun checks the image of docker run.
func checkDockerRun(runner string, args []string) ([]string, error) {
	_, pos := runArgs(args, dockerValued)
	if len(pos) == 0 {
		return nil, fmt.Errorf("%s run names no image", runner)
	}
	image := pos[0]
	if reImageDigest.MatchString(image) {
		return nil, nil
	}
	ref := image[strings.LastIndexByte(image, '/')+1:]
	_, tag, ok := strings.Cut(ref, ":")
	switch {
	case !ok || tag == "":
		return nil, fmt.Errorf("%s image %q has no tag, so the newest is pulled; pin it by digest (image@sha256:...) or at least a version tag", runner, image)
	case tag == "latest":
		return nil, fmt.Errorf("%s image %q is at :latest, so the newest is pulled; pin it by digest (image@sha256:...) or at least a version tag", runner, image)
	}
	return []string{fmt.Sprintf("%s image %q is pinned by a tag, which its publisher can move; a digest (image@sha256:...) would fix its bytes", runner, image)}, nil
}
