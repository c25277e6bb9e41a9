package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The ports whose endpoints OpenSandbox's SDKs look up at each create:
// the execution API's and the egress sidecar's.
const (
	execdPort  = 44772
	egressPort = 18080
)

// sandboxClient creates sandboxes over the sandbox API with the requests
// OpenSandbox's SDKs make in Sandbox.create (the create call, the
// endpoint lookups of the execution API and of the egress sidecar, and
// the readiness pings every 5 ms until one answers), each client on
// keep-alive connections of its own, as separate SDK clients are. It
// measures the server: a Go client costs a fraction of a millisecond of
// CPU per request where the JavaScript SDK in Node costs one to two, and
// on a 2-core machine shared with the server the SDK's own CPU would be
// most of what a burst of creates measures (bench.mjs reports those
// figures too).
type sandboxClient struct {
	base string
	hc   *http.Client
	body []byte
}

func newSandboxClient(addr, runtime, image string) *sandboxClient {
	body, _ := json.Marshal(map[string]any{
		"image": map[string]string{"uri": image}, "entrypoint": []string{"tail", "-f", "/dev/null"}, "timeout": 600,
		"resourceLimits": map[string]string{"cpu": "1", "memory": "256Mi"}, "env": map[string]string{}, "metadata": map[string]string{},
		"extensions": map[string]string{"kiln.runtime": runtime},
	})
	return &sandboxClient{base: "http://" + addr, hc: &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}, body: body}
}

// do sends a request and decodes a JSON answer of status want into out
// (when not nil).
func (c *sandboxClient) do(method, url string, header http.Header, body []byte, want int, out any) error {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", method, url, resp.Status, bytes.TrimSpace(data))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// create makes one sandbox and waits until its execution API answers,
// returning its ID.
func (c *sandboxClient) create() (string, error) {
	var sb struct{ ID string }
	if err := c.do(http.MethodPost, c.base+"/v1/sandboxes", nil, c.body, http.StatusAccepted, &sb); err != nil {
		return "", err
	}
	type endpoint struct {
		Endpoint string
		Headers  map[string]string
	}
	var ep, egress endpoint
	for _, e := range []struct {
		port int
		into *endpoint
	}{{execdPort, &ep}, {egressPort, &egress}} {
		if err := c.do(http.MethodGet, fmt.Sprintf("%s/v1/sandboxes/%s/endpoints/%d", c.base, sb.ID, e.port), nil, nil, http.StatusOK, e.into); err != nil {
			return sb.ID, err
		}
	}
	h := http.Header{}
	for k, v := range ep.Headers {
		h.Set(k, v)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.do(http.MethodGet, "http://"+ep.Endpoint+"/ping", h, nil, http.StatusOK, nil)
		if err == nil {
			return sb.ID, nil
		}
		if time.Now().After(deadline) {
			return sb.ID, fmt.Errorf("sandbox %s not ready in a minute: %w", sb.ID, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *sandboxClient) kill(id string) error {
	return c.do(http.MethodDelete, c.base+"/v1/sandboxes/"+id, nil, nil, http.StatusNoContent, nil)
}

// createBurst runs n creates, conc clients at once, each killing its
// sandbox before its next create, and returns the creates' latencies in
// milliseconds and the first error.
func createBurst(addr, runtime, image string, n, conc int) ([]float64, error) {
	var (
		mu    sync.Mutex
		times []float64
		first error
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range conc {
		c := newSandboxClient(addr, runtime, image)
		wg.Go(func() {
			defer c.hc.CloseIdleConnections()
			for next.Add(1) <= int64(n) {
				t := time.Now()
				id, err := c.create()
				ms := float64(time.Since(t).Microseconds()) / 1000
				if id != "" {
					if kerr := c.kill(id); err == nil {
						err = kerr
					}
				}
				mu.Lock()
				if err == nil {
					times = append(times, ms)
				} else if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return times, first
}

// percentile is the p-th percentile of v (nearest rank).
func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(v))
	return s[max(0, min(len(s)-1, int(math.Ceil(p/100*float64(len(s))))-1))]
}

// poolsFull returns once every warm pool of the server at addr is full,
// as its kiln_sandbox_pool_size and kiln_sandbox_pool_waiting metrics
// tell.
func poolsFull(addr string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		size, waiting, err := poolGauges(addr)
		switch {
		case err != nil:
			return err
		case len(size) == 0:
			return fmt.Errorf("the server reports no warm pool")
		}
		full := true
		for pool, n := range size {
			full = full && waiting[pool] == n
		}
		if full {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pools did not fill in %v (size %v, waiting %v)", within, size, waiting)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// poolGauges reads the warm pools' sizes and waiting sandboxes by pool
// from the server's metrics.
func poolGauges(addr string) (size, waiting map[string]float64, err error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	size, waiting = map[string]float64{}, map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), "{")
		into := map[string]map[string]float64{"kiln_sandbox_pool_size": size, "kiln_sandbox_pool_waiting": waiting}[name]
		if !ok || into == nil {
			continue
		}
		labels, value, _ := strings.Cut(rest, "} ")
		_, pool, _ := strings.Cut(labels, `pool="`)
		pool, _, _ = strings.Cut(pool, `"`)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("metrics: %q: %w", sc.Text(), err)
		}
		into[pool] = v
	}
	return size, waiting, sc.Err()
}
