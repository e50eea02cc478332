//go:build tools

// Package tools names the main packages scripts/cluster.sh builds, so go mod tidy keeps their modules.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
