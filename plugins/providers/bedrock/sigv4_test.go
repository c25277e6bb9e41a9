package bedrock

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// The fixed inputs of AWS's SigV4 test suite.
var (
	suiteCreds   = aws.Credentials{AccessKeyID: "AKIDEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"}
	suiteTime    = time.Date(2015, 8, 30, 12, 36, 0, 0, time.UTC)
	suiteRegion  = "us-east-1"
	suiteService = "service"
)

// TestSigV4Suite signs each request of AWS's published test suite
// (testdata/sigv4) with signV4 and compares the Authorization header.
func TestSigV4Suite(t *testing.T) {
	entries, err := os.ReadDir("testdata/sigv4")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name, dir := e.Name(), filepath.Join("testdata/sigv4", e.Name())
		n++
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join(dir, name+".req"))
			if err != nil {
				t.Fatal(err)
			}
			want, err := os.ReadFile(filepath.Join(dir, name+".authz"))
			if err != nil {
				t.Fatal(err)
			}
			req, body, creds := parseSuiteRequest(t, string(raw))
			if err := signV4(context.Background(), req, body, creds, suiteService, suiteRegion, suiteTime); err != nil {
				t.Fatal(err)
			}
			if got := req.Header.Get("Authorization"); got != strings.TrimSpace(string(want)) {
				t.Errorf("Authorization:\n got  %s\n want %s", got, want)
			}
			if len(body) > 0 && req.ContentLength != int64(len(body)) {
				t.Errorf("body not attached: ContentLength %d", req.ContentLength)
			}
		})
	}
	if n < 20 {
		t.Fatalf("only %d vectors found", n)
	}
}

// parseSuiteRequest reads a suite .req file: a request line, "Name:value"
// header lines, a blank line and the body. Host becomes the request's
// host; X-Amz-Date is left to the signer (it sets the same time);
// X-Amz-Security-Token becomes the credentials' session token, which the
// signer sets and signs.
func parseSuiteRequest(t *testing.T, raw string) (*http.Request, []byte, aws.Credentials) {
	t.Helper()
	head, body, _ := strings.Cut(raw, "\n\n")
	sc := bufio.NewScanner(strings.NewReader(head))
	sc.Scan()
	fields := strings.Fields(sc.Text())
	if len(fields) != 3 {
		t.Fatalf("request line %q", sc.Text())
	}
	creds := suiteCreds
	headers := http.Header{}
	host := ""
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			t.Fatalf("header line %q", sc.Text())
		}
		switch strings.ToLower(name) {
		case "host":
			host = value
		case "x-amz-date":
		case "x-amz-security-token":
			creds.SessionToken = value
		default:
			headers[http.CanonicalHeaderKey(name)] = append(headers[http.CanonicalHeaderKey(name)], value)
		}
	}
	req, err := http.NewRequest(fields[0], "https://"+host+fields[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header = headers
	return req, []byte(body), creds
}
