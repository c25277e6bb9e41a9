//go:build !wasip1

package calctools

import (
	"context"
	"errors"
	"io"
	"net/http"
)

// get fetches url directly: a process plugin runs with the user's access,
// and the host cannot enforce permissions.network inside it.
func get(ctx context.Context, url string) (status, length int, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, len(body), err
}

// readFile is not offered natively: the "data:/" namespace is the WASM
// host's, and a process plugin has no such mapping in this slice.
func readFile(string) ([]byte, error) {
	return nil, errors.New("readfile is available in the WASM build only")
}

func writeFile(string, []byte) error {
	return errors.New("note is available in the WASM build only")
}

func progress(int) {}
