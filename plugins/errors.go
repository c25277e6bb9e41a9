package plugins

import "errors"

// ErrTransport marks a failure of the channel to a plugin (a trapped WASM
// instance, a plugin process that died or refused to start) as opposed to
// an error the plugin's tool returned.
var ErrTransport = errors.New("plugin transport failed")
