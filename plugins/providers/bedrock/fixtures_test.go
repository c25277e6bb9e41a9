package bedrock

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// The stream fixtures are written as JSON lines (testdata/streams/*.jsonl:
// one event-stream message a line, its headers in order and its JSON
// payload) and framed by aws-sdk-go-v2's eventstream.Encoder into the
// committed binary files served by the tests (*.eventstream).
// `go test -run TestStreamFixtures -update` rewrites the binaries,
// corrupt-crc.eventstream included; without -update the test checks that
// they are what the sources encode to.
var update = flag.Bool("update", false, "rewrite testdata/streams/*.eventstream from their .jsonl sources")

type frameSpec struct {
	Headers [][2]string     `json:"headers"`
	Payload json.RawMessage `json:"payload"`
}

// encodeFrames frames messages with the AWS SDK's encoder; every header is
// a string header, as Bedrock sends them.
func encodeFrames(t testing.TB, frames []frameSpec) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, f := range frames {
		var m eventstream.Message
		for _, h := range f.Headers {
			m.Headers.Set(h[0], eventstream.StringValue(h[1]))
		}
		var p bytes.Buffer
		if err := json.Compact(&p, f.Payload); err != nil {
			t.Fatal(err)
		}
		m.Payload = p.Bytes()
		if err := enc.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func readFrameSpecs(t testing.TB, path string) []frameSpec {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var frames []frameSpec
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var f frameSpec
		if err := json.Unmarshal(sc.Bytes(), &f); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		frames = append(frames, f)
	}
	return frames
}

// event and exception build one message spec.
func event(typ, payload string) frameSpec {
	return frameSpec{Headers: [][2]string{{":event-type", typ}, {":content-type", "application/json"}, {":message-type", "event"}}, Payload: json.RawMessage(payload)}
}

func exception(typ, payload string) frameSpec {
	return frameSpec{Headers: [][2]string{{":exception-type", typ}, {":content-type", "application/json"}, {":message-type", "exception"}}, Payload: json.RawMessage(payload)}
}

// corruptCRC flips a bit of the message CRC (the last 4 bytes) of the
// second message of a framed stream.
func corruptCRC(t testing.TB, stream []byte) []byte {
	t.Helper()
	first := int(uint32(stream[0])<<24 | uint32(stream[1])<<16 | uint32(stream[2])<<8 | uint32(stream[3]))
	second := int(uint32(stream[first])<<24 | uint32(stream[first+1])<<16 | uint32(stream[first+2])<<8 | uint32(stream[first+3]))
	out := bytes.Clone(stream)
	out[first+second-1] ^= 0x01
	return out
}

func streamFixture(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata/streams", name+".eventstream"))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestStreamFixtures(t *testing.T) {
	sources, err := filepath.Glob("testdata/streams/*.jsonl")
	if err != nil || len(sources) == 0 {
		t.Fatalf("no stream sources: %v", err)
	}
	want := map[string][]byte{}
	for _, src := range sources {
		want[strings.TrimSuffix(src, ".jsonl")+".eventstream"] = encodeFrames(t, readFrameSpecs(t, src))
	}
	want["testdata/streams/corrupt-crc.eventstream"] = corruptCRC(t, want["testdata/streams/text.eventstream"])
	for path, data := range want {
		if *update {
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test -run TestStreamFixtures -update)", err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s is not what its source encodes to (run go test -run TestStreamFixtures -update)", path)
		}
	}
}
