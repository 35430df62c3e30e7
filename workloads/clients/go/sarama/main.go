// kchaos' consume-transform-produce worker on IBM/sarama.
//
// It follows sarama's exactly-once example (examples/exactly_once): a ConsumerGroup with
// auto-commit off and read_committed, a ConsumeClaim loop per input partition, a transactional
// AsyncProducer borrowed from a provider (Net.MaxOpenRequests = 1, WaitForAll, Idempotent), and
// per transaction: BeginTxn, the outputs on Input(), AddMessageToTxnWithGroupMetadata with the
// session's member id and generation (KIP-447, sarama's opt-in), CommitTxn. Errors go through the
// example's handleTxnError: a fatal producer is closed (a new one is made at the next borrow) and
// the claim's offset reset; an abortable error is aborted (AbortTxn until it succeeds) and the
// offset reset; any other error retries the same call.
//
// Where kchaos differs from the example, and why:
//   - a transaction holds up to max_batch inputs of one claim (the example makes one per message);
//     its offsets are the last input's (AddMessageToTxnWithGroupMetadata of the last message);
//   - transactional ids: per-partition (the example's "<prefix>-<topic>-<partition>") or
//     per-worker ("<prefix>-w<slot>", one producer the claims take in turn);
//   - a fenced producer (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH) ends the process with exit 10,
//     as every kchaos worker does, where the example would make a new producer with the same id;
//   - the producer's Errors() channel is drained (the example leaves it, which blocks the producer
//     once an error is returned);
//   - a seeded abort_fraction of transactions is aborted on purpose;
//   - with workload.static_membership the group joins with Consumer.Group.InstanceId (KIP-345),
//     and the transaction's group metadata carries it. A FENCED_INSTANCE_ID (another process took
//     this slot's instance id) ends sarama's session; the example's loop would call Consume again
//     and join with the same id. The worker ends there instead (exit 10), as at a producer fence,
//     and so at a FENCED_INSTANCE_ID answer to TxnOffsetCommit, which sarama classes abortable.
//
// sarama's ResetOffset changes only the offset the session would commit: it does not rewind the
// claim, which goes on with the next message. So after an abort the aborted inputs are not read
// again until the partition is reassigned, and the next transaction on the claim commits past them
// (docs/clients.md). The producer id and epoch come from sarama's debug log ("successful init
// producer id"); sarama has no public accessor for them.
//
// Exit codes: 0 stopped (SIGTERM: the current transaction finishes), 10 fenced, 11 fatal.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"kchaos/workers/common"
)

// pidLog reads sarama's debug log for each transactional id's producer id and epoch, and writes
// sarama's own (non-debug) log to the worker's log file.
type pidLog struct {
	mu     sync.Mutex
	byTxid map[string][2]int64
	debug  bool
}

var initLine = regexp.MustCompile(`init-producer-id \[([^\]]*)\] successful init producer id .*ProducerID:(-?\d+) ProducerEpoch:(-?\d+)`)

func (l *pidLog) line(text string) {
	if m := initLine.FindStringSubmatch(text); m != nil {
		id, _ := strconv.ParseInt(m[2], 10, 64)
		epoch, _ := strconv.ParseInt(m[3], 10, 64)
		l.mu.Lock()
		l.byTxid[m[1]] = [2]int64{id, epoch}
		l.mu.Unlock()
	}
	if !l.debug {
		fmt.Fprintf(os.Stderr, "%.3f %s", float64(time.Now().UnixNano())/1e9, text)
		if !strings.HasSuffix(text, "\n") {
			fmt.Fprintln(os.Stderr)
		}
	}
}

func (l *pidLog) Print(v ...any)                 { l.line(fmt.Sprint(v...)) }
func (l *pidLog) Printf(format string, v ...any) { l.line(fmt.Sprintf(format, v...)) }
func (l *pidLog) Println(v ...any)               { l.line(fmt.Sprintln(v...)) }

type worker struct {
	cfg     *common.Config
	h       *common.History
	ids     *pidLog
	stop    *common.Stopping
	brokers []string
	group   sarama.ConsumerGroup
	rng     interface{ Float64() float64 }

	mu        sync.Mutex // txnSeq, producers
	txnSeq    int
	producers map[string]*borrowed
	// the per-worker producer is taken by one claim at a time
	exitOnce sync.Once
}

