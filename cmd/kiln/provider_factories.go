package main

import (
	"github.com/kilnhq/kiln/plugins/providers"
	"github.com/kilnhq/kiln/plugins/providers/anthropic"
	"github.com/kilnhq/kiln/plugins/providers/bedrock"
	"github.com/kilnhq/kiln/plugins/providers/gemini"
	"github.com/kilnhq/kiln/plugins/providers/ollama"
	"github.com/kilnhq/kiln/plugins/providers/openai"
	"github.com/kilnhq/kiln/plugins/providers/openrouter"
)

// providerFactories are the model providers compiled into kiln.
var providerFactories = map[string]providers.Factory{
	"anthropic":  anthropic.New,
	"bedrock":    bedrock.New,
	"gemini":     gemini.New,
	"ollama":     ollama.New,
	"openai":     openai.New,
	"openrouter": openrouter.New,
}
