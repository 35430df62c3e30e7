// kchaos' consume-transform-produce worker on franz-go (github.com/twmb/franz-go/pkg/kgo).
//
// It follows franz-go's documented exactly-once pattern (docs/transactions.md and the EOS
// example): one GroupTransactSession that consumes in the group and produces transactionally;
// per poll: Begin, produce every output with an AbortingFirstErrPromise, then End(TryCommit when
// every produce succeeded). End commits the consumed offsets (TxnOffsetCommit with the group's
// generation and member id, KIP-447), forces a heartbeat, and commits, or aborts when the group
// rebalanced meanwhile or an abortable error came back; after an abort the session itself rewinds
// the consumer to the committed offsets. End's errors are never retriable (its documentation:
// "odds are you should not continue"), so an End that fails ends the process.
//
// What kchaos adds around that pattern, for the history (workloads/history.py) and the faults:
//   - the producer id is loaded (ProducerID) before the first poll and recorded as "init": franz-go
//     would otherwise send InitProducerId at the first produce; doing it at start fences a
//     predecessor at once, as every other client's init does;
//   - the producer id and epoch of each line come from franz-go's own info log lines (the client
//     does not otherwise expose them without side effects: ProducerID reloads a failed id);
//   - a seeded abort_fraction of transactions is aborted on purpose (End(TryAbort) after a Flush,
//     so the aborted outputs reach the log);
//   - with workload.static_membership the session joins with kgo.InstanceID (KIP-345). franz-go
//     answers a FENCED_INSTANCE_ID (another process took this slot's instance id) as any group
//     error: OnPartitionsLost, then a rejoin after the retry backoff, which would take the id back
//     from the process that replaced this one. The worker ends there instead (exit 10), from
//     HookGroupManageError, the hook franz-go offers "to detect potentially fatal errors".
//
// Exit codes: 0 stopped (SIGTERM: the current transaction finishes), 10 fenced, 11 fatal,
// 12 outcome unknown.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kchaos/workers/common"
)

// producerLog keeps what franz-go's log says about the producer id, and writes warnings and
// errors to the worker's log (workers/<process>.log).
type producerLog struct {
	mu    sync.Mutex
	pid   any
	epoch any
	v2    any
}

func (l *producerLog) Level() kgo.LogLevel { return kgo.LogLevelInfo }

func (l *producerLog) Log(level kgo.LogLevel, msg string, keyvals ...any) {
	kv := map[string]any{}
	for i := 0; i+1 < len(keyvals); i += 2 {
		if k, ok := keyvals[i].(string); ok {
			kv[k] = keyvals[i+1]
		}
	}
	l.mu.Lock()
	switch msg {
	case "producer id initialization success":
		l.pid, l.epoch = kv["id"], kv["epoch"]
	case "end transaction response successfully received":
		if id, ok := kv["new_id"]; ok { // EndTxn v5 (KIP-890 part 2) names the next id and epoch
			l.pid, l.epoch, l.v2 = id, kv["new_epoch"], true
		} else {
			l.pid, l.epoch, l.v2 = kv["producer_id"], kv["epoch"], false
		}
	}
	l.mu.Unlock()
	if level <= kgo.LogLevelWarn {
		var b strings.Builder
		fmt.Fprintf(&b, "%.3f %s %s", float64(time.Now().UnixNano())/1e9, level, msg)
		for i := 0; i+1 < len(keyvals); i += 2 {
			fmt.Fprintf(&b, " %v=%v", keyvals[i], keyvals[i+1])
		}
		fmt.Fprintln(os.Stderr, b.String())
	}
}

type worker struct {
	exiting  atomic.Bool // the process is ending: only one path records why
	cfg      *common.Config
	h        *common.History
	log      *producerLog
	stop     *common.Stopping
	sess     *kgo.GroupTransactSession // exactly-once
	cl       *kgo.Client               // the session's client, or the negative control's plain client
	txid     any
	txnSeq   int
	topic    string
	abortRng interface{ Float64() float64 }
}

type exit struct {
	code   int
	f      string
	reason string
}

func (e *exit) Error() string { return e.reason }

