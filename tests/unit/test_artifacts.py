"""Which jar Maven could not find, from its own output (clusters/artifacts.missing_artifacts):
the error kchaos prints names it, and a release whose tools' closure is incomplete still gets
its broker only when the broker itself resolved."""

from kchaos.runtime.artifacts import missing_artifacts


def test_first_miss_is_named():
    out = ("[ERROR] Failed to execute goal on project jars: Could not resolve dependencies for project "
           "kchaos.resolve:jars:pom:1: Could not find artifact org.apache.kafka:kafka_2.13:jar:9.9.9 in "
           "kchaos-central (https://repo.maven.apache.org/maven2)")
    assert missing_artifacts(out) == ["org.apache.kafka:kafka_2.13:9.9.9"]


def test_remembered_misses_are_named_not_the_broker():
    # Maven's wording when its local repository remembers the miss (4.0.1's Connect jars here)
    out = ("[ERROR] Failed to execute goal on project jars: Could not resolve dependencies for project "
           "kchaos.resolve:jars:pom:1: The following artifacts could not be resolved: "
           "org.apache.kafka:connect-api:jar:4.0.1, org.apache.kafka:connect-json:jar:4.0.1: "
           "org.apache.kafka:connect-api:jar:4.0.1 was not found in https://repo.maven.apache.org/maven2 "
           "during a previous attempt. org.apache.kafka:connect-json:jar:4.0.1 was not found in "
           "https://repo.maven.apache.org/maven2 during a previous attempt.")
    named = missing_artifacts(out)
    assert named == ["org.apache.kafka:connect-api:4.0.1", "org.apache.kafka:connect-json:4.0.1"]
    assert not any("kafka_2.13" in n for n in named)


def test_other_failures_name_nothing():
    assert missing_artifacts("[ERROR] Could not transfer metadata: Connection refused") == []
