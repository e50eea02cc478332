//go:build tools

// Package tools names the main package scripts/cluster.sh builds (etcd), so go mod tidy keeps its module.
package tools

import _ "go.etcd.io/etcd/server/v3"
