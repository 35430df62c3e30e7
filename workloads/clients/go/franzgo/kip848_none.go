//go:build kchaos_no_kip848

package main

import "github.com/twmb/franz-go/pkg/kgo"

// kip848Opts: a franz-go release before 1.22.0 has no public KIP-848 opt-in (kgo.ServerSideBalancer),
// so the worker joins through the classic protocol, as kchaos' registry says of that release
// (workloads/registry.py) and the worker's settings line records (not_honoured).
func kip848Opts() ([]kgo.Opt, bool) {
	return nil, false
}
