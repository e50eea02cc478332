module modelseal.dev/peers/modelspec-check

go 1.23.1

require (
	github.com/modelpack/model-spec v0.0.7
	github.com/opencontainers/go-digest v1.0.0
)

require github.com/santhosh-tekuri/jsonschema/v5 v5.3.1 // indirect
