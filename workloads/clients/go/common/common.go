// Package common is what kchaos' Go workers (franz-go, sarama) share: the worker's config, the
// history writer, the lineage contract and the exit codes. Each worker follows its own client's
// documented exactly-once pattern; only this bookkeeping is shared. It mirrors
// workloads/ctp_worker.py and workloads/history.py (docs/workload.md, "History").
package common

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Exit codes, as workloads/pool.py reads them.
const (
	ExitStopped = 0
	ExitFenced  = 10
	ExitFatal   = 11
	ExitUnknown = 12
)

// Workload is the part of the [workload] table a worker reads (workloads/spec.py).
type Workload struct {
	InputTopic           string   `json:"input_topic"`
	OutputTopics         []string `json:"output_topics"`
	OutputsPerInput      int      `json:"outputs_per_input"`
	MaxBatch             int      `json:"max_batch"`
	ProcessDelayMs       int      `json:"process_delay_ms"`
	AbortFraction        float64  `json:"abort_fraction"`
	TransactionTimeoutMs int      `json:"transaction_timeout_ms"`
	SessionTimeoutMs     int      `json:"session_timeout_ms"`
	Isolation            string   `json:"isolation"`
	GroupID              string   `json:"group_id"`
	GroupProtocol        string   `json:"group_protocol"`
	Delivery             string   `json:"delivery"`
	Strategy             string   `json:"transactional_id_strategy"`
}

// Config is the worker's JSON config, as workloads/pool.py writes it, plus the client properties
// kchaos resolved for this client (workloads/native_clients.py): kchaos' defaults, then the
// campaign's [workload.producer] / [workload.consumer], in Kafka's property names.
type Config struct {
	Workload    Workload                     `json:"workload"`
	Worker      string                       `json:"worker"`
	Incarnation int                          `json:"incarnation"`
	Client      map[string]string            `json:"client"`
	Seed        int64                        `json:"seed"`
	TxidPrefix  string                       `json:"txid_prefix"`
	HistoryPath string                       `json:"history_path"`
	Properties  map[string]map[string]string `json:"properties"`
	// GroupInstanceID is the slot's KIP-345 static member id ("" for a dynamic member)
	GroupInstanceID string `json:"group_instance_id"`
	// NotHonoured names the campaign's settings this client cannot express, and why
	NotHonoured map[string]string `json:"not_honoured"`
}

// Load reads the config named on the command line (or by $KCHAOS_WORKER_CONFIG).
func Load() (*Config, error) {
	path := os.Getenv("KCHAOS_WORKER_CONFIG")
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var cfg Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for key := range cfg.Client {
		if key != "bootstrap.servers" {
			// the connection settings of a secured cluster are librdkafka's; this worker speaks
			// only plaintext (docs/clients.md)
			return nil, fmt.Errorf("client setting %q is not supported by this worker (plaintext clusters only)", key)
		}
	}
	return &cfg, nil
}

// Txid is the worker slot's transactional id (per-worker strategy, KIP-447).
func (c *Config) Txid() string { return c.TxidPrefix + "-" + c.Worker }

// Process names this process in the history ("w0.1").
func (c *Config) Process() string { return c.Worker + "." + strconv.Itoa(c.Incarnation) }

// Transactional says whether the pipeline runs exactly-once (else a negative control).
func (c *Config) Transactional() bool { return c.Workload.Delivery == "exactly-once" }

// Prop is a client property as a number of milliseconds (or any integer), if the table sets it.
func (c *Config) Prop(table, name string) (int, bool) {
	v, ok := c.Properties[table][name]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, false
	}
	return n, true
}

// Settings records, as the process's first history line, how its consumer joins the group and
// which of the campaign's settings it runs without (docs/clients.md).
func (c *Config) Settings(h *History, client string, sessionMs, rebalanceMs int) {
	var instance any
	if c.GroupInstanceID != "" {
		instance = c.GroupInstanceID
	}
	notHonoured := c.NotHonoured
	if notHonoured == nil {
		notHonoured = map[string]string{}
	}
	orNil := func(ms int) any { // 0: the broker's (KIP-848 owns the session and the rebalance)
		if ms <= 0 {
			return nil
		}
		return ms
	}
	h.Event("settings", V{"group_id": c.Workload.GroupID, "group_instance_id": instance,
		"session_timeout_ms": orNil(sessionMs), "rebalance_timeout_ms": orNil(rebalanceMs),
		"not_honoured": notHonoured}, "ok",
		Fields{"worker": c.Worker, "incarnation": c.Incarnation, "client": client})
}

