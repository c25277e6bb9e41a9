package main

import "github.com/kilnhq/kiln/plugins/providers"

// providerFactories are the model providers compiled into kiln.
var providerFactories = map[string]providers.Factory{}