type borrowed struct {
	mu       sync.Mutex
	producer sarama.AsyncProducer
	failure  error // the first output that could not be written in the current transaction
	failMu   sync.Mutex
}

func (w *worker) fields(txid string) common.Fields {
	f := common.Fields{"worker": w.cfg.Worker, "incarnation": w.cfg.Incarnation, "txid": nil, "pid": nil,
		"epoch": nil, "client": "sarama"}
	if txid != "" {
		f["txid"] = txid
		w.ids.mu.Lock()
		if v, ok := w.ids.byTxid[txid]; ok {
			f["pid"], f["epoch"] = v[0], v[1]
		}
		w.ids.mu.Unlock()
	}
	return f
}

func (w *worker) slotFields() common.Fields {
	return common.Fields{"worker": w.cfg.Worker, "incarnation": w.cfg.Incarnation}
}

// exit records why the process ends and ends it (from any goroutine).
func (w *worker) exit(code int, f, reason, txid string) {
	w.exitOnce.Do(func() {
		w.h.Event(f, common.V{"reason": reason}, "info", w.fields(txid))
		w.h.Close()
		os.Exit(code)
	})
	select {} // another goroutine is exiting
}

func isFenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch) ||
		errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed) || errors.Is(err, sarama.ErrFencedInstancedId)
}

// instanceID is the slot's static member id for the transaction's group metadata (nil: dynamic)
func (w *worker) instanceID() *string {
	if w.cfg.GroupInstanceID == "" {
		return nil
	}
	id := w.cfg.GroupInstanceID
	return &id
}

func (w *worker) txid(partition int32) string {
	if w.strategy() == "per-partition" {
		return w.cfg.TxidPrefix + "-" + w.cfg.Workload.InputTopic + "-" + strconv.Itoa(int(partition))
	}
	return w.cfg.Txid()
}

func (w *worker) strategy() string { return w.cfg.Workload.Strategy }

func (w *worker) producerConfig(txid string) *sarama.Config {
	c := sarama.NewConfig()
	c.ClientID = "kchaos-" + w.cfg.Worker + "-producer"
	c.Net.MaxOpenRequests = 1
	c.Producer.RequiredAcks = sarama.WaitForAll
	c.Producer.Return.Errors = true
	if w.cfg.Transactional() {
		c.Producer.Idempotent = true
		c.Producer.Transaction.ID = txid
		c.Producer.Transaction.Timeout = common.Ms(w.cfg.Workload.TransactionTimeoutMs)
	} else {
		c.Producer.Return.Successes = true // a SyncProducer needs them
		c.Producer.Idempotent = w.cfg.Workload.Delivery == "at-least-once"
	}
	if v, ok := w.cfg.Prop("producer", "linger.ms"); ok {
		c.Producer.Flush.Frequency = common.Ms(v)
	}
	if v, ok := w.cfg.Prop("producer", "retry.backoff.ms"); ok {
		c.Producer.Retry.Backoff = common.Ms(v)
		c.Producer.Transaction.Retry.Backoff = common.Ms(v)
	}
	if v, ok := w.cfg.Prop("producer", "request.timeout.ms"); ok {
		c.Producer.Timeout = common.Ms(v) // sarama: "Equivalent to the JVM producer's request.timeout.ms"
	}
	return c
}

// borrow returns the transaction's producer, creating it (InitProducerId) when there is none.
func (w *worker) borrow(txid string) *borrowed {
	w.mu.Lock()
	b, ok := w.producers[txid]
	if !ok {
		b = &borrowed{}
		w.producers[txid] = b
	}
	w.mu.Unlock()
	b.mu.Lock()
	if b.producer == nil {
		op := w.h.Invoke("init", nil, w.fields(txid))
		p, err := sarama.NewAsyncProducer(w.brokers, w.producerConfig(txid))
		if err != nil {
			w.h.Complete(op, "init", "fail", nil, w.fields(txid), err)
			b.mu.Unlock()
			if isFenced(err) {
				w.exit(common.ExitFenced, "fenced", "init: "+err.Error(), txid)
			}
			w.exit(common.ExitFatal, "fatal", "init: "+err.Error(), txid)
		}
		w.h.Complete(op, "init", "ok", nil, w.fields(txid), nil)
		b.producer = p
		go func() { // the example never reads Errors(); an unread error would block the producer
			for pe := range p.Errors() {
				b.failMu.Lock()
				if b.failure == nil {
					b.failure = pe.Err
				}
				b.failMu.Unlock()
				fmt.Fprintf(os.Stderr, "%.3f producer error %s: %v\n", float64(time.Now().UnixNano())/1e9, txid, pe.Err)
			}
		}()
	}
	return b
}

