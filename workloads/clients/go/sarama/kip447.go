//go:build !kchaos_no_kip447

package main

import "github.com/IBM/sarama"

// addOffsets adds the transaction's offsets with the session's group metadata: TxnOffsetCommit
// with the member id and generation (KIP-447, sarama 1.60.0's AddMessageToTxnWithGroupMetadata).
// A build for an older release has the tag kchaos_no_kip447 (kip447_none.go), chosen by kchaos'
// client registry (workloads/registry.py). It returns the generation it sent.
func addOffsets(p sarama.AsyncProducer, s sarama.ConsumerGroupSession, group string, instance *string,
	msg *sarama.ConsumerMessage) (int32, func() error) {
	meta := sarama.NewConsumerGroupMetadataFromSession(s, group, instance)
	return meta.GenerationID, func() error { return p.AddMessageToTxnWithGroupMetadata(msg, meta, nil) }
}
