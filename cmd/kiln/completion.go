package main

import (
	"context"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/kilnhq/kiln/core"
	"github.com/kilnhq/kiln/sdk/client"
)

// Shell completion of IDs asks the server, briefly; when it cannot answer,
// completion offers nothing rather than file names.

const completionTimeout = 2 * time.Second

const noFiles = cobra.ShellCompDirectiveNoFileComp

// completion is a cobra completion function.
type completion = func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective)

// firstArg restricts a completion to the first positional argument.
func firstArg(f completion) completion {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, noFiles
		}
		return f(cmd, args, toComplete)
	}
}

// completeFrom completes with the candidates list returns, each
// "value\tdescription".
func (a *app) completeFrom(cmd *cobra.Command, list func(context.Context, *client.Client) ([]string, error)) ([]string, cobra.ShellCompDirective) {
	c, err := a.client()
	if err != nil {
		return nil, noFiles
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
	defer cancel()
	out, err := list(ctx, c)
	if err != nil {
		return nil, noFiles
	}
	return out, noFiles
}

// completeThreads completes a thread ID, described by its title.
func (a *app) completeThreads(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		page, err := c.ListThreads(ctx, client.ThreadListOptions{Limit: 100})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, t := range page.Threads {
			out = append(out, t.ID+"\t"+truncate(t.Title, 60))
		}
		return out, nil
	})
}

// completeFolders completes a folder name, described by its ID.
func (a *app) completeFolders(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		fs, err := c.ListFolders(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.Name+"\t"+f.ID)
		}
		return out, nil
	})
}

// completeInterrupts completes the ID of an open interrupt from the Action
// queue, described by its tool and thread.
func (a *app) completeInterrupts(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		page, err := c.Inbox(ctx, client.InboxOptions{Queue: core.QueueAction, Limit: 100})
		if err != nil {
			return nil, err
		}
		var out []string
		for _, it := range page.Items {
			out = append(out, it.InterruptID+"\t"+it.Tool+" in "+truncate(it.ThreadTitle, 50))
		}
		return out, nil
	})
}

// completePlugins completes a plugin ID, described by its version and
// status.
func (a *app) completePlugins(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		ps, err := c.Plugins(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.ID+"\t"+p.Version+" "+string(p.Status))
		}
		return out, nil
	})
}

// completeProviders completes a model provider ID, described by its
// name and state.
func (a *app) completeProviders(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		ps, err := c.Providers(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.ID+"\t"+p.Name+" "+p.State)
		}
		return out, nil
	})
}

// completeProviderSettings completes "name=" for --set from the settings
// of the provider named by the first argument.
func (a *app) completeProviderSettings(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 || strings.Contains(toComplete, "=") {
		return nil, noFiles
	}
	out, dir := a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		p, err := c.Provider(ctx, args[0])
		if err != nil {
			return nil, err
		}
		var out []string
		for _, s := range p.Settings {
			desc := "value"
			if s.Secret {
				desc = "secret: only as ${ENV_NAME}"
			}
			out = append(out, s.Name+"=\t"+desc)
		}
		return out, nil
	})
	return out, dir | cobra.ShellCompDirectiveNoSpace
}

// completePluginsOrDirs completes a plugin ID or, once the word looks like
// a path, a folder.
func (a *app) completePluginsOrDirs(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if strings.ContainsAny(toComplete, `/\`) || strings.HasPrefix(toComplete, ".") || strings.HasPrefix(toComplete, "~") {
		return completeDirs(cmd, args, toComplete)
	}
	return a.completePlugins(cmd, args, toComplete)
}

// completeDirs completes a folder name.
func completeDirs(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return nil, cobra.ShellCompDirectiveFilterDirs
}

// completeGrants completes a folder grant's name, described by its mode
// and path.
func (a *app) completeGrants(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		gs, err := c.ListGrants(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, g := range gs {
			out = append(out, g.Name+"\t"+grantMode(g)+" "+g.Path)
		}
		return out, nil
	})
}

// completeMemories completes a memory's name, described by its start.
func (a *app) completeMemories(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		ms, err := c.Memories(ctx)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.Name+"\t"+truncate(m.Preview, 50))
		}
		return out, nil
	})
}

// completeSettings completes "key=" for kiln settings set and, after the
// "=", the values of a setting that takes one of a few (for
// sandbox_runtime, the server's enabled runtimes).
func (a *app) completeSettings(cmd *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if key, _, ok := strings.Cut(toComplete, "="); ok {
		if key == "sandbox_runtime" {
			return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
				names, err := enabledSandboxRuntimes(ctx, c)
				for i, n := range names {
					names[i] = key + "=" + n
				}
				return names, err
			})
		}
		var out []string
		for _, v := range settingValues[key] {
			out = append(out, key+"="+v)
		}
		return out, noFiles
	}
	var out []string
	for _, k := range settingKeys {
		out = append(out, k.key+"=\t"+k.takes)
	}
	return out, noFiles | cobra.ShellCompDirectiveNoSpace
}

// completeThreadFiles completes the path of a virtual file of the thread
// named by the first argument, described by its size.
func (a *app) completeThreadFiles(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	return a.completeFrom(cmd, func(ctx context.Context, c *client.Client) ([]string, error) {
		fs, err := c.ThreadFiles(ctx, args[0])
		if err != nil {
			return nil, err
		}
		var out []string
		for _, f := range fs {
			out = append(out, f.Path+"\t"+core.FormatBytes(int64(f.Size)))
		}
		return out, nil
	})
}
