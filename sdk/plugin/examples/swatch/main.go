// Command swatch is an example toolset plugin whose tool answers with an
// image: swatch draws a square of one colour as a PNG, and Kiln hands the
// image to models that accept images (a tool result's image part). The
// same source builds as a WASM module and as a native executable, like
// the calc example:
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o swatch.wasm .
//	go build
//
// A manifest for the native build:
//
//	{"apiVersion": "kiln.dev/v1", "id": "swatch", "version": "1.0.0",
//	 "description": "Colour swatches as images.", "provides": ["toolset"],
//	 "runtime": "process", "entry": "swatch", "sha256": "<sha256 of swatch>"}
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"strings"

	"github.com/kilnhq/kiln/sdk/plugin"
	"github.com/kilnhq/kiln/sdk/plugin/wire"
)

func main() {
	plugin.Serve(plugin.Toolset{Tools: []plugin.Tool{{
		Name:        "swatch",
		Description: "Draw a square of one colour as a PNG image: color is #rrggbb, size the side in pixels (1 to 256, default 16).",
		Schema:      json.RawMessage(`{"type":"object","properties":{"color":{"type":"string","pattern":"^#[0-9a-fA-F]{6}$"},"size":{"type":"integer","minimum":1,"maximum":256}},"required":["color"]}`),
		Idempotent:  true,
		Handler:     swatch,
	}}})
}

// swatch answers with a line of text and the image: a result of two
// parts.
func swatch(_ context.Context, args json.RawMessage) (plugin.Result, error) {
	var in struct {
		Color string
		Size  *int
	}
	if err := json.Unmarshal(args, &in); err != nil {
		return plugin.Result{}, fmt.Errorf("bad arguments: %w", err)
	}
	c, err := parseColor(in.Color)
	if err != nil {
		return plugin.Result{}, err
	}
	size := 16
	if in.Size != nil {
		size = *in.Size
	}
	if size < 1 || size > 256 {
		return plugin.Result{}, fmt.Errorf("size %d is not between 1 and 256", size)
	}
	img := image.NewNRGBA(image.Rect(0, 0, size, size))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, c.A
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return plugin.Result{}, err
	}
	text := fmt.Sprintf("A %d×%d swatch of %s.", size, size, strings.ToLower(in.Color))
	return wire.Result(wire.Text(text), wire.Image("image/png", buf.Bytes())), nil
}

// parseColor reads #rrggbb.
func parseColor(s string) (color.NRGBA, error) {
	hex, ok := strings.CutPrefix(s, "#")
	if !ok || len(hex) != 6 {
		return color.NRGBA{}, errors.New(`color must be #rrggbb, such as "#ff8800"`)
	}
	v, err := strconv.ParseUint(hex, 16, 32)
	if err != nil {
		return color.NRGBA{}, errors.New(`color must be #rrggbb, such as "#ff8800"`)
	}
	return color.NRGBA{R: uint8(v >> 16), G: uint8(v >> 8), B: uint8(v), A: 255}, nil
}
