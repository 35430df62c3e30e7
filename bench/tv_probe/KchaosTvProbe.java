// A transactional producer that never restarts: one transaction after another, each a record to
// every partition of one topic, committed; one JSON line per transaction with what the producer
// itself believes (KIP-890 "txn_v2", producer id and epoch, the finalized-features epoch it last
// read and the newest its ApiVersions holds, connections it has opened so far).
//
//   java -cp <classes>:<kafka-clients jars> KchaosTvProbe BOOTSTRAP TXID TOPIC PARTITIONS INTERVAL_MS OUT STOP_FILE
//
// A commit or abort that times out is called again (as KafkaProducer's contract asks); a failed
// commit is aborted. It never creates a second producer: an error it cannot abort past ends the
// process (exit 2), so every line of OUT is one producer instance's. It stops (exit 0) when
// STOP_FILE exists.

import java.io.File;
import java.io.FileOutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.errors.AuthorizationException;
import org.apache.kafka.common.errors.OutOfOrderSequenceException;
import org.apache.kafka.common.errors.ProducerFencedException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KchaosTvProbe {
    static FileOutputStream out;

    static void line(String json) throws Exception {
        out.write((json + "\n").getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    static Object field(Object o, Class<?> c, String name) throws Exception {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
    }

    /** The producer's own view, by reflection (not public API); "null" where a release hides it. */
    static String state(KafkaProducer<byte[], byte[]> p) {
        String v2 = "null", pid = "null", epoch = "null", seen = "null", max = "null";
        try {
            Object tm = field(p, KafkaProducer.class, "transactionManager");
            v2 = String.valueOf(tm.getClass().getMethod("isTransactionV2Enabled").invoke(tm));
            Method pe = tm.getClass().getDeclaredMethod("producerIdAndEpoch");
            pe.setAccessible(true);
            Object ie = pe.invoke(tm);
            pid = String.valueOf(ie.getClass().getField("producerId").getLong(ie));
            epoch = String.valueOf(ie.getClass().getField("epoch").getShort(ie));
            seen = String.valueOf(field(tm, tm.getClass(), "latestFinalizedFeaturesEpoch"));
            Object av = field(p, KafkaProducer.class, "apiVersions");
            max = String.valueOf(av.getClass().getMethod("getMaxFinalizedFeaturesEpoch").invoke(av));
        } catch (Exception ignored) {
        }
        double connections = -1;
        for (Map.Entry<MetricName, ? extends Metric> e : p.metrics().entrySet()) {
            if (e.getKey().name().equals("connection-creation-total") && e.getKey().group().equals("producer-metrics")) {
                connections = ((Number) e.getValue().metricValue()).doubleValue();
            }
        }
        return "\"txn_v2\":" + v2 + ",\"pid\":" + pid + ",\"epoch\":" + epoch + ",\"features_epoch_read\":" + seen
               + ",\"features_epoch_known\":" + max + ",\"connections\":" + (long) connections;
    }

    static String quote(Object o) {
        return "\"" + String.valueOf(o).replace("\\", "\\\\").replace("\"", "'").replace("\n", " ") + "\"";
    }

    /** commitTransaction, called again after a timeout (Kafka's contract: a timed-out commit must be
     *  retried, not aborted), for at most 10 tries of max.block.ms each. */
    static void commit(KafkaProducer<byte[], byte[]> p) {
        for (int i = 0; ; i++) {
            try {
                p.commitTransaction();
                return;
            } catch (TimeoutException e) {
                if (i == 9) throw e;
            }
        }
    }

    static void abort(KafkaProducer<byte[], byte[]> p) {
        for (int i = 0; ; i++) {
            try {
                p.abortTransaction();
                return;
            } catch (TimeoutException e) {
                if (i == 9) throw e;
            }
        }
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], txid = args[1], topic = args[2];
        int partitions = Integer.parseInt(args[3]);
        long intervalMs = Long.parseLong(args[4]);
        out = new FileOutputStream(args[5], true);
        File stop = new File(args[6]);
        Properties props = new Properties();
        props.put("bootstrap.servers", bootstrap);
        props.put("transactional.id", txid);
        props.put("client.id", "tvprobe-" + txid);
        props.put("acks", "all");
        props.put("linger.ms", "0");
        props.put("request.timeout.ms", "5000");
        props.put("delivery.timeout.ms", "20000");
        props.put("max.block.ms", "20000");
        props.put("transaction.timeout.ms", "30000");
        props.put("reconnect.backoff.max.ms", "1000");
        props.put("key.serializer", ByteArraySerializer.class.getName());
        props.put("value.serializer", ByteArraySerializer.class.getName());
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
        producer.initTransactions();
        line("{\"time\":" + System.currentTimeMillis() / 1000.0 + ",\"event\":\"init\"," + state(producer) + "}");
        long seq = 0;
        while (!stop.exists()) {
            long started = System.currentTimeMillis();
            String before = state(producer);
            String outcome = "commit", error = null;
            try {
                producer.beginTransaction();
                for (int p = 0; p < partitions; p++) {
                    producer.send(new ProducerRecord<>(topic, p, null, (txid + ":" + seq).getBytes(StandardCharsets.UTF_8)));
                }
                commit(producer);
            } catch (ProducerFencedException | OutOfOrderSequenceException | AuthorizationException e) {
                line("{\"time\":" + System.currentTimeMillis() / 1000.0 + ",\"event\":\"fatal\",\"error\":" + quote(e) + "}");
                System.exit(2);
            } catch (Exception e) {
                outcome = "abort";
                error = e.toString();
                try {
                    abort(producer);
                } catch (Exception again) {
                    line("{\"time\":" + System.currentTimeMillis() / 1000.0 + ",\"event\":\"fatal\",\"error\":"
                         + quote(error + " | abort: " + again) + "}");
                    System.exit(2);
                }
            }
            line("{\"time\":" + System.currentTimeMillis() / 1000.0 + ",\"event\":\"txn\",\"seq\":" + seq
                 + ",\"outcome\":\"" + outcome + "\",\"began\":" + started / 1000.0 + ",\"before\":{" + before + "},"
                 + state(producer) + (error == null ? "" : ",\"error\":" + quote(error)) + "}");
            seq++;
            long rest = intervalMs - (System.currentTimeMillis() - started);
            if (rest > 0) Thread.sleep(rest);
        }
        producer.close();
        line("{\"time\":" + System.currentTimeMillis() / 1000.0 + ",\"event\":\"stopped\"}");
    }
}