// Ms is a duration of milliseconds.
func Ms(n int) time.Duration { return time.Duration(n) * time.Millisecond }

// Rng is the worker's seeded random source (intentional aborts), one per (seed, worker, incarnation).
func (c *Config) Rng() *rand.Rand {
	h := fnv.New64a()
	fmt.Fprintf(h, "%d:%s:%d", c.Seed, c.Worker, c.Incarnation)
	return rand.New(rand.NewSource(int64(h.Sum64())))
}

// History appends JSON lines to the process's history file, one write(2) per line on an
// O_APPEND descriptor, so a killed process leaves whole lines behind.
type History struct {
	mu      sync.Mutex
	f       *os.File
	process string
	next    int
}

// OpenHistory opens (creates) the history file.
func OpenHistory(path, process string) (*History, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &History{f: f, process: process}, nil
}

// Fields are the per-line fields besides the operation's own (worker, incarnation, txid, pid, epoch, client).
type Fields map[string]any

// V is an operation's value.
type V map[string]any

func (h *History) write(op int, typ, f string, value V, fields Fields, errText string) {
	rec := map[string]any{}
	for k, v := range fields {
		rec[k] = v
	}
	if value == nil {
		value = V{}
	}
	rec["time"] = float64(time.Now().UnixNano()) / 1e9
	rec["process"] = h.process
	rec["op"] = op
	rec["type"] = typ
	rec["f"] = f
	rec["value"] = value
	if errText != "" {
		rec["error"] = errText
	}
	line, err := json.Marshal(rec)
	if err != nil {
		panic(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f == nil {
		return
	}
	if _, err := h.f.Write(append(line, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "cannot write the history: %v\n", err)
		os.Exit(ExitFatal)
	}
}

// Invoke writes an operation's invoke line and returns its number.
func (h *History) Invoke(f string, value V, fields Fields) int {
	h.mu.Lock()
	op := h.next
	h.next++
	h.mu.Unlock()
	h.write(op, "invoke", f, value, fields, "")
	return op
}

// Complete writes an operation's completion: ok, fail, or info (outcome unknown).
func (h *History) Complete(op int, f, outcome string, value V, fields Fields, err error) {
	text := ""
	if err != nil {
		text = err.Error()
	}
	h.write(op, outcome, f, value, fields, text)
}

// Event is a single-line operation (invoke and completion at once).
func (h *History) Event(f string, value V, outcome string, fields Fields) {
	op := h.Invoke(f, value, fields)
	h.write(op, outcome, f, value, fields, "")
}

// Close closes the file; later writes are dropped.
func (h *History) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
}

// Lineage is one output's value (workloads/lineage.py); its key is the input id.
func Lineage(inID, topic string, partition int32, offset int64, slot, slots int, worker string, incarnation int,
	txid any, txnSeq int) []byte {
	b, _ := json.Marshal(map[string]any{
		"in_id": inID, "in_topic": topic, "in_partition": partition, "in_offset": offset, "slot": slot,
		"slots": slots, "worker": worker, "incarnation": incarnation, "txid": txid, "txn_seq": txnSeq,
	})
	return b
}

// Stopping is set by SIGTERM or SIGINT: the worker finishes its transaction, then exits 0.
type Stopping struct{ flag atomic.Bool }

// OnSignals starts watching for SIGTERM and SIGINT.
func OnSignals() *Stopping {
	s := &Stopping{}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for range ch {
			s.flag.Store(true)
		}
	}()
	return s
}

// Requested says whether a graceful stop was asked for.
func (s *Stopping) Requested() bool { return s.flag.Load() }

// Positions is a poll's first and last offset per partition ({"3": [10, 12]}).
func Positions(parts []int32, offsets []int64) map[string][2]int64 {
	out := map[string][2]int64{}
	for i, p := range parts {
		key := strconv.Itoa(int(p))
		o := offsets[i]
		cur, ok := out[key]
		if !ok {
			out[key] = [2]int64{o, o}
			continue
		}
		if o < cur[0] {
			cur[0] = o
		}
		if o > cur[1] {
			cur[1] = o
		}
		out[key] = cur
	}
	return out
}
