package main

import (
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/anthropic"
	"github.com/kilnhq/kiln/plugins/providers/gemini"
	"github.com/kilnhq/kiln/plugins/providers/ollama"
)

// providerFactories are the model providers compiled into kiln.
var providerFactories = map[string]providers.Factory{
	"anthropic": anthropic.New,
	"gemini":    gemini.New,
	"ollama":    ollama.New,
}
