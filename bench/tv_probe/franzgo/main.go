// A franz-go transactional producer that never restarts: one transaction after another, a record
// to every partition of one topic, committed; one JSON line per transaction with the producer id
// and epoch franz-go holds and the connections it has opened so far (a connect hook).
//
//	tvprobe BOOTSTRAP TXID TOPIC PARTITIONS INTERVAL_MS OUT STOP_FILE
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

type connects struct{ n atomic.Int64 }

func (c *connects) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.n.Add(1)
	}
}

func main() {
	bootstrap, txid, topic := os.Args[1], os.Args[2], os.Args[3]
	partitions, _ := strconv.Atoi(os.Args[4])
	interval, _ := strconv.Atoi(os.Args[5])
	out, err := os.OpenFile(os.Args[6], os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	stop := os.Args[7]
	hook := &connects{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.TransactionalID(txid), kgo.ClientID("tvprobe-"+txid),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(30*time.Second),
		kgo.RequestTimeoutOverhead(5*time.Second), kgo.WithHooks(hook))
	if err != nil {
		panic(err)
	}
	write := func(m map[string]any) {
		m["time"] = float64(time.Now().UnixMilli()) / 1000
		b, _ := json.Marshal(m)
		out.Write(append(b, '\n'))
	}
	state := func(m map[string]any) map[string]any {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if id, epoch, err := cl.ProducerID(ctx); err == nil {
			m["pid"], m["epoch"] = id, epoch
		}
		m["connections"] = hook.n.Load()
		return m
	}
	write(state(map[string]any{"event": "init"}))
	for seq := 0; ; seq++ {
		if _, err := os.Stat(stop); err == nil {
			break
		}
		started := time.Now()
		outcome, errText := "commit", ""
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := cl.BeginTransaction()
		if err == nil {
			recs := make([]*kgo.Record, partitions)
			for p := range recs {
				recs[p] = &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte(fmt.Sprintf("%s:%d", txid, seq))}
			}
			err = cl.ProduceSync(ctx, recs...).FirstErr()
			if err == nil {
				err = cl.EndTransaction(ctx, kgo.TryCommit)
			}
		}
		cancel()
		if err != nil {
			outcome, errText = "abort", err.Error()
			aborted := false
			for i := 0; i < 10 && !aborted; i++ {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				if e := cl.AbortBufferedRecords(ctx); e != nil {
					errText += " | abort buffered: " + e.Error()
				}
				if e := cl.EndTransaction(ctx, kgo.TryAbort); e != nil {
					errText += " | abort: " + e.Error()
					time.Sleep(time.Second)
				} else {
					aborted = true
				}
				cancel()
			}
			if !aborted {
				write(map[string]any{"event": "fatal", "error": errText})
				os.Exit(2)
			}
		}
		m := state(map[string]any{"event": "txn", "seq": seq, "outcome": outcome,
			"began": float64(started.UnixMilli()) / 1000})
		if errText != "" {
			m["error"] = errText
		}
		write(m)
		if rest := time.Duration(interval)*time.Millisecond - time.Since(started); rest > 0 {
			time.Sleep(rest)
		}
	}
	cl.Close()
	write(map[string]any{"event": "stopped"})
}
