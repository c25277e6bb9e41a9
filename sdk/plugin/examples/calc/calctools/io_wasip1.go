//go:build wasip1

package calctools

import (
	"context"
	"log/slog"

	"github.com/kilnhq/kiln/sdk/plugin"
)

// get fetches url through the host, which enforces permissions.network.
func get(ctx context.Context, url string) (status, length int, err error) {
	resp, err := plugin.HTTP(ctx, plugin.HTTPRequest{Method: "GET", URL: url})
	if err != nil {
		return 0, 0, err
	}
	return resp.Status, len(resp.Body), nil
}

// readFile reads through the host, which enforces permissions.filesystem.
func readFile(path string) ([]byte, error) { return plugin.ReadFile(path) }

// writeFile writes through the host, which enforces permissions.filesystem.
func writeFile(path string, data []byte) error { return plugin.WriteFile(path, data) }

// progress logs and emits a progress event through the host.
func progress(n int) {
	plugin.Log(slog.LevelInfo, "note written")
	plugin.Emit(map[string]int{"wrote": n})
}