func (w *worker) fields() common.Fields {
	w.log.mu.Lock()
	defer w.log.mu.Unlock()
	f := common.Fields{"worker": w.cfg.Worker, "incarnation": w.cfg.Incarnation, "txid": w.txid, "pid": w.log.pid,
		"epoch": w.log.epoch, "client": "franz-go"}
	if w.log.v2 != nil {
		f["txn_v2"] = w.log.v2
	}
	return f
}

func (w *worker) slotFields() common.Fields {
	return common.Fields{"worker": w.cfg.Worker, "incarnation": w.cfg.Incarnation}
}

func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed) || errors.Is(err, kerr.FencedInstanceID)
}

// OnGroupManageError ends the process when another process took this slot's static member id
// (kgo.HookGroupManageError): franz-go would rejoin with the same id and fence that process in
// turn. A transaction under way is left as a crash leaves it (its operations unknown).
func (w *worker) OnGroupManageError(err error) {
	if !errors.Is(err, kerr.FencedInstanceID) || !w.exiting.CompareAndSwap(false, true) {
		return
	}
	w.h.Event("fenced", common.V{"reason": "group: " + err.Error()}, "info", w.fields())
	w.h.Close()
	os.Exit(common.ExitFenced)
}

func (w *worker) assigned(m map[string][]int32) common.V {
	v := common.V{"partitions": w.partitions(m)}
	if w.cfg.GroupInstanceID != "" {
		v["group_instance_id"] = w.cfg.GroupInstanceID
	}
	return v
}

func (w *worker) partitions(m map[string][]int32) []int32 {
	ps := append([]int32(nil), m[w.topic]...)
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// rebalanceMs is the classic group's rebalance timeout: Kafka's max.poll.interval.ms, as the Java
// client sends it (client_settings.classic_consumer_defaults below the campaign's)
func (w *worker) rebalanceMs() int {
	if v, ok := w.cfg.Prop("consumer", "max.poll.interval.ms"); ok {
		return v
	}
	return max(60000, 2*w.cfg.Workload.TransactionTimeoutMs)
}

func (w *worker) options() []kgo.Opt {
	wl := w.cfg.Workload
	rebalance := w.rebalanceMs()
	level := kgo.ReadCommitted()
	if wl.Isolation == "read_uncommitted" {
		level = kgo.ReadUncommitted()
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(strings.Split(w.cfg.Client["bootstrap.servers"], ",")...),
		// one client consumes and produces (GroupTransactSession): it carries the producer's id
		kgo.ClientID("kchaos-" + w.cfg.Worker + "-producer"),
		kgo.WithLogger(w.log),
		kgo.WithHooks(w),
		kgo.ConsumerGroup(wl.GroupID),
		kgo.ConsumeTopics(wl.InputTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.h.Event("assign", w.assigned(m), "ok", w.slotFields())
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.h.Event("revoke", common.V{"partitions": w.partitions(m)}, "ok", w.slotFields())
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, m map[string][]int32) {
			w.h.Event("revoke", common.V{"partitions": w.partitions(m), "lost": true}, "ok", w.slotFields())
		}),
	}
	if w.cfg.GroupInstanceID != "" {
		opts = append(opts, kgo.InstanceID(w.cfg.GroupInstanceID))
	}
	kip848, ok := kip848Opts()
	if wl.GroupProtocol == "consumer" && ok {
		opts = append(opts, kip848...) // KIP-848 (kip848.go)
	} else {
		opts = append(opts, kgo.SessionTimeout(common.Ms(wl.SessionTimeoutMs)), kgo.HeartbeatInterval(time.Second),
			kgo.RebalanceTimeout(common.Ms(rebalance)))
	}
	if v, ok := w.cfg.Prop("producer", "linger.ms"); ok {
		opts = append(opts, kgo.ProducerLinger(common.Ms(v)))
	}
	if v, ok := w.cfg.Prop("producer", "retry.backoff.ms"); ok {
		opts = append(opts, kgo.RetryBackoffFn(func(int) time.Duration { return common.Ms(v) }))
	}
	if v, ok := w.cfg.Prop("producer", "request.timeout.ms"); ok {
		opts = append(opts, kgo.ProduceRequestTimeout(common.Ms(v)), kgo.RequestTimeoutOverhead(common.Ms(v)))
	}
	if v, ok := w.cfg.Prop("producer", "delivery.timeout.ms"); ok {
		opts = append(opts, kgo.RecordDeliveryTimeout(common.Ms(v)))
	}
	if v, ok := w.cfg.Prop("consumer", "fetch.max.wait.ms"); ok {
		opts = append(opts, kgo.FetchMaxWait(common.Ms(v)))
	}
	if w.cfg.Transactional() {
		opts = append(opts, kgo.TransactionalID(w.cfg.Txid()),
			kgo.TransactionTimeout(common.Ms(wl.TransactionTimeoutMs)))
	} else {
		opts = append(opts, kgo.DisableAutoCommit())
		if wl.Delivery == "at-least-once-no-idempotence" {
			opts = append(opts, kgo.DisableIdempotentWrite())
		}
	}
	return opts
}