// release gives the producer back; one in error is closed, as the example's provider does.
func (w *worker) release(b *borrowed) {
	if b.producer != nil && b.producer.TxnStatus()&sarama.ProducerTxnFlagInError != 0 {
		_ = b.producer.Close()
		b.producer = nil
	}
	b.mu.Unlock()
}

type handler struct{ w *worker }

func (hd handler) Setup(s sarama.ConsumerGroupSession) error {
	parts := append([]int32(nil), s.Claims()[hd.w.cfg.Workload.InputTopic]...)
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	v := common.V{"partitions": parts, "generation": s.GenerationID()}
	if hd.w.cfg.GroupInstanceID != "" {
		v["group_instance_id"] = hd.w.cfg.GroupInstanceID
	}
	hd.w.h.Event("assign", v, "ok", hd.w.slotFields())
	return nil
}

func (hd handler) Cleanup(s sarama.ConsumerGroupSession) error {
	parts := append([]int32(nil), s.Claims()[hd.w.cfg.Workload.InputTopic]...)
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	hd.w.h.Event("revoke", common.V{"partitions": parts}, "ok", hd.w.slotFields())
	if cause := context.Cause(s.Context()); errors.Is(cause, sarama.ErrFencedInstancedId) {
		// the heartbeat was answered FENCED_INSTANCE_ID: the claims have ended; rejoining would
		// take the id back from the process that replaced this one
		hd.w.exit(common.ExitFenced, "fenced", "group: "+cause.Error(), hd.w.cfg.Txid())
	}
	return nil
}

// ConsumeClaim: the example's loop, with up to max_batch messages per transaction.
func (hd handler) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	w := hd.w
	for {
		if w.stop.Requested() {
			return nil
		}
		select {
		case first, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			batch := []*sarama.ConsumerMessage{first}
			deadline := time.After(20 * time.Millisecond)
		gather:
			for len(batch) < w.cfg.Workload.MaxBatch {
				select {
				case m, ok := <-claim.Messages():
					if !ok {
						break gather
					}
					batch = append(batch, m)
				case <-deadline:
					break gather
				}
			}
			parts := make([]int32, len(batch))
			offs := make([]int64, len(batch))
			for i, m := range batch {
				parts[i], offs[i] = m.Partition, m.Offset
			}
			w.h.Event("poll", common.V{"count": len(batch), "positions": common.Positions(parts, offs)}, "ok",
				w.slotFields())
			if w.cfg.Transactional() {
				w.transaction(s, batch)
			} else {
				w.atLeastOnce(s, batch)
			}
		case <-s.Context().Done():
			return nil
		}
	}
}

func (w *worker) nextSeq() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.txnSeq++
	return w.txnSeq
}

func inputs(batch []*sarama.ConsumerMessage) [][2]int64 {
	out := make([][2]int64, len(batch))
	for i, m := range batch {
		out[i] = [2]int64{int64(m.Partition), m.Offset}
	}
	return out
}

func (w *worker) outputs(batch []*sarama.ConsumerMessage, txid any, seq int) []*sarama.ProducerMessage {
	wl := w.cfg.Workload
	var out []*sarama.ProducerMessage
	for _, m := range batch {
		for j := 0; j < wl.OutputsPerInput; j++ {
			value := common.Lineage(string(m.Key), m.Topic, m.Partition, m.Offset, j, wl.OutputsPerInput,
				w.cfg.Worker, w.cfg.Incarnation, txid, seq)
			out = append(out, &sarama.ProducerMessage{Topic: wl.OutputTopics[j%len(wl.OutputTopics)],
				Key: sarama.ByteEncoder(m.Key), Value: sarama.ByteEncoder(value)})
		}
	}
	return out
}

