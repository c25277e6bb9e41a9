module github.com/kilnhq/kiln

go 1.26.8

// npm packages may ship .go files; they are not part of this module.
ignore ./web/ui/node_modules

require (
	github.com/fatih/color v1.19.0
	github.com/go-chi/chi/v5 v5.5.0
	github.com/mattn/go-isatty v0.0.24
	github.com/mattn/go-sqlite3 v1.14.53
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
	github.com/spf13/cobra v1.10.2
	github.com/spf13/pflag v1.0.9
	golang.org/x/text v0.14.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	golang.org/x/sys v0.42.0 // indirect
)
