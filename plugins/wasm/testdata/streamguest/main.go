// Command streamguest is a test plugin for the streaming HTTP host
// functions (http_open, http_read, http_close) through sdk/plugin's
// HTTPStream. plugins/wasm's tests build it for wasip1.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{
		{Name: "stream", Description: "Read a URL's body chunk by chunk.", Handler: plugin.TextHandler(stream)},
		{Name: "open", Description: "Open a URL n times.", Handler: plugin.TextHandler(open)},
	}})
}

// stream reads the body of url with reads of buf bytes (default 4096),
// emitting every chunk as {"chunk": text} when emit is set, and returns
// {"status", "type", "chunks", "bytes", "text"} (text: the body, when it
// is at most 64 KiB).
func stream(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		URL  string
		Buf  int
		Emit bool
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	if in.Buf <= 0 {
		in.Buf = 4096
	}
	resp, err := plugin.HTTPStream(ctx, plugin.HTTPRequest{URL: in.URL, Headers: map[string][]string{"Accept": {"text/event-stream"}}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var text []byte
	var chunks, total int
	buf := make([]byte, in.Buf)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			chunks++
			total += n
			if total <= 64<<10 {
				text = append(text, buf[:n]...)
			} else {
				text = nil
			}
			if in.Emit {
				if err := plugin.Emit(ctx, map[string]string{"chunk": string(buf[:n])}); err != nil {
					return "", err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("after %d bytes: %w", total, err)
		}
	}
	if err := resp.Body.Close(); err != nil {
		return "", err
	}
	if _, err := resp.Body.Read(buf); err == nil {
		return "", errors.New("read after close succeeded")
	}
	ct := ""
	if v := resp.Headers["Content-Type"]; len(v) > 0 {
		ct = v[0]
	}
	b, err := json.Marshal(map[string]any{"status": resp.Status, "type": ct, "chunks": chunks, "bytes": total, "text": string(text)})
	return string(b), err
}

// open opens url n times and returns how many it opened. With read it
// reads the first chunk of each; with close it closes each before opening
// the next, and otherwise leaves them all open.
func open(ctx context.Context, args json.RawMessage) (string, error) {
	var in struct {
		URL         string
		N           int
		Read, Close bool
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return "", fmt.Errorf("bad arguments: %w", err)
	}
	for i := range in.N {
		resp, err := plugin.HTTPStream(ctx, plugin.HTTPRequest{URL: in.URL})
		if err != nil {
			return "", fmt.Errorf("stream %d: %w", i+1, err)
		}
		if in.Read {
			if _, err := resp.Body.Read(make([]byte, 64)); err != nil {
				return "", fmt.Errorf("stream %d: read: %w", i+1, err)
			}
		}
		if in.Close {
			if err := resp.Body.Close(); err != nil {
				return "", fmt.Errorf("stream %d: close: %w", i+1, err)
			}
		}
	}
	return fmt.Sprint(in.N), nil
}
