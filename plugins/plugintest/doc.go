// Package plugintest helps test plugin hosts and the plugins they run:
// Build builds a plugin's main package for a runtime (once per test
// binary), WritePlugin and WritePluginKinds lay out a plugin folder with
// its manifest, CalcPlugin does both for the calc example, and a
// HoldServer holds requests until the test releases them. The kinds'
// conformance kits live with the kinds (plugins/toolset/toolsettest,
// plugins/providers/modelprovider/modelprovidertest).
package plugintest
