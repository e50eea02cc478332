// modelspec-check judges a ModelPack artifact with the CNCF model-spec's own Go code
// (github.com/modelpack/model-spec v0.0.7, fetched from the Go module proxy):
//
//	modelspec-check MANIFEST CONFIG   a manifest and its config blob, as files
//	modelspec-check -config CONFIG    a config blob alone
//
// It prints one line per finding and exits 1 if there is any, 2 on a usage or read
// error, 0 (printing "ok") otherwise. Checked: the config against the spec's
// validator (schema.ValidatorMediaTypeModelConfig) and decoded into v1.Model; the
// manifest's artifactType and config type against the spec's constants, the config
// descriptor against the config's bytes; each layer's media type is one of the
// spec's, carries the spec's filepath annotation (and, when present, file metadata
// that decodes into v1.FileMetadata); modelfs.diffIds has one valid digest per layer,
// and an uncompressed (tar or raw) layer's diffId is its own digest.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/modelpack/model-spec/schema"
	v1 "github.com/modelpack/model-spec/specs-go/v1"
	digest "github.com/opencontainers/go-digest"
)

const ociManifest = "application/vnd.oci.image.manifest.v1+json"

var layerTypes = map[string]bool{}

func init() {
	for _, t := range []string{
		v1.MediaTypeModelWeightRaw, v1.MediaTypeModelWeight, v1.MediaTypeModelWeightGzip, v1.MediaTypeModelWeightZstd,
		v1.MediaTypeModelWeightConfigRaw, v1.MediaTypeModelWeightConfig, v1.MediaTypeModelWeightConfigGzip,
		v1.MediaTypeModelWeightConfigZstd,
		v1.MediaTypeModelDocRaw, v1.MediaTypeModelDoc, v1.MediaTypeModelDocGzip, v1.MediaTypeModelDocZstd,
		v1.MediaTypeModelCodeRaw, v1.MediaTypeModelCode, v1.MediaTypeModelCodeGzip, v1.MediaTypeModelCodeZstd,
		v1.MediaTypeModelDatasetRaw, v1.MediaTypeModelDataset, v1.MediaTypeModelDatasetGzip,
		v1.MediaTypeModelDatasetZstd,
	} {
		layerTypes[t] = true
	}
}

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      digest.Digest     `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
}

type manifest struct {
	MediaType    string       `json:"mediaType"`
	ArtifactType string       `json:"artifactType"`
	Config       descriptor   `json:"config"`
	Layers       []descriptor `json:"layers"`
}

var findings int

func finding(format string, args ...any) {
	findings++
	fmt.Printf(format+"\n", args...)
}

// checkConfig validates the config and returns its diffIds, and whether it decodes.
func checkConfig(body []byte) ([]digest.Digest, bool) {
	if err := schema.ValidatorMediaTypeModelConfig.Validate(bytes.NewReader(body)); err != nil {
		finding("config: the spec's validator refuses it: %s", oneLine(err))
	}
	var model v1.Model
	if err := json.Unmarshal(body, &model); err != nil {
		finding("config: does not decode into v1.Model: %s", oneLine(err))
		return nil, false
	}
	for i, d := range model.ModelFS.DiffIDs {
		if err := d.Validate(); err != nil {
			finding("config: modelfs.diffIds[%d] %q: %s", i, d, err)
		}
	}
	return model.ModelFS.DiffIDs, true
}

func checkManifest(body []byte, config []byte) {
	diffIDs, decoded := checkConfig(config)
	var m manifest
	if err := json.Unmarshal(body, &m); err != nil {
		finding("manifest: not a manifest: %s", oneLine(err))
		return
	}
	if m.MediaType != ociManifest {
		finding("manifest: mediaType %q, not %q", m.MediaType, ociManifest)
	}
	if m.ArtifactType != v1.ArtifactTypeModelManifest {
		finding("manifest: artifactType %q, not %q", m.ArtifactType, v1.ArtifactTypeModelManifest)
	}
	if m.Config.MediaType != v1.MediaTypeModelConfig {
		finding("manifest: config mediaType %q, not %q", m.Config.MediaType, v1.MediaTypeModelConfig)
	}
	if got := digest.FromBytes(config); m.Config.Digest != got || m.Config.Size != int64(len(config)) {
		finding("manifest: config descriptor %s (%d bytes), the config given is %s (%d bytes)",
			m.Config.Digest, m.Config.Size, got, len(config))
	}
	if len(m.Layers) == 0 {
		finding("manifest: no layers")
	}
	if decoded && len(diffIDs) != len(m.Layers) {
		finding("config: %d diffIds for %d layers", len(diffIDs), len(m.Layers))
	}
	for i, l := range m.Layers {
		if !layerTypes[l.MediaType] {
			finding("layer %d: media type %q is not one of the spec's", i, l.MediaType)
		}
		if l.Annotations[v1.AnnotationFilepath] == "" {
			finding("layer %d: no %s annotation", i, v1.AnnotationFilepath)
		}
		if meta, ok := l.Annotations[v1.AnnotationFileMetadata]; ok {
			var fm v1.FileMetadata
			if err := json.Unmarshal([]byte(meta), &fm); err != nil {
				finding("layer %d: %s does not decode into v1.FileMetadata: %s", i, v1.AnnotationFileMetadata, oneLine(err))
			}
		}
		uncompressed := strings.HasSuffix(l.MediaType, ".raw") || strings.HasSuffix(l.MediaType, ".tar")
		if uncompressed && i < len(diffIDs) && diffIDs[i] != l.Digest {
			finding("layer %d: uncompressed, digest %s, but diffIds[%d] is %s", i, l.Digest, i, diffIDs[i])
		}
	}
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

func read(path string) []byte {
	body, err := os.ReadFile(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "modelspec-check:", err)
		os.Exit(2)
	}
	return body
}

func main() {
	configOnly := flag.Bool("config", false, "check a config blob alone")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: modelspec-check MANIFEST CONFIG | modelspec-check -config CONFIG")
	}
	flag.Parse()
	switch {
	case *configOnly && flag.NArg() == 1:
		checkConfig(read(flag.Arg(0)))
	case !*configOnly && flag.NArg() == 2:
		checkManifest(read(flag.Arg(0)), read(flag.Arg(1)))
	default:
		flag.Usage()
		os.Exit(2)
	}
	if findings > 0 {
		os.Exit(1)
	}
	fmt.Println("ok")
}
