//go:build kchaos_no_kip447

package main

import "github.com/IBM/sarama"

// addOffsets: a sarama release before 1.60.0 has no AddMessageToTxnWithGroupMetadata, so the
// offsets go with the group id alone (TxnOffsetCommit without the generation: no KIP-447 fencing),
// as kchaos' registry says of that release (workloads/registry.py).
func addOffsets(p sarama.AsyncProducer, s sarama.ConsumerGroupSession, group string, _ *string,
	msg *sarama.ConsumerMessage) (int32, func() error) {
	return s.GenerationID(), func() error { return p.AddMessageToTxn(msg, group, nil) }
}
