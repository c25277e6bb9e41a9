package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// StrictJSON checks that data is one JSON value without a key twice in
// an object at any depth, and nothing after it: encoding/json would keep
// the last of two keys, so what a user read and consented to might not
// be what is used. The error names the duplicate's path ("servers.a.env").
// mcp.json bundles and the marketplace's other sources (Claude Code,
// the MCP Registry) are read through it.
func StrictJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := noDuplicates(dec, ""); errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("the JSON ends early")
	} else if err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("trailing data after the JSON object")
	}
	return nil
}

// noDuplicates reads one value from dec; at is its path, for the error.
func noDuplicates(dec *json.Decoder, at string) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := t.(string)
			sub := strings.TrimPrefix(at+"."+key, ".")
			if seen[key] {
				return fmt.Errorf("%s: duplicate key", sub)
			}
			seen[key] = true
			if err := noDuplicates(dec, sub); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := noDuplicates(dec, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	return err
}
