package hub

import "github.com/kilnhq/kiln/plugins/pluginapi"

// The hub's answers are the types the API and the SDK share.
type (
	// Status is a provider as the API and the CLI show it.
	Status = pluginapi.ProviderStatus
	// Setting is one resolved setting.
	Setting = pluginapi.ProviderSetting
	// ConfigInput sets a provider's configuration.
	ConfigInput = pluginapi.ProviderConfig
	// Model is one model a provider offers.
	Model = pluginapi.Model
	// Models is every configured provider's models and every provider's
	// status.
	Models = pluginapi.Models
)