func (w *worker) transaction(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) {
	first, last := batch[0], batch[len(batch)-1]
	txid := w.txid(first.Partition)
	b := w.borrow(txid)
	defer w.release(b)
	p := b.producer
	seq := w.nextSeq()
	if err := p.BeginTxn(); err != nil {
		// the example logs it and drops the message; a fenced producer ends the process here
		fmt.Fprintf(os.Stderr, "%.3f unable to start transaction: %v\n", float64(time.Now().UnixNano())/1e9, err)
		if isFenced(err) {
			w.exit(common.ExitFenced, "fenced", "begin: "+err.Error(), txid)
		}
		return
	}
	b.failMu.Lock()
	b.failure = nil
	b.failMu.Unlock()
	op := w.h.Invoke("send", common.V{"txn_seq": seq, "inputs": inputs(batch)}, w.fields(txid))
	outs := w.outputs(batch, txid, seq)
	for _, m := range outs {
		p.Input() <- m
	}
	w.h.Complete(op, "send", "ok", common.V{"outputs": len(outs)}, w.fields(txid), nil)
	if d := w.cfg.Workload.ProcessDelayMs; d > 0 {
		time.Sleep(common.Ms(d))
	}
	generation, add := addOffsets(p, s, w.cfg.Workload.GroupID, w.instanceID(), last) // kip447.go
	offsets := common.V{strconv.Itoa(int(last.Partition)): last.Offset + 1}
	op = w.h.Invoke("send_offsets", common.V{"txn_seq": seq, "offsets": offsets, "generation": generation},
		w.fields(txid))
	if err := add(); err != nil {
		w.h.Complete(op, "send_offsets", "fail", common.V{"attempts": 1}, w.fields(txid), err)
		w.handleTxnError(p, s, first, txid, seq, err, add)
		return
	}
	w.h.Complete(op, "send_offsets", "ok", common.V{"attempts": 1}, w.fields(txid), nil)
	if w.rng.Float64() < w.cfg.Workload.AbortFraction {
		// AbortTxn waits for the outputs in flight first: the aborted outputs reach the log
		w.abort(p, s, first, txid, seq, "intentional")
		return
	}
	op = w.h.Invoke("commit", common.V{"txn_seq": seq, "offsets": offsets}, w.fields(txid))
	attempts := 1
	err := p.CommitTxn()
	for err != nil {
		status := p.TxnStatus()
		switch {
		case isFenced(err) || (status&sarama.ProducerTxnFlagFatalError != 0 && isFenced(errors.Unwrap(err))):
			w.h.Complete(op, "commit", "info", common.V{"attempts": attempts}, w.fields(txid), err)
			w.exit(common.ExitFenced, "fenced", "commit: "+err.Error(), txid)
		case status&sarama.ProducerTxnFlagFatalError != 0:
			// the example: the producer is closed at release, the offset reset, the batch dropped
			w.h.Complete(op, "commit", "info", common.V{"attempts": attempts}, w.fields(txid), err)
			w.resetOffset(s, first, txid, "fatal: "+err.Error())
			return
		case status&sarama.ProducerTxnFlagAbortableError != 0:
			w.h.Complete(op, "commit", "fail", common.V{"attempts": attempts}, w.fields(txid), err)
			w.abort(p, s, first, txid, seq, "error: "+err.Error())
			return
		}
		attempts++ // "if not you can retry": the same call again
		err = p.CommitTxn()
	}
	w.h.Complete(op, "commit", "ok", common.V{"attempts": attempts}, w.fields(txid), nil)
}

