module github.com/kilnhq/kiln

go 1.26.8

require (
	github.com/go-chi/chi/v5 v5.5.0
	github.com/mattn/go-sqlite3 v1.14.53
	gopkg.in/yaml.v3 v3.0.1
)