func (w *worker) start() error {
	var err error
	if w.cfg.Workload.GroupProtocol == "consumer" {
		w.cfg.Settings(w.h, "franz-go", 0, 0)
	} else {
		w.cfg.Settings(w.h, "franz-go", w.cfg.Workload.SessionTimeoutMs, w.rebalanceMs())
	}
	if !w.cfg.Transactional() {
		w.cl, err = kgo.NewClient(w.options()...)
		if err != nil {
			return &exit{common.ExitFatal, "fatal", "client: " + err.Error()}
		}
		return nil
	}
	w.txid = w.cfg.Txid()
	w.sess, err = kgo.NewGroupTransactSession(w.options()...)
	if err != nil {
		return &exit{common.ExitFatal, "fatal", "session: " + err.Error()}
	}
	w.cl = w.sess.Client()
	// A load that failed on the network (a dead coordinator's refused connection) is not kept:
	// franz-go loads the id again at the next call, as a produce of the EOS example would (its
	// records retry a failed load). So the worker asks again, in the group, for up to 60 s,
	// instead of leaving the group to start over.
	deadline := time.Now().Add(60 * time.Second)
	for {
		op := w.h.Invoke("init", nil, w.fields())
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		_, _, err := w.cl.ProducerID(ctx)
		cancel()
		if err == nil {
			w.h.Complete(op, "init", "ok", nil, w.fields(), nil)
			return nil
		}
		w.h.Complete(op, "init", "fail", nil, w.fields(), err)
		if isFenced(err) {
			return &exit{common.ExitFenced, "fenced", "init: " + err.Error()}
		}
		if time.Now().Add(500*time.Millisecond).After(deadline) || w.stop.Requested() || !loadFailed(err) {
			return &exit{common.ExitFatal, "fatal", "init: " + err.Error()}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// loadFailed: the id could not be loaded for a request's failure (franz-go did not keep the
// attempt), not for a broker's answer that stands.
func loadFailed(err error) bool {
	return strings.Contains(err.Error(), "unable to initialize a producer ID due to request failures")
}

func (w *worker) poll() []*kgo.Record {
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	var fetches kgo.Fetches
	if w.sess != nil {
		fetches = w.sess.PollRecords(ctx, w.cfg.Workload.MaxBatch)
	} else {
		fetches = w.cl.PollRecords(ctx, w.cfg.Workload.MaxBatch)
	}
	if fetches.IsClientClosed() {
		panic(&exit{common.ExitFatal, "fatal", "the client was closed"})
	}
	for _, fe := range fetches.Errors() {
		if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
			// the example logs fetch errors and processes whatever records came with them
			fmt.Fprintf(os.Stderr, "%.3f fetch error %s[%d]: %v\n", float64(time.Now().UnixNano())/1e9, fe.Topic,
				fe.Partition, fe.Err)
		}
	}
	recs := fetches.Records()
	if len(recs) == 0 {
		return nil
	}
	parts := make([]int32, len(recs))
	offs := make([]int64, len(recs))
	for i, r := range recs {
		parts[i], offs[i] = r.Partition, r.Offset
	}
	w.h.Event("poll", common.V{"count": len(recs), "positions": common.Positions(parts, offs)}, "ok", w.slotFields())
	return recs
}

func inputs(recs []*kgo.Record) [][2]int64 {
	out := make([][2]int64, len(recs))
	for i, r := range recs {
		out[i] = [2]int64{int64(r.Partition), r.Offset}
	}
	return out
}

// produce writes every output; promise gives each its own completion callback (a FirstErrPromise
// counts one per call).
func (w *worker) produce(recs []*kgo.Record, seq int, promise func() func(*kgo.Record, error)) int {
	wl := w.cfg.Workload
	n := 0
	for _, r := range recs {
		for j := 0; j < wl.OutputsPerInput; j++ {
			value := common.Lineage(string(r.Key), r.Topic, r.Partition, r.Offset, j, wl.OutputsPerInput,
				w.cfg.Worker, w.cfg.Incarnation, w.txid, seq)
			out := &kgo.Record{Topic: wl.OutputTopics[j%len(wl.OutputTopics)], Key: r.Key, Value: value}
			if w.sess != nil {
				w.sess.Produce(context.Background(), out, promise())
			} else {
				w.cl.Produce(context.Background(), out, promise())
			}
			n++
		}
	}
	return n
}

// offsets are the input positions the session will commit: what it consumed and has not committed.
func (w *worker) offsets(m map[string]map[int32]kgo.EpochOffset) common.V {
	out := common.V{}
	for p, eo := range m[w.topic] {
		out[strconv.Itoa(int(p))] = eo.Offset
	}
	return out
}

func (w *worker) rewound() {
	w.h.Event("rewind", common.V{"offsets": w.offsets(w.cl.CommittedOffsets()), "by": "GroupTransactSession.End"},
		"ok", w.slotFields())
}

func (w *worker) transaction(recs []*kgo.Record) {
	w.txnSeq++
	seq := w.txnSeq
	if err := w.sess.Begin(); err != nil {
		if isFenced(err) {
			panic(&exit{common.ExitFenced, "fenced", "begin: " + err.Error()})
		}
		panic(&exit{common.ExitFatal, "fatal", "begin: " + err.Error()})
	}
	op := w.h.Invoke("send", common.V{"txn_seq": seq, "inputs": inputs(recs)}, w.fields())
	e := kgo.AbortingFirstErrPromise(w.cl)
	n := w.produce(recs, seq, e.Promise)
	w.h.Complete(op, "send", "ok", common.V{"outputs": n}, w.fields(), nil)
	if d := w.cfg.Workload.ProcessDelayMs; d > 0 {
		time.Sleep(common.Ms(d))
	}
	intentional := w.abortRng.Float64() < w.cfg.Workload.AbortFraction
	if intentional {
		_ = w.cl.Flush(context.Background()) // the aborted outputs must reach the log: the raw view shows them
	}
	produceErr := e.Err() // waits for every output's promise
	if intentional || produceErr != nil {
		reason := "intentional"
		if produceErr != nil {
			reason = "error: " + produceErr.Error()
		}
		op := w.h.Invoke("abort", common.V{"txn_seq": seq, "reason": reason}, w.fields())
		if _, err := w.sess.End(context.Background(), kgo.TryAbort); err != nil {
			w.h.Complete(op, "abort", "info", nil, w.fields(), err)
			if isFenced(err) {
				panic(&exit{common.ExitFenced, "fenced", "abort: " + err.Error()})
			}
			panic(&exit{common.ExitFatal, "fatal", "abort failed: " + err.Error()})
		}
		w.h.Complete(op, "abort", "ok", nil, w.fields(), nil)
		w.rewound()
		return
	}
	// End sends the offsets (TxnOffsetCommit) and ends the transaction in one call: both
	// operations are invoked here and completed by its answer
	offsets := w.offsets(w.cl.UncommittedOffsets())
	soOp := w.h.Invoke("send_offsets", common.V{"txn_seq": seq, "offsets": offsets}, w.fields())
	cOp := w.h.Invoke("commit", common.V{"txn_seq": seq, "offsets": offsets}, w.fields())
	committed, err := w.sess.End(context.Background(), kgo.TryCommit)
	switch {
	case committed:
		w.h.Complete(soOp, "send_offsets", "ok", common.V{"attempts": 1}, w.fields(), nil)
		w.h.Complete(cOp, "commit", "ok", common.V{"attempts": 1}, w.fields(), nil)
	case err == nil:
		// the session aborted instead: a rebalance began, or TxnOffsetCommit or the heartbeat after
		// it answered an abortable error; it has rewound to the committed offsets
		why := errors.New("GroupTransactSession.End aborted the transaction (a rebalance, or an abortable " +
			"answer to TxnOffsetCommit or to the heartbeat after it)")
		w.h.Complete(soOp, "send_offsets", "info", common.V{"attempts": 1}, w.fields(), why)
		w.h.Complete(cOp, "commit", "fail", common.V{"attempts": 1}, w.fields(), why)
		w.h.Event("abort", common.V{"txn_seq": seq, "reason": "session: " + why.Error()}, "ok", w.fields())
		w.rewound()
	default:
		// "No returned error is retryable": the commit may or may not have happened
		w.h.Complete(soOp, "send_offsets", "info", common.V{"attempts": 1}, w.fields(), err)
		w.h.Complete(cOp, "commit", "info", common.V{"attempts": 1}, w.fields(), err)
		if isFenced(err) {
			panic(&exit{common.ExitFenced, "fenced", "commit: " + err.Error()})
		}
		panic(&exit{common.ExitUnknown, "exit-unknown", fmt.Sprintf("commit of transaction %d did not complete: %v", seq, err)})
	}
}

// atLeastOnce is the negative control: produce, wait for every acknowledgement, then commit the
// consumed offsets with the consumer, outside any transaction.
func (w *worker) atLeastOnce(recs []*kgo.Record) {
	w.txnSeq++
	seq := w.txnSeq
	op := w.h.Invoke("send", common.V{"txn_seq": seq, "inputs": inputs(recs)}, w.fields())
	var mu sync.Mutex
	var first error
	n := w.produce(recs, seq, func() func(*kgo.Record, error) {
		return func(_ *kgo.Record, err error) {
			mu.Lock()
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		}
	})
	if d := w.cfg.Workload.ProcessDelayMs; d > 0 {
		time.Sleep(common.Ms(d))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	flushErr := w.cl.Flush(ctx)
	cancel()
	mu.Lock()
	err := first
	mu.Unlock()
	if err == nil {
		err = flushErr
	}
	if err != nil {
		w.h.Complete(op, "send", "info", common.V{"outputs": n}, w.fields(), err)
		panic(&exit{common.ExitUnknown, "exit-unknown", "outputs not acknowledged: " + err.Error()})
	}
	w.h.Complete(op, "send", "ok", common.V{"outputs": n, "unflushed": 0}, w.fields(), nil)
	offsets := w.offsets(w.cl.UncommittedOffsets())
	op = w.h.Invoke("commit_offsets", common.V{"txn_seq": seq, "offsets": offsets}, w.fields())
	if err := w.cl.CommitUncommittedOffsets(context.Background()); err != nil {
		// the outputs are written but the position is not saved: they will be written again
		w.h.Complete(op, "commit_offsets", "fail", nil, w.fields(), err)
		return
	}
	w.h.Complete(op, "commit_offsets", "ok", nil, w.fields(), nil)
}

func (w *worker) run() (code int) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*exit)
			if !ok {
				panic(r)
			}
			if !w.exiting.CompareAndSwap(false, true) {
				select {} // OnGroupManageError is ending the process
			}
			w.h.Event(e.f, common.V{"reason": e.reason}, "info", w.fields())
			code = e.code
		}
		w.close()
	}()
	if err := w.start(); err != nil {
		panic(err)
	}
	for !w.stop.Requested() {
		recs := w.poll()
		if len(recs) == 0 {
			continue
		}
		if w.sess != nil {
			w.transaction(recs)
		} else {
			w.atLeastOnce(recs)
		}
	}
	return common.ExitStopped
}

func (w *worker) close() {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if w.sess != nil {
			w.sess.Close()
		} else if w.cl != nil {
			w.cl.Close()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second): // a fenced or partitioned client may not leave the group in time
	}
	w.h.Close()
}

func main() {
	cfg, err := common.Load()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kchaos franz-go worker:", err)
		os.Exit(common.ExitFatal)
	}
	h, err := common.OpenHistory(cfg.HistoryPath, cfg.Process())
	if err != nil {
		fmt.Fprintln(os.Stderr, "kchaos franz-go worker:", err)
		os.Exit(common.ExitFatal)
	}
	w := &worker{cfg: cfg, h: h, log: &producerLog{}, stop: common.OnSignals(), topic: cfg.Workload.InputTopic,
		abortRng: cfg.Rng()}
	os.Exit(w.run())
}
