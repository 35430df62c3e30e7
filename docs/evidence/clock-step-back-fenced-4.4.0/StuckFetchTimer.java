// F9's quorum side, reduced (issue 61): a KRaft voter's FollowerState after its wall clock was
// 1 hour ahead while it started following, then stepped back. Kafka's Timer ignores a clock that
// goes back, so the fetch timeout (controller.quorum.fetch.timeout.ms) stays an hour on: the
// voter does not notice its leader gone, and refuses the pre-votes of the voter that did.
// Compile and run against a release's kafka-raft, kafka-clients, kafka-server-common and slf4j-api.
package org.apache.kafka.raft;

import java.util.Optional;
import java.util.Set;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;

public class StuckFetchTimer {
    static final class WallClock implements Time {  // a wall clock the test steps; monotonic time true
        long ms;
        WallClock(long ms) { this.ms = ms; }
        public long milliseconds() { return ms; }
        public long nanoseconds() { return System.nanoTime(); }
        public void sleep(long ms) { }
        public void waitObject(Object o, java.util.function.Supplier<Boolean> c, long d) { }
    }

    static FollowerState follower(Time time) {
        return new FollowerState(time, 5, 2, Endpoints.empty(), Optional.empty(), Set.of(1, 2, 3),
            Optional.empty(), 6000, new LogContext());
    }

    public static void main(String[] args) {
        long now = System.currentTimeMillis();
        long ahead = now + 3_600_000L;
        ReplicaKey third = ReplicaKey.of(3, Uuid.randomUuid());

        // voter 1: its clock 1 h ahead when it starts following leader 2 and fetches once
        WallClock c1 = new WallClock(ahead);
        FollowerState stepped = follower(c1);
        stepped.resetFetchTimeoutForSuccessfulFetch(ahead);
        // the clock is true again; it fetches from its leader once more, 2 s on
        stepped.resetFetchTimeoutForSuccessfulFetch(now + 2_000L);
        // a voter that never had its clock moved, the same fetches
        WallClock c2 = new WallClock(now);
        FollowerState plain = follower(c2);
        plain.resetFetchTimeoutForSuccessfulFetch(now);
        plain.resetFetchTimeoutForSuccessfulFetch(now + 2_000L);

        // the leader dies right after; 20 s later (fetch timeout 6 s):
        long later = now + 22_000L;
        System.out.printf("voter never stepped: fetch timeout expired=%s, grants voter 3's pre-vote=%s%n",
            plain.hasFetchTimeoutExpired(later), plain.canGrantVote(third, true, true));
        System.out.printf("voter stepped 1 h ahead and back: fetch timeout expired=%s, remaining=%d ms, grants voter 3's pre-vote=%s%n",
            stepped.hasFetchTimeoutExpired(later), stepped.remainingFetchTimeMs(later), stepped.canGrantVote(third, true, true));
        long hourLater = now + 3_600_000L + 8_000L;
        System.out.printf("the stepped voter, 1 h later: fetch timeout expired=%s%n", stepped.hasFetchTimeoutExpired(hourLater));
    }
}
