package registry

import "github.com/kilnhq/kiln/plugins/pluginapi"

// The registry's answers are the types the API and the SDK share.
type (
	// Status is where an installed plugin is.
	Status = pluginapi.Status
	// Info describes an installed (or built-in) plugin.
	Info = pluginapi.Info
	// Preview is what installing a plugin folder would do.
	Preview = pluginapi.Preview
	// InstallRequest asks to install a plugin folder.
	InstallRequest = pluginapi.InstallRequest
)

// Statuses.
const (
	StatusEnabled  = pluginapi.StatusEnabled
	StatusDisabled = pluginapi.StatusDisabled
	StatusFailed   = pluginapi.StatusFailed
)
