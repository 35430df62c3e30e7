//go:build !kchaos_no_kip848

package main

import "github.com/twmb/franz-go/pkg/kgo"

// kip848Opts opts the session into KIP-848 "next-gen" consumer groups: the broker assigns;
// franz-go needs the range or sticky balancer for it. kgo.ServerSideBalancer is franz-go
// 1.22.0's; a build for an older release has the tag kchaos_no_kip848 (kip848_none.go), chosen by
// kchaos' client registry (workloads/registry.py).
func kip848Opts() ([]kgo.Opt, bool) {
	return []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer())}, true
}
