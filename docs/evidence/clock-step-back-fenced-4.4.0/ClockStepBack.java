// F9's reduced case: Kafka's ClusterConnectionStates (the NetworkClient's connection bookkeeping,
// which the broker's channel to its controller uses) after the wall clock steps 1 hour ahead and back.
// Compile and run against a release's kafka-clients jar and slf4j-api; prints what canConnect says.
// In Kafka's package, as Kafka's own ClusterConnectionStatesTest is: the class is package-private.
package org.apache.kafka.clients;

import java.lang.reflect.Constructor;

public class ClockStepBack {
    public static void main(String[] args) throws Exception {
        Class<?> logContextClass;  // moved to utils.internals in 4.3
        try {
            logContextClass = Class.forName("org.apache.kafka.common.utils.internals.LogContext");
        } catch (ClassNotFoundException e) {
            logContextClass = Class.forName("org.apache.kafka.common.utils.LogContext");
        }
        Constructor<ClusterConnectionStates> make = ClusterConnectionStates.class.getConstructor(
            long.class, long.class, long.class, long.class, logContextClass, HostResolver.class);
        // reconnect.backoff.ms 50, reconnect.backoff.max.ms 1000, socket.connection.setup.timeout.ms 10 s / max 30 s: the defaults
        ClusterConnectionStates states = make.newInstance(50L, 1000L, 10000L, 30000L,
            logContextClass.getConstructor().newInstance(), new DefaultHostResolver());

        long now = System.currentTimeMillis();
        long ahead = now + 3_600_000L;  // the wall clock stepped 1 hour ahead
        // while ahead: the channel connects to node 1, then drops it (its controller resigned)
        states.connecting("1", ahead, "localhost");
        states.disconnected("1", ahead);
        // a node dropped at the true time, for comparison
        states.connecting("2", now, "localhost");
        states.disconnected("2", now);

        long later = now + 2_000L;  // the clock is true again; 2 s have passed
        System.out.printf("node 2 (dropped at the true time): canConnect=%s connectionDelay=%d ms%n",
            states.canConnect("2", later), states.connectionDelay("2", later));
        System.out.printf("node 1 (dropped while the clock was 1 h ahead): canConnect=%s connectionDelay=%d ms%n",
            states.canConnect("1", later), states.connectionDelay("1", later));
        long hourLater = now + 3_600_000L + 2_000L;
        System.out.printf("node 1, one hour later: canConnect=%s%n", states.canConnect("1", hourLater));
    }
}