// handleTxnError is the example's, for an error before the commit.
func (w *worker) handleTxnError(p sarama.AsyncProducer, s sarama.ConsumerGroupSession, first *sarama.ConsumerMessage,
	txid string, seq int, err error, retry func() error) {
	for attempt := 0; ; attempt++ {
		status := p.TxnStatus()
		if isFenced(err) {
			w.exit(common.ExitFenced, "fenced", err.Error(), txid)
		}
		if status&sarama.ProducerTxnFlagFatalError != 0 {
			w.resetOffset(s, first, txid, "fatal: "+err.Error())
			return
		}
		if status&sarama.ProducerTxnFlagAbortableError != 0 {
			w.abort(p, s, first, txid, seq, "error: "+err.Error())
			return
		}
		if attempt >= 100 {
			w.exit(common.ExitFatal, "fatal", "retried 100 times: "+err.Error(), txid)
		}
		if err = retry(); err == nil {
			// the call went through after all: the transaction is still open and is ended by an
			// abort (this process cannot tell which outputs the retried call covered)
			w.abort(p, s, first, txid, seq, "after a retried call")
			return
		}
	}
}

// abort is the example's: AbortTxn until it succeeds, then reset the claim's offset.
func (w *worker) abort(p sarama.AsyncProducer, s sarama.ConsumerGroupSession, first *sarama.ConsumerMessage,
	txid string, seq int, reason string) {
	op := w.h.Invoke("abort", common.V{"txn_seq": seq, "reason": reason}, w.fields(txid))
	for attempt := 1; ; attempt++ {
		err := p.AbortTxn()
		if err == nil {
			break
		}
		if isFenced(err) {
			w.h.Complete(op, "abort", "info", nil, w.fields(txid), err)
			w.exit(common.ExitFenced, "fenced", "abort: "+err.Error(), txid)
		}
		if p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 || attempt >= 100 {
			w.h.Complete(op, "abort", "info", nil, w.fields(txid), err)
			w.resetOffset(s, first, txid, "fatal: "+err.Error())
			return
		}
	}
	w.h.Complete(op, "abort", "ok", nil, w.fields(txid), nil)
	w.resetOffset(s, first, txid, reason)
}

// resetOffset is the example's session.ResetOffset: the offset the session would commit, not the
// claim's position (the claim goes on with the next message).
func (w *worker) resetOffset(s sarama.ConsumerGroupSession, first *sarama.ConsumerMessage, txid, reason string) {
	s.ResetOffset(first.Topic, first.Partition, first.Offset, "")
	w.h.Event("reset-offset", common.V{"partition": first.Partition, "offset": first.Offset, "reason": reason,
		"rewinds_claim": false}, "ok", w.slotFields())
}

// atLeastOnce is the negative control: send and wait for every acknowledgement, then mark and
// commit the offsets with the consumer group, outside any transaction.
func (w *worker) atLeastOnce(s sarama.ConsumerGroupSession, batch []*sarama.ConsumerMessage) {
	seq := w.nextSeq()
	w.mu.Lock()
	b, ok := w.producers[""]
	if !ok {
		b = &borrowed{}
		w.producers[""] = b
	}
	w.mu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.producer == nil {
		p, err := sarama.NewAsyncProducer(w.brokers, w.producerConfig(""))
		if err != nil {
			w.exit(common.ExitFatal, "fatal", "producer: "+err.Error(), "")
		}
		b.producer = p
	}
	sp := b.producer
	op := w.h.Invoke("send", common.V{"txn_seq": seq, "inputs": inputs(batch)}, w.fields(""))
	outs := w.outputs(batch, nil, seq)
	for _, m := range outs {
		sp.Input() <- m
	}
	if d := w.cfg.Workload.ProcessDelayMs; d > 0 {
		time.Sleep(common.Ms(d))
	}
	timeout := time.After(60 * time.Second)
	for acked := 0; acked < len(outs); acked++ {
		select {
		case <-sp.Successes():
		case pe := <-sp.Errors():
			w.h.Complete(op, "send", "info", common.V{"outputs": len(outs)}, w.fields(""), pe.Err)
			w.exit(common.ExitUnknown, "exit-unknown", "outputs not acknowledged: "+pe.Err.Error(), "")
		case <-timeout:
			w.h.Complete(op, "send", "info", common.V{"outputs": len(outs)}, w.fields(""), errors.New("timed out"))
			w.exit(common.ExitUnknown, "exit-unknown", "outputs not acknowledged within 60s", "")
		}
	}
	w.h.Complete(op, "send", "ok", common.V{"outputs": len(outs), "unflushed": 0}, w.fields(""), nil)
	last := batch[len(batch)-1]
	offsets := common.V{strconv.Itoa(int(last.Partition)): last.Offset + 1}
	op = w.h.Invoke("commit_offsets", common.V{"txn_seq": seq, "offsets": offsets}, w.fields(""))
	s.MarkMessage(last, "")
	s.Commit()
	w.h.Complete(op, "commit_offsets", "ok", nil, w.fields(""), nil)
}

