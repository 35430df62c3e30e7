"""What kchaos runs on this machine and must undo (processes and their pid files, the reaper, small
disks, the journal of acts on other machines and the running of their undo), what it fetches and
builds into the cache (Maven jars, Java programs, Debian packages, libfaketime), Kafka's own tools,
and free ports. Nothing here knows a Cluster: Kafka's tools ask for a ``ToolTarget``."""
