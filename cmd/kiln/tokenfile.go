package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// envTokenFile names a file that holds the API token, read by kiln serve
// and the client commands when KILN_API_TOKEN is not set. kiln serve
// makes the file, with a new random token, when it does not exist: the
// container image sets it to /data/api-token, so an image started with
// no configuration is protected and its token is one docker exec away.
const envTokenFile = "KILN_API_TOKEN_FILE"

// readTokenFile returns the token in the file at path: its content
// without surrounding white space.
func readTokenFile(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", envTokenFile, err)
	}
	token := strings.TrimSpace(string(b))
	if token == "" {
		return "", fmt.Errorf("%s: %s is empty", envTokenFile, path)
	}
	return token, nil
}

// tokenFromFile is kiln serve's reading of KILN_API_TOKEN_FILE: the token
// in the file, or, when the file does not exist, a new one (24 random
// bytes in hex, 48 characters) written to it with mode 0600, made said
// so. Two servers starting on one volume agree: the file is created
// exclusively, and the one that loses reads the winner's.
func tokenFromFile(path string) (token string, made bool, err error) {
	token, err = readTokenFile(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("%s: %w", envTokenFile, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		token, err = readTokenFile(path)
		return token, false, err
	}
	if err != nil {
		return "", false, fmt.Errorf("%s: %w", envTokenFile, err)
	}
	_, err = f.WriteString(token + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("%s: %w", envTokenFile, err)
	}
	return token, true, nil
}