func main() {
	cfg, err := common.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kchaos sarama worker:", err)
		os.Exit(common.ExitFatal)
	}
	h, err := common.OpenHistory(cfg.HistoryPath, cfg.Process())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kchaos sarama worker:", err)
		os.Exit(common.ExitFatal)
	}
	ids := &pidLog{byTxid: map[string][2]int64{}, debug: true}
	sarama.DebugLogger = ids
	sarama.Logger = &pidLog{byTxid: ids.byTxid, debug: false}
	w := &worker{cfg: cfg, h: h, ids: ids, stop: common.OnSignals(), rng: cfg.Rng(),
		brokers: strings.Split(cfg.Client["bootstrap.servers"], ","), producers: map[string]*borrowed{}}

	wl := cfg.Workload
	c := sarama.NewConfig()
	c.ClientID = "kchaos-" + cfg.Worker + "-consumer"
	c.Consumer.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategyRange()}
	c.Consumer.Offsets.Initial = sarama.OffsetOldest
	c.Consumer.IsolationLevel = sarama.ReadCommitted
	if wl.Isolation == "read_uncommitted" {
		c.Consumer.IsolationLevel = sarama.ReadUncommitted
	}
	c.Consumer.Offsets.AutoCommit.Enable = false
	c.Consumer.Group.Session.Timeout = common.Ms(wl.SessionTimeoutMs)
	c.Consumer.Group.Heartbeat.Interval = time.Second
	rebalanceMs := max(60000, 2*wl.TransactionTimeoutMs)
	if v, ok := cfg.Prop("consumer", "max.poll.interval.ms"); ok {
		rebalanceMs = v
	}
	c.Consumer.Group.Rebalance.Timeout = common.Ms(rebalanceMs)
	if cfg.GroupInstanceID != "" {
		c.Consumer.Group.InstanceId = cfg.GroupInstanceID // KIP-345 (Config.Version 2.3+; sarama's default is 2.8)
	}
	cfg.Settings(h, "sarama", wl.SessionTimeoutMs, rebalanceMs)
	if v, ok := cfg.Prop("consumer", "fetch.max.wait.ms"); ok {
		c.Consumer.MaxWaitTime = common.Ms(v)
	}
	w.group, err = sarama.NewConsumerGroup(w.brokers, wl.GroupID, c)
	if err != nil {
		w.exit(common.ExitFatal, "fatal", "consumer group: "+err.Error(), "")
	}
	if cfg.Transactional() && cfg.Workload.Strategy != "per-partition" {
		w.release(w.borrow(cfg.Txid())) // the worker's one producer, initialised before the first poll
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for !w.stop.Requested() {
			time.Sleep(100 * time.Millisecond)
		}
		cancel()
	}()
	// "Consume should be called inside an infinite loop": each rebalance ends a session
	for ctx.Err() == nil {
		if err := w.group.Consume(ctx, []string{wl.InputTopic}, handler{w}); err != nil {
			if errors.Is(err, sarama.ErrClosedConsumerGroup) {
				break
			}
			if errors.Is(err, sarama.ErrFencedInstancedId) { // JoinGroup or SyncGroup refused this member
				w.exit(common.ExitFenced, "fenced", "group: "+err.Error(), cfg.Txid())
			}
			fmt.Fprintf(os.Stderr, "%.3f consume: %v\n", float64(time.Now().UnixNano())/1e9, err)
			time.Sleep(time.Second)
		}
	}
	_ = w.group.Close()
	w.mu.Lock()
	for _, b := range w.producers {
		if b.producer != nil {
			_ = b.producer.Close()
		}
	}
	w.mu.Unlock()
	h.Close()
	os.Exit(common.ExitStopped)
}
