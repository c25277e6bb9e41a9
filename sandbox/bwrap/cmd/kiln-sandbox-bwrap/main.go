// Command kiln-sandbox-bwrap is the "bwrap" sandbox runtime
// (sandbox/bwrap) as a Kiln process plugin: sandboxes confined by
// bubblewrap, kept in the plugin's data folder. Its plugin folder is
// this program beside sandbox/bwrap/kiln-plugin.process.json, copied as
// kiln-plugin.json, with the program's sha256 filled in:
//
//	go build -o bwrap/kiln-sandbox-bwrap ./sandbox/bwrap/cmd/kiln-sandbox-bwrap
//	cp sandbox/bwrap/kiln-plugin.process.json bwrap/kiln-plugin.json
//	kiln plugin checksum --write bwrap
//	kiln plugin install ./bwrap
//
// (make examples makes bin/plugins/bwrap so). Kiln starts it with the
// plugin's data folder in KILN_PLUGIN_DATA; run by hand it says so and
// exits.
package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/kilnhq/kiln/sandbox"
	"github.com/kilnhq/kiln/sandbox/bwrap"
	"github.com/kilnhq/kiln/sandbox/sandboxplugin"
	"github.com/kilnhq/kiln/sdk/plugin"
)

func main() {
	plugin.Serve(sandboxplugin.Runtime{Open: func(context.Context) (sandbox.Runtime, error) {
		data := os.Getenv("KILN_PLUGIN_DATA")
		if data == "" {
			return nil, errors.New("KILN_PLUGIN_DATA is not set: Kiln sets it to the plugin's data folder when it runs the plugin")
		}
		return bwrap.New(bwrap.Options{Dir: filepath.Join(data, "sandboxes")})
	}})
}
